#!/usr/bin/env bash
# Configures and builds one flavour of coexist.
#   scripts/build.sh [--sanitize address,undefined|thread] [--target T]...
# The default flavour goes to build/ (build/coexist); a sanitizer flavour to
# build-<sanitizers>/. Uses Ninja and -j2 (the CI machine has 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) sanitize="$2"; shift 2 ;;
    --target) targets+=(--target "$2"); shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done

build_dir=build
[[ -n "$sanitize" ]] && build_dir="build-${sanitize//,/-}"
jobs="${COEXIST_JOBS:-2}"

# Warnings are errors in the default build. Sanitizer instrumentation makes
# GCC 12 report false warnings inside <regex> and Boost.Asio's coroutine
# frames (maybe-uninitialized, mismatched-new-delete), so those builds warn
# without failing.
# They also build at -O1 and without the benchmarks: on 2 cores that roughly
# halves their compile time, and the checks do not need -O2.
flavour=(-DCOEXIST_WERROR=ON)
[[ -n "$sanitize" ]] && flavour=(-DCOEXIST_WERROR=OFF -DCOEXIST_BUILD_BENCH=OFF
                                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1")
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCOEXIST_SANITIZE="$sanitize" "${flavour[@]}" >/dev/null
fi
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"

#!/usr/bin/env bash
# Installs every Debian package coexist needs to build, test and run.
# A no-op (no apt call at all) when everything is already installed.
# Works as root or as a user with sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  libpqxx-dev libpq-dev postgresql-15 postgresql-client-15
  libboost-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libsystemd-dev
  libhowardhinnant-date-dev tzdata prometheus-cpp-dev libcivetweb-dev systemd
  googletest libgtest-dev libgmock-dev
  util-linux procps stress-ng curl
  postgresql-15-prioritize
  chromium
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 69; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# The postgresql package would create and start a system cluster; coexist
# starts its own throwaway clusters, so keep the package from starting one.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${sudo_cmd[@]}" chmod +x /usr/sbin/policy-rc.d
  trap '"${sudo_cmd[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

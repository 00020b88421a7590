#pragma once

// Private to config/: reading `online.custom_kinds`, the transaction kinds a
// user writes as scripts (docs/online-sim.md, "Custom kinds"). Include from
// .cpp files only (it brings in yaml-cpp through the Section).

#include <vector>

#include "config/config.h"
#include "config_core/yaml_reader.h"

namespace coexist::config {

// Reads the map NAME -> {script: [lines]} of `s` (online.custom_kinds) into
// `out`, in file order. Throws ConfigError at the offending line: a name
// that is not an identifier or is a built-in kind's, a missing or empty
// script, one without a SQL statement, a \set or \sleep it cannot read, an
// unknown command, a placeholder not set on an earlier line, a $n written
// by hand, two statements on one line, more than 16 placeholders.
void ReadCustomKinds(Section& s, std::vector<CustomKind>& out);

}  // namespace coexist::config

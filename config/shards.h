#pragma once

// Private to config/: reading `database.shards`, `database.shard_by` and
// `database.max_parallel_shards` (docs/configuration.md, "database"). Include
// from .cpp files only (it brings in yaml-cpp through the Section).

#include "config/config.h"
#include "config_core/yaml_reader.h"

namespace coexist::config {

// Reads the shard keys of the `database:` map `s` (whose node is `node`)
// into `out`; database.url must be read already. Throws ConfigError at the
// offending place: an entry without a name or url, a name that is not a
// shard name or is given twice, shards beside database.url, shard_by or
// max_parallel_shards without shards, keys ranges without shard_by: range,
// and under range a shard without keys, a range whose from is not below its
// to, and ranges that overlap or leave keys without a shard (the lowest
// range has no from, the highest no to, and each from is the to before it).
void ReadShards(Section& s, const YAML::Node& node, DatabaseConfig& out);

}  // namespace coexist::config

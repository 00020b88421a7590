#pragma once

// A job over several databases (`database.shards`, docs/scale-out.md): the
// fan-out of `batch run`, and where `enqueue` sends each item. Each shard is
// a database of its own, with its own coexist schema, target rows, queue,
// runs and job lock: a run on one shard is an ordinary run with every
// guarantee of docs/batch.md, and knows nothing of the others. What one
// shard's run throws stays with that shard; the others go on.
//
// Thread safety: RunShards starts and joins its own threads; call it from
// one. The routing functions are pure.

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"

namespace coexist::batch {

// One database of the job: its name (database.shards[i].name) and its
// connection string, which may hold a password: never log it.
struct Shard {
  std::string name;
  std::string conninfo;
};

// Calls work(i) for each i in [0, count), at most `max_parallel` at a time,
// each on a thread of its own; returns what each call threw (nullptr when
// it returned), by i.
std::vector<std::exception_ptr> ForEachShard(size_t count, int max_parallel,
                                             const std::function<void(size_t)>& work);

// The configuration as the run on shard `name` uses it: a control socket is
// the shard's own (pacing.control_socket + "." + name), as one process runs
// several shards at once.
config::Config ConfigForShard(const config::Config& config, const std::string& name);

// How the run on one shard ended: a summary, or what it threw (JobBusyError
// when another run holds the job there, TempFailError when the shard is
// unreachable, ConfigError when its catalog refuses the configuration, ...).
struct ShardRun {
  std::string shard;
  std::optional<RunSummary> summary;
  std::exception_ptr error;
};

// Runs the job on every shard, database.max_parallel_shards at a time, with
// `options` for each (one stop flag stops them all). Never throws for a
// shard's failure: it is in that shard's ShardRun. In the order of `shards`.
std::vector<ShardRun> RunShards(const std::vector<Shard>& shards, const config::Config& config,
                                const RunOptions& options = {});

// --- Where enqueue sends an item (database.shard_by) ---

// A key as the database stores it (the key type's canonical text, 0017):
// integer keys are canonical once parsed (ParseCsv, ParseJsonLines); a
// uuid is lower case, 8-4-4-4-12 (braces and other hyphenations dropped);
// text as it is. A uuid that is not one is left as it is, for the insert to
// refuse.
std::string CanonicalKey(const std::string& key, const std::string& key_type);

// FNV-1a, 64 bits, of `text`'s bytes: shard_by: hash sends a key to shard
// number FNV1a64(canonical key) % (number of shards), in the order of
// database.shards.
std::uint64_t Fnv1a64(const std::string& text);

// The position in database.shards of the shard that holds `key` under
// shard_by range or hash. `key` is canonical (CanonicalKey).
size_t ShardOfKey(const std::string& key, const config::DatabaseConfig& database);

// Splits items read from `source` (a file, "stdin") among database.shards
// (the result has one list per shard, in that order) by database.shard_by:
// range and hash by their keys (all keys of an item of several records must
// go to one shard), column by the item's shard field. With `only` (--shard
// NAME) every item must go to that shard; without shard_by they all do.
// Throws Error(kDataError) naming source:line for an item whose keys go to
// two shards, that names no shard or an unknown one under column, or goes
// to another shard than `only`; config::ConfigError at database.shard_by
// for range over keys that are not integers, and at database.shards when
// shard_by is not set and `only` is empty.
std::vector<std::vector<EnqueueItem>> RouteItems(std::vector<EnqueueItem> items,
                                                 const config::DatabaseConfig& database,
                                                 const std::string& key_type,
                                                 const std::string& source,
                                                 const std::string& only = {});

}  // namespace coexist::batch

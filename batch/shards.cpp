#include "batch/shards.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "config_core/config_error.h"
#include "db/server.h"
#include "db/target_table.h"

namespace coexist::batch {
namespace {

// Each item's line, as messages name it.
std::string At(const std::string& source, const EnqueueItem& item) {
  return source + ":" + std::to_string(item.line) + ": ";
}

[[noreturn]] void BadItem(const std::string& source, const EnqueueItem& item,
                          const std::string& message, const std::string& hint) {
  throw Error(ExitCode::kDataError, At(source, item) + message, hint);
}

// The shard an item goes to, by position in database.shards.
size_t Route(const EnqueueItem& item, const config::DatabaseConfig& database,
             const std::string& key_type, const std::string& source) {
  const auto& shards = database.shards;
  if (database.shard_by == config::ShardBy::kColumn) {
    if (item.shard.empty()) {
      BadItem(source, item, "the item names no shard",
              "shard_by is column: give each item its shard (CSV: key,payload,idempotency_key,"
              "shard; JSON lines: \"shard\": \"" +
                  shards.front().name + "\").");
    }
    for (size_t i = 0; i < shards.size(); ++i) {
      if (shards[i].name == item.shard) return i;
    }
    std::string names;
    for (const auto& shard : shards) names += (names.empty() ? "" : ", ") + shard.name;
    BadItem(source, item, "unknown shard '" + item.shard + "'",
            "the shards of " + database.shards_at.file + " are " + names + ".");
  }
  std::vector<std::string> keys = item.keys.empty() ? std::vector{item.key} : item.keys;
  std::optional<size_t> found;
  for (const auto& key : keys) {
    size_t at = ShardOfKey(CanonicalKey(key, key_type), database);
    if (found && *found != at) {
      BadItem(
          source, item,
          "the item's keys are on two shards: " + shards[*found].name + " and " + shards[at].name,
          "an item's records are applied in one transaction, on one database: its keys must "
          "be on one shard (co-locate them, e.g. by tenant, and route by a shard field: "
          "shard_by: column).");
    }
    found = at;
  }
  return *found;
}

}  // namespace

std::vector<std::exception_ptr> ForEachShard(size_t count, int max_parallel,
                                             const std::function<void(size_t)>& work) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  auto loop = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    size_t threads = std::min(count, static_cast<size_t>(std::max(1, max_parallel)));
    std::vector<std::jthread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(loop);
  }  // joined
  return errors;
}

config::Config ConfigForShard(const config::Config& config, const std::string& name) {
  config::Config own = config;
  if (!own.pacing.control_socket.empty()) own.pacing.control_socket += "." + name;
  return own;
}

std::vector<ShardRun> RunShards(const std::vector<Shard>& shards, const config::Config& config,
                                const RunOptions& options) {
  std::vector<ShardRun> runs(shards.size());
  auto errors = ForEachShard(shards.size(), config.database.max_parallel_shards, [&](size_t i) {
    const Shard& shard = shards[i];
    runs[i].shard = shard.name;
    spdlog::info("shard run starting shard={} {}", shard.name,
                 db::DescribeConninfo(shard.conninfo));
    runs[i].summary = Run(shard.conninfo, ConfigForShard(config, shard.name), options);
    spdlog::info("shard run finished shard={} run_id={} outcome={}", shard.name,
                 runs[i].summary->run_id, runs[i].summary->outcome);
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].shard = shards[i].name;
    runs[i].error = errors[i];
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      spdlog::error("shard run failed shard={} error={}", shards[i].name,
                    log::Value(db::RedactPasswords(e.what(), shards[i].conninfo)));
    } catch (...) {
      spdlog::error("shard run failed shard={}", shards[i].name);
    }
  }
  return runs;
}

std::string CanonicalKey(const std::string& key, const std::string& key_type) {
  if (key_type != "uuid") return key;
  std::string hex;
  std::string_view text = key;
  if (text.size() >= 2 && text.front() == '{' && text.back() == '}') {
    text = text.substr(1, text.size() - 2);
  }
  for (char c : text) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return key;
    hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (hex.size() != 32) return key;
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

std::uint64_t Fnv1a64(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

size_t ShardOfKey(const std::string& key, const config::DatabaseConfig& database) {
  const auto& shards = database.shards;
  if (database.shard_by == config::ShardBy::kHash) return Fnv1a64(key) % shards.size();
  long long value = std::stoll(key);  // canonical integer text: RouteItems checked the type
  for (size_t i = 0; i < shards.size(); ++i) {
    if ((!shards[i].from || *shards[i].from <= value) && (!shards[i].to || value < *shards[i].to)) {
      return i;
    }
  }
  // The loader refuses ranges that leave a key without a shard.
  throw Error(ExitCode::kSoftware, "key " + key + " is in no shard's range");
}

std::vector<std::vector<EnqueueItem>> RouteItems(std::vector<EnqueueItem> items,
                                                 const config::DatabaseConfig& database,
                                                 const std::string& key_type,
                                                 const std::string& source,
                                                 const std::string& only) {
  const auto& shards = database.shards;
  std::vector<std::vector<EnqueueItem>> routed(shards.size());
  auto only_at = std::find_if(shards.begin(), shards.end(),
                              [&](const config::ShardConfig& s) { return s.name == only; });
  if (database.shard_by == config::ShardBy::kNone) {
    if (only_at == shards.end()) {
      throw config::ConfigError(
          database.shards_at, "database.shards",
          "shard_by is not set, so items read from " + source + " have no shard to go to",
          "set database.shard_by (range, hash or column), pass --shard NAME to enqueue them all "
          "on one shard, or enqueue with a query (enqueue.select, --select): it runs on every "
          "shard and each shard enqueues its own rows.");
    }
    routed[only_at - shards.begin()] = std::move(items);
    return routed;
  }
  if (database.shard_by == config::ShardBy::kRange && !db::IsIntegerType(key_type)) {
    throw config::ConfigError(database.shard_by_at, "database.shard_by",
                              "range needs integer keys, and the target's key is " + key_type,
                              "route by hash, or by a shard field in the input (column).");
  }
  for (auto& item : items) {
    size_t at = Route(item, database, key_type, source);
    if (only_at != shards.end() && shards.begin() + at != only_at) {
      BadItem(source, item,
              "the item goes to shard " + shards[at].name + ", not to " + only + " (--shard)",
              "enqueue it without --shard, or on its own shard.");
    }
    routed[at].push_back(std::move(item));
  }
  return routed;
}

}  // namespace coexist::batch

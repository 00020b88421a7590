#include "config/shards.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <numeric>

namespace coexist::config {
namespace {

constexpr long long kLowest = std::numeric_limits<long long>::min();
constexpr long long kHighest = std::numeric_limits<long long>::max();

bool IsShardName(const std::string& name) {
  return !name.empty() && name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// One entry of the list as read, with what the coverage check points at.
struct Entry {
  YAML::Node node;
  YAML::Node keys;  // undefined when the entry has none
  std::string path;
};

std::string Quoted(const std::string& name) { return "'" + name + "'"; }

// Under shard_by: range: the ranges, sorted by their lower end, cover
// every bigint once. Each problem is located at the range's end that causes
// it (the keys map when that end is not written).
void CheckCoverage(const std::vector<Entry>& entries, const std::vector<ShardConfig>& shards,
                   const std::string& file) {
  std::vector<size_t> order(shards.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return shards[a].from.value_or(kLowest) < shards[b].from.value_or(kLowest);
  });
  // Fails at the `end` ("from" or "to") of the range of shards[order[at]].
  auto fail = [&](size_t at, const char* end, const std::string& message, const std::string& hint) {
    const Entry& e = entries[order[at]];
    bool written = e.keys[end].IsDefined();
    Section(e.node, e.path, file)
        .Fail(written ? e.keys[end] : e.keys, written ? std::string("keys.") + end : "keys",
              message, hint);
  };
  const ShardConfig& first = shards[order.front()];
  if (first.from) {
    fail(0, "from", "keys below " + std::to_string(*first.from) + " have no shard",
         "leave from out of the lowest range (shard " + Quoted(first.name) +
             ") so that every key has a shard.");
  }
  for (size_t i = 1; i < order.size(); ++i) {
    const ShardConfig& prev = shards[order[i - 1]];
    const ShardConfig& cur = shards[order[i]];
    long long from = cur.from.value_or(kLowest);
    if (!prev.to || from < *prev.to) {
      fail(i, "from",
           "shard " + Quoted(cur.name) + " holds keys that shard " + Quoted(prev.name) +
               " holds too",
           prev.to
               ? "the ranges must not overlap: start this range at " + std::to_string(*prev.to) +
                     ", where the range of shard " + Quoted(prev.name) + " ends (to is exclusive)."
               : "the ranges must not overlap: give shard " + Quoted(prev.name) +
                     " a to where this range starts.");
    }
    if (from > *prev.to) {
      fail(
          i, "from",
          "keys " + std::to_string(*prev.to) + " to " + std::to_string(from - 1) + " have no shard",
          "start this range at " + std::to_string(*prev.to) + ", where the range of shard " +
              Quoted(prev.name) + " ends (to is exclusive), or give those keys a shard.");
    }
  }
  const ShardConfig& last = shards[order.back()];
  if (last.to) {
    fail(order.size() - 1, "to", "keys from " + std::to_string(*last.to) + " up have no shard",
         "leave to out of the highest range (shard " + Quoted(last.name) +
             ") so that every key has a shard.");
  }
}

// One entry of database.shards; `seen` holds the names before it.
ShardConfig ReadShard(Section& database, const YAML::Node& node, size_t index, Entry& entry,
                      const std::vector<ShardConfig>& seen, ShardBy shard_by) {
  auto given = [&](const char* key) { return node[key].IsDefined() && !node[key].IsNull(); };
  if (!node.IsMap() || !given("name") || !given("url")) {
    database.Fail(node, "shards",
                  "entry [" + std::to_string(index) + "] is not a map with a name and a url",
                  "each shard is {name: tokyo, url: postgresql://...}; under shard_by: range "
                  "also keys: {from: FIRST, to: PAST_LAST}.");
  }
  entry.node = node;
  entry.path = database.KeyPath("shards[" + std::to_string(index) + "]");
  Section s(node, entry.path, database.file());
  ShardConfig shard;
  s.String("name", shard.name);
  if (!IsShardName(shard.name)) {
    s.Fail(node["name"], "name", "'" + shard.name + "' is not a shard name",
           "letters, digits, _ and -, at most 63 characters: it names the shard in commands "
           "(--shard), logs and summaries.");
  }
  for (const auto& other : seen) {
    if (other.name == shard.name) {
      s.Fail(node["name"], "name", "shard " + Quoted(shard.name) + " is listed twice",
             "it was first listed at " + other.at.ToString() + "; give each shard its own name.");
    }
  }
  s.String("url", shard.url);
  shard.at = s.MarkOf(node["name"]);
  shard.url_at = s.MarkOf(node["url"]);
  if (auto keys = s.Map("keys")) {
    entry.keys = node["keys"];
    if (shard_by != ShardBy::kRange) {
      s.Fail(node["keys"], "keys", "keys ranges route items only under shard_by: range",
             "set database.shard_by: range, or leave keys out.");
    }
    long long from = kLowest, to = kHighest;
    keys->Int64("from", from, kLowest, kHighest);
    keys->Int64("to", to, kLowest, kHighest);
    keys->Finish();
    if (entry.keys["from"].IsDefined()) shard.from = from;
    if (entry.keys["to"].IsDefined()) shard.to = to;
    if (shard.from && shard.to && *shard.to <= *shard.from) {
      keys->Fail(entry.keys["to"], "to",
                 "to (" + std::to_string(*shard.to) + ") is not above from (" +
                     std::to_string(*shard.from) + ")",
                 "to is exclusive: the range holds from, from + 1, ..., to - 1.");
    }
  } else if (shard_by == ShardBy::kRange) {
    s.Fail(node, "keys",
           "shard " + Quoted(shard.name) + " has no keys range, and shard_by is range",
           "give each shard the keys it holds: keys: {from: FIRST, to: PAST_LAST}; leave from out "
           "of the lowest range and to out of the highest.");
  }
  s.Finish();
  return shard;
}

}  // namespace

void ReadShards(Section& s, const YAML::Node& node, DatabaseConfig& out) {
  s.Enum("shard_by", out.shard_by,
         {{"range", ShardBy::kRange}, {"hash", ShardBy::kHash}, {"column", ShardBy::kColumn}});
  s.Int("max_parallel_shards", out.max_parallel_shards, 1, 256);
  auto list = s.Sequence("shards");
  if (!list) {
    for (const char* key : {"shard_by", "max_parallel_shards"}) {
      if (node[key].IsDefined()) {
        s.Fail(node[key], key, "no shards are listed",
               "list the job's databases under database.shards, or leave " + std::string(key) +
                   " out.");
      }
    }
    return;
  }
  out.shards_at = s.MarkOf(node["shards"]);
  if (node["shard_by"].IsDefined()) out.shard_by_at = s.MarkOf(node["shard_by"]);
  if (out.url) {
    s.Fail(node["shards"], "shards", "database.url and database.shards are both set",
           "a job over several databases names each one under shards; leave url out.");
  }
  if (list->size() == 0) {
    s.Fail(*list, "shards", "the list is empty",
           "list each database as {name: tokyo, url: postgresql://...}, or leave shards out for "
           "one database.");
  }
  std::vector<Entry> entries(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    out.shards.push_back(ReadShard(s, (*list)[i], i, entries[i], out.shards, out.shard_by));
  }
  if (out.shard_by == ShardBy::kRange) CheckCoverage(entries, out.shards, s.file());
}

}  // namespace coexist::config

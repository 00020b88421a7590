// A job over several databases (database.shards): the configuration's
// shard rules, enqueue's routing, and `batch run`, `enqueue`, `db install`
// and `config check --database` over three databases of the test cluster,
// with one shard failing or unreachable.

#include "batch/shards.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "config/config.h"
#include "db/connection.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"
#include "tests/support/shell_command.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using coexist::testing::ClusterEnvironment;

// --- The configuration ---

// The message of the ConfigError that loading `yaml` throws, and its hint.
std::pair<std::string, std::string> ConfigErrorOf(const std::string& yaml) {
  try {
    config::LoadString(yaml, "job.yaml");
  } catch (const config::ConfigError& e) {
    return {e.what(), e.hint()};
  }
  return {"(loaded)", ""};
}

constexpr const char* kTwoRanges =
    "database:\n"
    "  shard_by: range\n"
    "  shards:\n"
    "    - {name: low, url: dbname=a, keys: {to: 100}}\n";

TEST(ShardConfig, ReadsShardsRangesAndTheBound) {
  auto config = config::LoadString(std::string(kTwoRanges) +
                                       "    - {name: high, url: dbname=b, keys: {from: 100}}\n"
                                       "  max_parallel_shards: 2\n",
                                   "job.yaml");
  const auto& database = config.database;
  ASSERT_EQ(database.shards.size(), 2u);
  EXPECT_EQ(database.shard_by, config::ShardBy::kRange);
  EXPECT_EQ(database.max_parallel_shards, 2);
  EXPECT_EQ(database.shards[0].name, "low");
  EXPECT_EQ(database.shards[0].url, "dbname=a");
  EXPECT_FALSE(database.shards[0].from.has_value());
  EXPECT_EQ(database.shards[0].to, 100);
  EXPECT_EQ(database.shards[1].from, 100);
  EXPECT_FALSE(database.shards[1].to.has_value());
  EXPECT_EQ(database.shards[1].url_at.ToString(), "job.yaml:5:25");
  EXPECT_FALSE(database.url.has_value());
}

// Ranges that leave a key without a shard, or give one two, are refused
// where they are written.
TEST(ShardConfig, RoutingThatLeavesAKeyWithoutAShardIsALocatedError) {
  struct Case {
    std::string more, error, hint;
  };
  for (const auto& c : std::vector<Case>{
           {"    - {name: high, url: dbname=b, keys: {from: 200}}\n",
            "job.yaml:5:48: database.shards[1].keys.from: keys 100 to 199 have no shard",
            "start this range at 100, where the range of shard 'low' ends (to is exclusive), or "
            "give those keys a shard."},
           {"    - {name: high, url: dbname=b, keys: {from: 50}}\n",
            "job.yaml:5:48: database.shards[1].keys.from: shard 'high' holds keys that shard "
            "'low' holds too",
            "the ranges must not overlap: start this range at 100, where the range of shard 'low' "
            "ends (to is exclusive)."},
           {"    - {name: high, url: dbname=b, keys: {from: 100, to: 500}}\n",
            "job.yaml:5:57: database.shards[1].keys.to: keys from 500 up have no shard",
            "leave to out of the highest range (shard 'high') so that every key has a shard."},
           {"    - {name: high, url: dbname=b}\n",
            "job.yaml:5:7: database.shards[1].keys: shard 'high' has no keys range, and shard_by "
            "is range",
            "give each shard the keys it holds: keys: {from: FIRST, to: PAST_LAST}; leave from "
            "out of the lowest range and to out of the highest."},
       }) {
    auto [error, hint] = ConfigErrorOf(kTwoRanges + c.more);
    EXPECT_EQ(error, c.error);
    EXPECT_EQ(hint, c.hint);
  }
  auto [error, hint] = ConfigErrorOf(
      "database:\n  shard_by: range\n  shards:\n"
      "    - {name: a, url: dbname=a, keys: {from: 1, to: 10}}\n"
      "    - {name: b, url: dbname=b, keys: {from: 10}}\n");
  EXPECT_EQ(error, "job.yaml:4:45: database.shards[0].keys.from: keys below 1 have no shard");
  EXPECT_EQ(hint, "leave from out of the lowest range (shard 'a') so that every key has a shard.");
}

TEST(ShardConfig, RefusesWhatCannotNameOneDatabasePerShard) {
  struct Case {
    std::string yaml, error;
  };
  for (const auto& c : std::vector<Case>{
           {"database:\n  url: dbname=x\n  shards:\n    - {name: a, url: dbname=a}\n",
            "job.yaml:4:5: database.shards: database.url and database.shards are both set"},
           {"database:\n  shards:\n    - {name: a, url: dbname=a}\n    - {name: a, url: "
            "dbname=b}\n",
            "job.yaml:4:14: database.shards[1].name: shard 'a' is listed twice"},
           {"database:\n  shards:\n    - {name: a b, url: dbname=a}\n",
            "job.yaml:3:14: database.shards[0].name: 'a b' is not a shard name"},
           {"database:\n  shards:\n    - {name: a}\n",
            "job.yaml:3:7: database.shards: entry [0] is not a map with a name and a url"},
           {"database:\n  shards: []\n", "job.yaml:2:11: database.shards: the list is empty"},
           {"database:\n  shard_by: hash\n",
            "job.yaml:2:13: database.shard_by: no shards are listed"},
           {"database:\n  shard_by: hash\n  shards:\n    - {name: a, url: dbname=a, keys: {to: "
            "5}}\n",
            "job.yaml:4:38: database.shards[0].keys: keys ranges route items only under "
            "shard_by: range"},
       }) {
    EXPECT_EQ(ConfigErrorOf(c.yaml).first, c.error) << c.yaml;
  }
}

// --- Routing (pure) ---

std::vector<batch::EnqueueItem> Items(const std::vector<std::string>& keys) {
  std::vector<batch::EnqueueItem> items;
  for (size_t i = 0; i < keys.size(); ++i) {
    batch::EnqueueItem item;
    item.key = keys[i];
    item.line = static_cast<long>(i) + 1;
    items.push_back(item);
  }
  return items;
}

std::vector<size_t> Sizes(const std::vector<std::vector<batch::EnqueueItem>>& routed) {
  std::vector<size_t> sizes;
  for (const auto& list : routed) sizes.push_back(list.size());
  return sizes;
}

TEST(ShardRouting, HashIsFnv1aOfTheCanonicalKey) {
  // The published test vectors of FNV-1a 64.
  EXPECT_EQ(batch::Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(batch::Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(batch::CanonicalKey("{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}", "uuid"),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  EXPECT_EQ(batch::CanonicalKey("a0eebc999c0b4ef8bb6d6bb9bd380a11", "uuid"),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  EXPECT_EQ(batch::CanonicalKey("not-a-uuid", "uuid"), "not-a-uuid");
  EXPECT_EQ(batch::CanonicalKey("Abc", "text"), "Abc");
  auto config = config::LoadString(
      "database:\n  shard_by: hash\n  shards:\n    - {name: a, url: dbname=a}\n"
      "    - {name: b, url: dbname=b}\n    - {name: c, url: dbname=c}\n",
      "job.yaml");
  std::vector<std::string> keys;
  for (int k = 1; k <= 300; ++k) keys.push_back(std::to_string(k));
  auto routed = batch::RouteItems(Items(keys), config.database, "bigint", "items.csv");
  size_t total = 0;
  for (size_t shard = 0; shard < routed.size(); ++shard) {
    // Roughly even, and each where the rule says.
    EXPECT_GT(routed[shard].size(), 70u) << shard;
    total += routed[shard].size();
    for (const auto& item : routed[shard]) {
      EXPECT_EQ(batch::Fnv1a64(item.key) % 3, shard) << item.key;
    }
  }
  EXPECT_EQ(total, 300u);
}

TEST(ShardRouting, RangesColumnsAndWhatCannotBeRouted) {
  auto ranges = config::LoadString(
      std::string(kTwoRanges) + "    - {name: high, url: dbname=b, keys: {from: 100}}\n",
      "job.yaml");
  EXPECT_EQ(Sizes(batch::RouteItems(Items({"-5", "99", "100", "7000"}), ranges.database, "bigint",
                                    "items.csv")),
            (std::vector<size_t>{2, 2}));
  // An item of several records goes where all its keys are.
  auto several = Items({"1"});
  several[0].keys = {"1", "150"};
  several[0].line = 7;
  try {
    batch::RouteItems(several, ranges.database, "bigint", "items.jsonl");
    FAIL() << "routed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kDataError);
    EXPECT_EQ(std::string(e.what()),
              "items.jsonl:7: the item's keys are on two shards: low and high");
  }
  // --shard with a rule: the items must be that shard's.
  try {
    batch::RouteItems(Items({"5", "500"}), ranges.database, "bigint", "items.csv", "low");
    FAIL() << "routed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "items.csv:2: the item goes to shard high, not to low (--shard)");
  }
  // Ranges need integer keys: located at shard_by.
  try {
    batch::RouteItems(Items({"x"}), ranges.database, "text", "items.csv");
    FAIL() << "routed";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "job.yaml:2:13: database.shard_by: range needs integer keys, and the target's key is "
              "text");
  }
  auto columns = config::LoadString(
      "database:\n  shard_by: column\n  shards:\n    - {name: a, url: dbname=a}\n"
      "    - {name: b, url: dbname=b}\n",
      "job.yaml");
  auto items = Items({"1", "2", "3"});
  items[0].shard = "b";
  items[1].shard = "b";
  items[2].shard = "a";
  EXPECT_EQ(Sizes(batch::RouteItems(items, columns.database, "bigint", "items.csv")),
            (std::vector<size_t>{1, 2}));
  items[2].shard = "z";
  try {
    batch::RouteItems(items, columns.database, "bigint", "items.csv");
    FAIL() << "routed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "items.csv:3: unknown shard 'z'");
    EXPECT_EQ(e.hint(), "the shards of job.yaml are a, b.");
  }
  // No rule: only --shard says where items go.
  auto unruled = config::LoadString(
      "database:\n  shards:\n    - {name: a, url: dbname=a}\n    - {name: b, url: dbname=b}\n",
      "job.yaml");
  EXPECT_EQ(
      Sizes(batch::RouteItems(Items({"1", "2"}), unruled.database, "bigint", "items.csv", "b")),
      (std::vector<size_t>{0, 2}));
  try {
    batch::RouteItems(Items({"1"}), unruled.database, "bigint", "items.csv");
    FAIL() << "routed";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "job.yaml:3:5: database.shards: shard_by is not set, so items read from items.csv "
              "have no shard to go to");
  }
}

// The input's shard field is read under shard_by: column only.
TEST(ShardRouting, TheInputNamesTheShardOnlyWhenAskedTo) {
  std::istringstream csv("key,payload,idempotency_key,shard\n1,,,b\n2,{},k2\n");
  auto items = batch::ParseCsv(csv, "items.csv", true, /*shard_field=*/true);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].shard, "b");
  EXPECT_EQ(items[0].line, 2);
  EXPECT_EQ(items[1].shard, "");
  EXPECT_EQ(items[1].idempotency_key, "k2");
  std::istringstream four("1,,,b\n");
  try {
    batch::ParseCsv(four, "items.csv");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "items.csv:1: more than 3 fields");
  }
  std::istringstream jsonl("{\"key\": 5, \"shard\": \"a\"}\n");
  EXPECT_EQ(batch::ParseJsonLines(jsonl, "items.jsonl", true, true).at(0).shard, "a");
  std::istringstream unasked("{\"key\": 5, \"shard\": \"a\"}\n");
  try {
    batch::ParseJsonLines(unasked, "items.jsonl");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "items.jsonl:1: \"shard\" names the item's shard only under database.shard_by: "
              "column");
  }
}

// --- Three databases of the test cluster ---

using testing::Outcome;
using testing::Slurp;

// Three copies of the template database (schema, products 1..100 with
// stock 1000, a ledger each), the job's file over them, and the coexist
// binary run against it.
class ShardedJob : public ::testing::Test {
 protected:
  static constexpr int kShards = 3;

  void SetUp() override {
    static int counter = 0;
    auto admin = db::Connect(Env().ConnectionString("postgres"));
    for (int i = 0; i < kShards; ++i) {
      names_.push_back(fmt::format("shard{}_{}_{}", ++counter, getpid(), i + 1));
      pqxx::nontransaction(*admin).exec("CREATE DATABASE " + names_.back() +
                                        " TEMPLATE coexist_template");
      Exec(i, "CREATE TABLE ledger (key bigint NOT NULL)");
    }
    scratch_ = fs::temp_directory_path() / ("coexist-shards-" + names_.front());
    fs::create_directories(scratch_);
  }
  void TearDown() override {
    fs::remove_all(scratch_);
    auto admin = db::Connect(Env().ConnectionString("postgres"));
    for (const auto& name : names_) {
      pqxx::nontransaction(*admin).exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    }
  }

  static ClusterEnvironment& Env() { return ClusterEnvironment::Get(); }
  std::string Url(int shard) const { return Env().ConnectionString(names_[shard]); }

  long long Count(int shard, const std::string& sql) {
    auto conn = db::Connect(Url(shard));
    pqxx::work tx(*conn);
    return tx.exec1(sql)[0].as<long long>();
  }
  void Exec(int shard, const std::string& sql) {
    auto conn = db::Connect(Url(shard));
    pqxx::nontransaction(*conn).exec(sql);
  }

  // The job over the three shards, s1 keys below 34, s2 34..66, s3 from 67;
  // `url_of_s2` replaces s2's url (an unreachable one); `batch_more` adds
  // lines to its batch section.
  fs::path Job(const std::string& url_of_s2 = "", const std::string& batch_more = "") {
    std::string urls[kShards] = {Url(0), url_of_s2.empty() ? Url(1) : url_of_s2, Url(2)};
    std::string yaml = fmt::format(
        "database:\n"
        "  shard_by: range\n"
        "  max_parallel_shards: 2\n"
        "  shards:\n"
        "    - {{name: s1, url: \"{}\", keys: {{to: 34}}}}\n"
        "    - {{name: s2, url: \"{}\", keys: {{from: 34, to: 67}}}}\n"
        "    - {{name: s3, url: \"{}\", keys: {{from: 67}}}}\n"
        "batch:\n  job: settle\n  chunk_size: 10\n{}",
        urls[0], urls[1], urls[2], batch_more);
    return Write("job.yaml", yaml + testing::LedgerOperation());
  }

  fs::path Write(const std::string& name, const std::string& text) {
    std::ofstream(scratch_ / name) << text;
    return scratch_ / name;
  }

  Outcome Run(const std::string& args) {
    std::string command = "env -u COEXIST_DATABASE_URL -u PGHOST -u PGDATABASE -u PGSERVICE " +
                          std::string(COEXIST_BINARY) + " --log-level warn " + args;
    return testing::RunShell(command, scratch_);
  }

  // keys 1..100, one per line.
  fs::path Items() {
    std::string csv;
    for (int k = 1; k <= 100; ++k) csv += std::to_string(k) + "\n";
    return Write("items.csv", csv);
  }

  long long Queued(int shard) {
    return Count(shard,
                 "SELECT count(*) FROM coexist.items WHERE job = 'settle' AND state = 'queued'");
  }

  std::vector<std::string> names_;
  fs::path scratch_;
};

// Enqueue sends each key to its range's shard; one `batch run` drains all
// three, each item applied once on its own shard; with one shard's target
// gone, that shard fails by name (exit 78) and the others still drain.
TEST_F(ShardedJob, DrainsEveryShardAndNamesTheShardThatFailed) {
  auto job = Job();
  auto enqueued = Run("-c " + job.string() + " enqueue --file " + Items().string());
  ASSERT_EQ(enqueued.status, 0) << enqueued.err;
  EXPECT_NE(enqueued.out.find("enqueued for job settle on shard s2: 33 added, 0 duplicates"),
            std::string::npos)
      << enqueued.out;
  EXPECT_NE(enqueued.out.find("enqueued for job settle on 3 shards: 100 added, 0 duplicates"),
            std::string::npos)
      << enqueued.out;
  EXPECT_EQ(Queued(0), 33);
  EXPECT_EQ(Queued(1), 33);
  EXPECT_EQ(Queued(2), 34);

  auto json = scratch_ / "run.json";
  auto run = Run("-c " + job.string() + " batch run --json " + json.string());
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("job settle on 3 shards (policy skip_locked): 3 succeeded"),
            std::string::npos)
      << run.out;
  auto summary = nlohmann::json::parse(Slurp(json));
  EXPECT_EQ(summary["done"], 100);
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["failed_shards"], nlohmann::json::array());
  const int low[kShards] = {1, 34, 67}, high[kShards] = {33, 66, 100};
  for (int i = 0; i < kShards; ++i) {
    EXPECT_EQ(summary["shards"][i]["shard"], "s" + std::to_string(i + 1));
    EXPECT_EQ(summary["shards"][i]["done"], high[i] - low[i] + 1);
    EXPECT_EQ(Queued(i), 0);
    // Exactly once, and only this shard's keys.
    EXPECT_EQ(Count(i, "SELECT count(*) FROM ledger"), high[i] - low[i] + 1);
    EXPECT_EQ(Count(i, "SELECT count(DISTINCT key) FROM ledger"), high[i] - low[i] + 1);
    EXPECT_EQ(Count(i, fmt::format("SELECT count(*) FROM ledger WHERE key NOT BETWEEN {} AND {}",
                                   low[i], high[i])),
              0);
    EXPECT_EQ(Count(i, fmt::format("SELECT count(*) FROM products WHERE stock = 1001 AND id "
                                   "BETWEEN {} AND {}",
                                   low[i], high[i])),
              high[i] - low[i] + 1);
  }

  // s2's target goes; the items of every shard are queued first.
  ASSERT_EQ(Run("-c " + job.string() + " enqueue --file " + Items().string()).status, 0);
  Exec(1, "ALTER TABLE products RENAME TO products_gone");
  run = Run("-c " + job.string() + " batch run --json " + json.string());
  EXPECT_EQ(run.status, 78) << run.out << run.err;
  EXPECT_NE(run.out.find("job settle on 3 shards (policy skip_locked): 1 failed, 2 succeeded"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  s2         -  failed            -        -      -       -    78\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  total                          67        0      0       0    78\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("config error: shard s2: " + job.string() +
                         ": target.table: table public.products does not exist\n"),
            std::string::npos)
      << run.err;
  summary = nlohmann::json::parse(Slurp(json));
  EXPECT_EQ(summary["exit_code"], 78);
  EXPECT_EQ(summary["failed_shards"], nlohmann::json::array({"s2"}));
  EXPECT_EQ(summary["shards"][1]["outcome"], "failed");
  EXPECT_EQ(summary["shards"][1]["exit_code"], 78);
  EXPECT_EQ(summary["shards"][0]["outcome"], "succeeded");
  EXPECT_EQ(summary["shards"][2]["done"], 34);
  EXPECT_EQ(Queued(0), 0);
  EXPECT_EQ(Queued(1), 33);  // untouched, for the run after the fix
  EXPECT_EQ(Queued(2), 0);
  EXPECT_EQ(Count(0, "SELECT count(*) FROM ledger"), 2 * 33);
}

// A range job over several databases: each shard's run walks its own
// table's matching rows (routing is enqueue's; a range job enqueues
// nothing), each applied once, and the fan-out sums them.
TEST_F(ShardedJob, ARangeJobWalksEachShardsOwnRowsOnce) {
  auto job = Job("", "  workers: 2\n  range: {where: \"id % 2 = 0\"}\n");
  long long evens[kShards], total = 0;
  for (int i = 0; i < kShards; ++i) {
    Exec(i, fmt::format("DELETE FROM products WHERE id > {}", 50 * (i + 1)));
    evens[i] = Count(i, "SELECT count(*) FROM products WHERE id % 2 = 0");
    total += evens[i];
  }
  ASSERT_GT(evens[0], 0);
  auto json = scratch_ / "run.json";
  auto run = Run("-c " + job.string() + " batch run --json " + json.string());
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  auto summary = nlohmann::json::parse(Slurp(json));
  EXPECT_EQ(summary["done"], total);
  for (int i = 0; i < kShards; ++i) {
    EXPECT_EQ(summary["shards"][i]["done"], evens[i]) << summary.dump();
    EXPECT_EQ(Count(i, "SELECT count(*) FROM ledger"), evens[i]);
    EXPECT_EQ(Count(i, "SELECT count(DISTINCT key) FROM ledger"), evens[i]);
    EXPECT_EQ(Count(i, "SELECT count(*) FROM ledger WHERE key % 2 <> 0"), 0);
    EXPECT_EQ(Count(i, "SELECT count(*) FROM coexist.range_checkpoints WHERE NOT finished"), 0);
    EXPECT_EQ(Count(i, "SELECT count(*) FROM coexist.items"), 0) << "nothing was enqueued";
  }
}

// An unreachable shard: `batch run` names it, exits 75 and runs the
// others; `enqueue` of a file enqueues nothing anywhere (all shards must
// be able to take their items), while `enqueue --shard` works its shard.
TEST_F(ShardedJob, AnUnreachableShardIsNamedAndTheOthersRun) {
  auto missing = scratch_ / "no-server";
  auto job = Job("host=" + missing.string() + " dbname=s2");
  auto enqueued = Run("-c " + job.string() + " enqueue --file " + Items().string());
  EXPECT_EQ(enqueued.status, 75);
  EXPECT_NE(enqueued.err.find("coexist: shard s2: cannot connect to the database host=" +
                              missing.string() + " dbname=s2"),
            std::string::npos)
      << enqueued.err;
  EXPECT_NE(enqueued.err.find("coexist: nothing was enqueued on any shard\n"), std::string::npos)
      << enqueued.err;
  EXPECT_EQ(Queued(0) + Queued(2), 0);

  for (const char* shard : {"s1", "s3"}) {
    auto one = Run("-c " + job.string() + " --shard " + shard +
                   " enqueue --select 'SELECT id FROM products WHERE id % 10 = 0'");
    ASSERT_EQ(one.status, 0) << one.err;
  }
  auto run = Run("-c " + job.string() + " batch run");
  EXPECT_EQ(run.status, 75) << run.out << run.err;
  EXPECT_NE(run.out.find("  s2         -  failed            -        -      -       -    75\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  total                          20        0      0       0    75\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("coexist: shard s2: cannot connect to the database"), std::string::npos)
      << run.err;
  EXPECT_EQ(Count(0, "SELECT count(*) FROM ledger"), 10);
  EXPECT_EQ(Count(2, "SELECT count(*) FROM ledger"), 10);
}

// db install and config check --database cover every shard; a command of
// one database needs --shard; --database-url cannot stand for three.
TEST_F(ShardedJob, InstallCheckAndTheCommandsOfOneDatabase) {
  auto job = Job();
  auto installed = Run("-c " + job.string() + " db install");
  ASSERT_EQ(installed.status, 0) << installed.err;
  for (const char* shard : {"s1", "s2", "s3"}) {
    EXPECT_NE(installed.out.find("shard " + std::string(shard) + ": coexist schema at version "),
              std::string::npos)
        << installed.out;
  }
  auto checked = Run("config check " + job.string() + " --database");
  ASSERT_EQ(checked.status, 0) << checked.err;
  EXPECT_NE(checked.out.find("  checked against shard s3: "), std::string::npos) << checked.out;

  Exec(2, "ALTER TABLE products RENAME TO products_gone");
  checked = Run("config check " + job.string() + " --database");
  EXPECT_EQ(checked.status, 78);
  EXPECT_EQ(checked.err, "config error: shard s3: " + job.string() +
                             ": target.table: table public.products does not exist\n"
                             "HINT: create it, or name an existing table (schema.table).\n");
  installed = Run("-c " + job.string() + " db install");
  EXPECT_EQ(installed.status, 78);
  EXPECT_NE(installed.out.find("shard s2: coexist schema"), std::string::npos) << installed.out;
  EXPECT_EQ(installed.out.find("shard s3: coexist schema"), std::string::npos) << installed.out;

  auto status = Run("-c " + job.string() + " queue status");
  EXPECT_EQ(status.status, 64);
  EXPECT_EQ(status.err, "coexist: " + job.string() +
                            " lists 3 shards (s1, s2, s3): this command works one database\n"
                            "HINT: pass --shard NAME to say which.\n");
  EXPECT_EQ(Run("-c " + job.string() + " --shard s2 queue status").status, 0);
  auto unknown = Run("-c " + job.string() + " --shard s9 queue status");
  EXPECT_EQ(unknown.status, 64);
  EXPECT_NE(unknown.err.find("lists no shard of that name"), std::string::npos) << unknown.err;
  // Each shard's run has its own control socket: PATH.NAME.
  auto socket = scratch_ / "ctl.sock";
  auto with_socket =
      Write("socket.yaml", Slurp(job) + "pacing:\n  control_socket: " + socket.string() + "\n");
  auto ctl = Run("-c " + with_socket.string() + " ctl status");
  EXPECT_EQ(ctl.status, 64);
  EXPECT_NE(ctl.err.find("pass --shard NAME: the run on shard NAME listens on " + socket.string() +
                         ".NAME."),
            std::string::npos)
      << ctl.err;
  ctl = Run("-c " + with_socket.string() + " --shard s2 ctl status");
  EXPECT_EQ(ctl.status, 69);  // no run is listening
  EXPECT_NE(ctl.err.find("cannot connect to control socket '" + socket.string() + ".s2'"),
            std::string::npos)
      << ctl.err;

  auto one_url = Run("-c " + job.string() + " --database-url '" + Url(0) + "' batch run");
  EXPECT_EQ(one_url.status, 64);
  EXPECT_NE(one_url.err.find("--database-url names one database, and " + job.string() +
                             " lists 3 shards (s1, s2, s3)"),
            std::string::npos)
      << one_url.err;
}

}  // namespace
}  // namespace coexist

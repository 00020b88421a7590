// The coexist executable as an operator runs it: exit statuses, messages,
// and the throwaway cluster's cleanup on exit and on signals.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/subprocess.h"
#include "schema/jobs.h"
#include "tests/support/database_test.h"
#include "tests/support/shell_command.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using coexist::testing::ClusterEnvironment;

using coexist::testing::Outcome;
using coexist::testing::Slurp;

// A folder for one test's files and throwaway clusters.
class CliTest : public coexist::testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    scratch_ = fs::temp_directory_path() /
               ("coexist-cli-" + std::to_string(getpid()) + "-" + database_name());
    fs::create_directories(scratch_);
    fs::permissions(scratch_, fs::perms::all);
  }
  void TearDown() override {
    fs::remove_all(scratch_);
    DatabaseTest::TearDown();
  }

  fs::path Write(const std::string& name, const std::string& text) {
    std::ofstream(scratch_ / name) << text;
    return scratch_ / name;
  }

  // Runs build/coexist with `args` (shell words) with no database configured
  // unless the args (or `env`, shell words such as "PGHOST=/x") say so,
  // throwaway clusters under the scratch folder.
  Outcome Run(const std::string& args, const std::string& env = "") {
    std::string command =
        "env -u COEXIST_DATABASE_URL -u PGHOST -u PGDATABASE -u PGSERVICE TMPDIR=" +
        scratch_.string() + " XDG_STATE_HOME=" + scratch_.string() + " HOME=" + scratch_.string() +
        " " + env + " " + COEXIST_BINARY + " " + args;
    return coexist::testing::RunShell(command, scratch_);
  }

  int ThrowawayFolders() const {
    int count = 0;
    for (const auto& entry : fs::directory_iterator(scratch_)) {
      count += entry.path().filename().string().starts_with("coexist-pg-");
    }
    return count;
  }

  std::string Url() const { return "'" + conninfo() + "'"; }

  fs::path scratch_;
};

TEST_F(CliTest, ConfigCheckAcceptsAValidFile) {
  auto file = Write("good.yaml", "target:\n  table: products\nbatch:\n  chunk_size: 100\n");
  auto result = Run("config check " + file.string());
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("good.yaml: valid"), std::string::npos) << result.out;
}

TEST_F(CliTest, ConfigCheckNamesFileLineColumnAndExits78) {
  auto file = Write("bad.yaml", "batch:\n  chunk_size: 100\n  chunk_sise: 200\n");
  auto result = Run("config check " + file.string());
  EXPECT_EQ(result.status, 78);
  EXPECT_EQ(result.err,
            "config error: " + file.string() +
                ":3:3: batch.chunk_sise: unknown key\n"
                "HINT: did you mean 'chunk_size'? known keys here: busy_timeout, chunk_size, job, "
                "max_attempts, max_consecutive_failures, max_duration, max_items, max_rate, "
                "max_timeouts, missing_rows, range, runs, workers.\n");
}

// The shipped scenarios are scenario files, and config check says so.
TEST_F(CliTest, ConfigCheckAcceptsTheShippedScenarios) {
  for (const char* name : {"demo", "nightly-settlement", "seed001", "ledger-posting"}) {
    std::string file = std::string(COEXIST_SOURCE_DIR) + "/config/scenarios/" + name + ".yaml";
    auto result = Run("config check " + file);
    EXPECT_EQ(result.status, 0) << name << ": " << result.err;
    EXPECT_NE(result.out.find(": valid scenario '" + std::string(name) + "'"), std::string::npos)
        << result.out;
  }
  auto bad = Write("bad-scenario.yaml", "scenario:\n  objectives:\n    min_done_share: 120%\n");
  auto result = Run("config check " + bad.string());
  EXPECT_EQ(result.status, 78);
  EXPECT_EQ(result.err, "config error: " + bad.string() +
                            ":3:21: scenario.objectives.min_done_share: '120%' is out of range\n"
                            "HINT: allowed range is 0% to 100% inclusive.\n");
}

TEST_F(CliTest, ConfigCheckOfAMissingFileExits78) {
  auto result = Run("config check " + (scratch_ / "nope.yaml").string());
  EXPECT_EQ(result.status, 78);
  EXPECT_NE(result.err.find("nope.yaml: cannot read the file"), std::string::npos) << result.err;
}

TEST_F(CliTest, UsageErrorsExit64) {
  EXPECT_EQ(Run("frobnicate").status, 64);
  EXPECT_EQ(Run("").status, 64);
  EXPECT_EQ(Run("db seed --records 0").status, 64);
  auto result = Run("--log-level loud db status");
  EXPECT_EQ(result.status, 64);
  EXPECT_NE(result.err.find("unknown log level 'loud'"), std::string::npos) << result.err;
}

TEST_F(CliTest, HelpExplainsTheCommands) {
  auto result = Run("--help");
  EXPECT_EQ(result.status, 0);
  for (const char* word : {"db", "config", "demo", "--database-url", "--log-format"}) {
    EXPECT_NE(result.out.find(word), std::string::npos) << word;
  }
}

// A database error that escapes a command gets the exit status of what it
// means (db/failure.h): retry later (75) for a deadlock, a serialization
// failure or a server out of resources; the deployment's fault (78) for a
// right missing or an object gone; only the rest is an internal error (70).
TEST_F(CliTest, DatabaseErrorsExitWithWhatTheyMean) {
  QueryValue(
      "CREATE FUNCTION public.fail_with(code text) RETURNS SETOF bigint LANGUAGE plpgsql AS "
      "$$BEGIN RAISE EXCEPTION 'failing with %', code USING ERRCODE = code; END$$");
  for (const auto& [select, status] : std::vector<std::pair<std::string, int>>{
           {"SELECT public.fail_with('40P01')", 75},  // deadlock
           {"SELECT public.fail_with('40001')", 75},  // serialization failure
           {"SELECT public.fail_with('53100')", 75},  // disk full
           {"SELECT public.fail_with('55P03')", 75},  // lock_timeout, NOWAIT
           {"SELECT public.fail_with('57014')", 75},  // statement_timeout
           {"SELECT public.fail_with('25006')", 75},  // read-only server
           {"SELECT public.fail_with('42501')", 78},  // insufficient privilege
           {"SELECT id FROM public.no_such_table", 78},
           {"SELECT no_such_column FROM public.products", 78},
           {"SELECT public.fail_with('P0001')", 70},
       }) {
    auto out = Run("--database-url " + Url() + " enqueue --job j --select \"" + select + "\"");
    EXPECT_EQ(out.status, status) << select << "\n" << out.err;
    EXPECT_EQ(out.err.find("internal error"), std::string::npos) << select << "\n" << out.err;
  }
}

// A real deadlock, not a raised SQLSTATE: the command's query locks row 1
// and waits for row 2, which this test holds; the test then asks for row 1.
// The command waited first, so its deadlock check fires first: it gets
// 40P01 and exits 75 (retry later), with nothing enqueued.
TEST_F(CliTest, ARealDeadlockEscapingACommandExits75) {
  auto holder = Connect("deadlock test");
  pqxx::nontransaction(*holder).exec("SET deadlock_timeout = '20s'");
  pqxx::work hold(*holder);
  hold.exec("SELECT 1 FROM public.products WHERE id = 2 FOR UPDATE");
  auto command = std::async(std::launch::async, [this] {
    return Run("--database-url " + Url() +
               " enqueue --job j --select \"SELECT id FROM public.products WHERE id IN (1, 2) "
               "ORDER BY id FOR UPDATE\"");
  });
  // Until the command waits for row 2 (holding row 1).
  for (int i = 0; i < 300 && Count("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
                                   "USING (pid) WHERE NOT l.granted AND a.application_name = "
                                   "'coexist-enqueue'") == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  hold.exec("SELECT 1 FROM public.products WHERE id = 1 FOR UPDATE");  // closes the cycle
  auto out = command.get();
  hold.commit();
  EXPECT_EQ(out.status, 75) << out.err;
  EXPECT_NE(out.err.find("deadlock detected"), std::string::npos) << out.err;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

// enqueue puts items into the job that --job or the configuration's
// batch.job names (the flag wins), never into the default job unasked.
TEST_F(CliTest, EnqueueNeedsAJobFromTheFlagOrTheConfiguration) {
  auto unnamed = Write("unnamed.yaml", "policy: {name: skip_locked}\n");
  auto named = Write("named.yaml", "batch: {job: nightly}\n");
  const std::string refusal =
      "coexist: enqueue: no job given\nHINT: pass --job NAME, or set batch.job in the file given "
      "with --config (the job whose batch run takes the items).\n";
  for (const std::string& config : {std::string(), " --config " + unnamed.string()}) {
    auto result = Run("--database-url " + Url() + config + " enqueue --select 'SELECT 1'");
    EXPECT_EQ(result.status, 64) << config << ": " << result.err;
    EXPECT_EQ(result.err, refusal) << config;
  }
  auto empty = Run("--database-url " + Url() + " --config " + named.string() +
                   " enqueue --job '' --select 'SELECT 1'");
  EXPECT_EQ(empty.status, 64);
  EXPECT_NE(empty.err.find("the job's name is empty"), std::string::npos) << empty.err;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
  auto result = Run("--database-url " + Url() + " enqueue --job adhoc --select 'SELECT 1'");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "enqueued for job adhoc: 1 added, 0 duplicates\n");
  result = Run("--database-url " + Url() + " --config " + named.string() +
               " enqueue --select 'SELECT 2'");
  EXPECT_EQ(result.out, "enqueued for job nightly: 1 added, 0 duplicates\n") << result.err;
  result = Run("--database-url " + Url() + " --config " + named.string() +
               " enqueue --job other --select 'SELECT 3'");
  EXPECT_EQ(result.out, "enqueued for job other: 1 added, 0 duplicates\n") << result.err;
  EXPECT_EQ(QueryValue("SELECT string_agg(job || ':' || record_key, ' ' ORDER BY item_id) FROM "
                       "coexist.items"),
            "adhoc:1 nightly:2 other:3");
}

// Whether `text` holds `part` (stderr starts with the log's lines).
bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Keys exactly: a key that is no value of the key column's type (bigint
// here) is refused with exit 65 and nothing is enqueued, whichever input it
// comes from; keys with no row are added and counted, or refused when asked.
TEST_F(CliTest, EnqueueRefusesKeysThatAreNoValueOfTheKeyColumnWithExit65) {
  std::string db = "--database-url " + Url() + " enqueue --job j ";
  auto result = Run(db + "--select 'SELECT 3.05 UNION ALL SELECT 4'");
  EXPECT_EQ(result.status, 65) << result.err;
  EXPECT_TRUE(Contains(
      result.err,
      "coexist: 1 of the query's keys (numeric) is not a value of the key column "
      "public.products.id (bigint): 3.05\nHINT: nothing was enqueued; a key is taken when it "
      "casts to bigint and back to numeric unchanged"))
      << result.err;
  for (const char* select : {"SELECT 'abc'", "SELECT 99999999999999999999"}) {
    result = Run(db + "--select \"" + select + "\"");
    EXPECT_EQ(result.status, 65) << select << ": " << result.err;
    EXPECT_NE(result.err.find("is not a value of the key column public.products.id (bigint)"),
              std::string::npos)
        << result.err;
  }
  auto csv = Write("items.csv", "key\n1\nx2\n3\n");
  result = Run(db + "--file " + csv.string());
  EXPECT_EQ(result.status, 65) << result.err;
  EXPECT_TRUE(Contains(result.err,
                       "coexist: 1 key (text) is not a value of the key column "
                       "public.products.id (bigint): 'x2' (line 3)\n"))
      << result.err;
  auto jsonl = Write("items.jsonl", "{\"key\": 1}\n{\"key\": 3.05}\n");
  result = Run(db + "--file " + jsonl.string());
  EXPECT_EQ(result.status, 65) << result.err;
  EXPECT_NE(result.err.find("'3.05' (line 2)"), std::string::npos) << result.err;
  result = Run(db + "--select 'SELECT 3.00' --refuse-missing");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "enqueued for job j: 1 added, 0 duplicates\n");
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key, ' ') FROM coexist.items"), "3");

  result = Run(db + "--select 'SELECT g FROM generate_series(99, 102) g'");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out,
            "enqueued for job j: 4 added, 0 duplicates, 2 missing (no row in public.products)\n");
  EXPECT_TRUE(Contains(result.err,
                       "coexist: warning: 2 items name a key with no row in "
                       "public.products: 101 102\n"))
      << result.err;
  result = Run(db + "--select 'SELECT g FROM generate_series(100, 101) g' --refuse-missing");
  EXPECT_EQ(result.status, 65) << result.err;
  EXPECT_TRUE(
      Contains(result.err, "coexist: 1 item names a key with no row in public.products: 101\n"))
      << result.err;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 5);
}

// A scheduled unit runs `enqueue` with nothing but --config: the file's
// enqueue.select; what the database refuses in it is named at the key.
TEST_F(CliTest, EnqueueTakesTheQueryFromTheFile) {
  auto job = Write("job.yaml",
                   "batch: {job: nightly}\nenqueue:\n  select: SELECT g, jsonb_build_object('n', "
                   "g) FROM generate_series(1, 3) g\n");
  auto result = Run("--database-url " + Url() + " --config " + job.string() + " enqueue");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "enqueued for job nightly: 3 added, 0 duplicates\n");
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ' ' || payload::text, ', ' ORDER BY "
                       "item_id) FROM coexist.items WHERE job = 'nightly'"),
            "1 {\"n\": 1}, 2 {\"n\": 2}, 3 {\"n\": 3}");
  // --select wins over the file's query.
  result =
      Run("--database-url " + Url() + " --config " + job.string() + " enqueue --select 'SELECT 9'");
  EXPECT_EQ(result.out, "enqueued for job nightly: 1 added, 0 duplicates\n") << result.err;

  auto typo = Write("typo.yaml", "batch: {job: j}\nenqueue:\n  selct: SELECT 1\n");
  result = Run("--database-url " + Url() + " --config " + typo.string() + " enqueue");
  EXPECT_EQ(result.status, 78);
  EXPECT_EQ(result.err,
            "config error: " + typo.string() +
                ":3:3: enqueue.selct: unknown key\nHINT: did you mean 'select'? known keys "
                "here: select.\n");
  auto missing =
      Write("missing.yaml", "batch: {job: j}\nenqueue:\n  select: SELECT id FROM no_such_table\n");
  result = Run("--database-url " + Url() + " --config " + missing.string() + " enqueue");
  EXPECT_EQ(result.status, 78);
  auto error = result.err.substr(result.err.find("config error: "));
  EXPECT_EQ(error.substr(0, error.find('\n')),
            "config error: " + missing.string() +
                ":3:11: enqueue.select: the database rejects it: relation \"no_such_table\" does "
                "not exist");
  auto shape = Write("shape.yaml", "batch: {job: j}\nenqueue:\n  select: SELECT 1, 2, 3, 4\n");
  result = Run("--database-url " + Url() + " --config " + shape.string() + " enqueue");
  EXPECT_EQ(result.status, 78);
  EXPECT_EQ(result.err.substr(result.err.find("config error: ")),
            "config error: " + shape.string() +
                ":3:11: enqueue.select: the query returns 4 columns\nHINT: return "
                "key[, payload jsonb[, idempotency_key text]].\n");

  auto none = Write("none.yaml", "batch: {job: j}\n");
  result = Run("--database-url " + Url() + " --config " + none.string() + " enqueue");
  EXPECT_EQ(result.status, 64);
  EXPECT_EQ(result.err,
            "coexist: enqueue: nothing to enqueue\nHINT: pass --select \"SELECT id FROM ...\" or "
            "--file items.csv (- for stdin), or set enqueue.select in the file given with "
            "--config.\n");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 4);
}

// A malformed URL is a configuration error (78), for every kind of
// command, and its message never holds the password. The daemon stops at
// once instead of logging the URL on every retry.
TEST_F(CliTest, MalformedDatabaseUrlExits78WithoutThePassword) {
  auto config = Write("job.yaml",
                      "batch: {job: j}\npolicy: {name: skip_locked}\noperation:\n  chunk_sql: "
                      "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1)\n");
  for (const char* url :
       {"postgresql://u:s3cret@host:notaport/db", "postgresql://u:s3cret%zz@host/db"}) {
    for (const std::string& command : std::vector<std::string>{
             "db install", "batch daemon --config " + config.string(), "demo"}) {
      auto result = Run("--database-url '" + std::string(url) + "' " + command);
      EXPECT_EQ(result.status, 78) << url << " " << command << ": " << result.err;
      EXPECT_NE(result.err.find("the database URL in --database-url"), std::string::npos)
          << result.err;
      EXPECT_EQ((result.out + result.err).find("s3cret"), std::string::npos) << result.err;
      result = Run(command, "COEXIST_DATABASE_URL='" + std::string(url) + "'");
      EXPECT_EQ(result.status, 78) << url << " " << command << ": " << result.err;
      EXPECT_EQ((result.out + result.err).find("s3cret"), std::string::npos) << result.err;
    }
  }
}

TEST_F(CliTest, UnreachableDatabaseExits75WithoutThePassword) {
  auto result = Run("--database-url 'postgresql://app:s3cret@/shop?host=" + scratch_.string() +
                    "/nowhere' db install");
  EXPECT_EQ(result.status, 75) << result.err;
  EXPECT_NE(result.err.find("cannot connect to the database"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("s3cret"), std::string::npos) << result.err;
}

// Commands that keep state never fall back to a throwaway cluster, which
// would be deleted a second after they wrote into it.
TEST_F(CliTest, CommandsThatKeepStateNeedAConfiguredDatabase) {
  auto config = Write("job.yaml",
                      "batch: {job: j}\npolicy: {name: skip_locked}\noperation:\n  chunk_sql: "
                      "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1)\n");
  auto items = Write("items.csv", "key\n1\n");
  for (const std::string& command : std::vector<std::string>{
           "db status", "db install", "enqueue --job j --file " + items.string(),
           "--config " + config.string() + " enqueue --file " + items.string(),
           "--config " + config.string() + " batch run",
           "--config " + config.string() + " batch run --dry-run",
           "--config " + config.string() + " batch daemon", "locks list", "queue status",
           "runs list", "events"}) {
    auto result = Run(command);
    EXPECT_EQ(result.status, 78) << command << ": " << result.err;
    EXPECT_NE(result.err.find("coexist: no database configured"), std::string::npos)
        << command << ": " << result.err;
    EXPECT_NE(result.err.find("HINT: pass --database-url URL, set COEXIST_DATABASE_URL"),
              std::string::npos)
        << result.err;
    EXPECT_EQ(ThrowawayFolders(), 0) << command;
  }
}

// simulate, demo, db seed and online-sim replace or overwrite data: on a
// configured database (any of the rules) only when --allow-database names
// it. The refusal says what would be erased, and nothing is.
TEST_F(CliTest, CommandsThatEraseDataRefuseAConfiguredDatabase) {
  const std::string db = database_name();
  const std::string socket = ClusterEnvironment::Get().cluster().dir().string();
  const std::string pg_env = "PGHOST=" + socket + " PGPORT=5432 PGUSER=coexist PGDATABASE=" + db;
  const std::vector<std::pair<std::string, std::string>> ways = {
      {"--database-url " + Url() + " ", ""},
      {"", "COEXIST_DATABASE_URL=" + Url()},
      {"", pg_env},
  };
  for (const auto& [flags, env] : ways) {
    for (const std::string& command : std::vector<std::string>{
             "db seed --records 5", "demo --records 5", "simulate demo --out " + scratch_.string(),
             "online-sim --duration 1s --quiet", "online-sim reserve --per-client 1"}) {
      auto result = Run(flags + command, env);
      EXPECT_EQ(result.status, 64) << env << " " << command << ": " << result.err;
      EXPECT_NE(result.err.find("coexist: refusing to erase database \"" + db +
                                "\" (host=" + socket + " port=5432, chosen by "),
                std::string::npos)
          << result.err;
      EXPECT_NE(result.err.find("HINT: to erase it, pass --allow-database " + db + ";"),
                std::string::npos)
          << result.err;
      result = Run(flags + command + " --allow-database production", env);
      EXPECT_EQ(result.status, 64) << env << " " << command << ": " << result.err;
      EXPECT_NE(result.err.find("--allow-database production does not name the database this "
                                "command would erase: database \"" +
                                db + "\""),
                std::string::npos)
          << result.err;
    }
  }
  EXPECT_EQ(QueryValue("SELECT count(*) FROM public.products"),
            std::to_string(ClusterEnvironment::kTemplateRecords));
  EXPECT_EQ(QueryValue("SELECT to_regnamespace('coexist_reserve') IS NULL"), "t");
  EXPECT_EQ(ThrowawayFolders(), 0);

  auto result = Run("--database-url " + Url() + " db seed --records 5 --allow-database " + db);
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(QueryValue("SELECT count(*) FROM public.products"), "5");
  result = Run("db seed --records 5 --allow-database " + db);
  EXPECT_EQ(result.status, 64) << "named a database, but none is configured";
  EXPECT_NE(result.err.find("but no database is configured"), std::string::npos) << result.err;
}

TEST_F(CliTest, InstallSeedAndStatusOnAConfiguredDatabase) {
  pqxx::nontransaction(*Connect()).exec("DROP SCHEMA coexist CASCADE; DROP TABLE products");
  auto result = Run("--database-url " + Url() + " db install");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.err.find("version trigger skipped target=public.products reason=table_missing"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(Run("--database-url " + Url() + " db install").status, 0) << "rerun is a no-op";
  result =
      Run("--database-url " + Url() + " db seed --records 42 --allow-database " + database_name());
  EXPECT_EQ(result.status, 0) << result.err;
  result = Run("--database-url " + Url() + " --log-format json db status --json");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("\"rows\": 42"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("\"version_trigger\": true"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find(
                "\"level\":\"info\",\"event\":\"database chosen\",\"source\":\"command line\""),
            std::string::npos)
      << result.err;
}

TEST_F(CliTest, InstallWithAConfiguredMissingTargetExits78AtTheKey) {
  auto file = Write("orders.yaml", "target:\n  table: sales.orders\n");
  auto result = Run("--config " + file.string() + " --database-url " + Url() + " db install");
  EXPECT_EQ(result.status, 78);
  EXPECT_TRUE(result.err.ends_with("config error: " + file.string() +
                                   ":2:10: target.table: table sales.orders does not exist\n"
                                   "HINT: create it, or name an existing table (schema.table).\n"))
      << result.err;
}

// What only the database can tell about a configuration is still the
// configuration's fault (78), named at its key; never "internal error"
// (70), never "try again later" (75).
TEST_F(CliTest, WhatTheDatabaseRejectsInAConfigurationExits78AtTheKey) {
  const std::string rest =
      "batch: {job: j}\npolicy: {name: skip_locked}\noperation:\n  chunk_sql: ";
  const std::string update = "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1)\n";
  auto no_table = Write("no_table.yaml", "target:\n  table: public.nope\n" + rest + update);
  auto no_column = Write("no_column.yaml", "target:\n  version_column: vers\n" + rest + update);
  auto bad_sql = Write("bad_sql.yaml", rest + "UPDATE public.products SET nocol = 1\n");
  for (const auto& [file, expected] : std::vector<std::pair<fs::path, std::string>>{
           {no_table,
            ":2:10: target.table: table public.nope does not exist\n"
            "HINT: create it, or name an existing table (schema.table).\n"},
           {no_column,
            ":2:19: target.version_column: table public.products has no column "
            "\"vers\"\nHINT: name the table's version column, or add one (instant on "
            "PostgreSQL 11+): ALTER TABLE public.products ADD COLUMN vers bigint NOT NULL DEFAULT "
            "0; `coexist db install --add-version-column` runs it (waiting at most 2s at a time "
            "for the table's lock, and trying again).\n"},
           {bad_sql,
            ":4:14: operation.chunk_sql: the database rejects it: ERROR:  column "
            "\"nocol\" of relation \"products\" does not exist\n"},
       }) {
    for (const std::string& command :
         std::vector<std::string>{"batch run", "batch run --dry-run", "db install",
                                  "config check " + file.string() + " --database"}) {
      // The operation is checked by a run and by config check --database only.
      if (file == bad_sql && command != "batch run" && !command.ends_with("--database")) continue;
      auto result = Run("--config " + file.string() + " --database-url " + Url() + " " + command);
      EXPECT_EQ(result.status, 78) << file << " " << command << ": " << result.err;
      EXPECT_NE(result.err.find("config error: " + file.string() + expected), std::string::npos)
          << command << ": " << result.err;
    }
  }
}

TEST_F(CliTest, MalformedDatabaseUrlInTheFileExits78AtTheKey) {
  auto file = Write("url.yaml", "database:\n  url: postgresql://u:s3cret@host:notaport/db\n");
  auto result = Run("--config " + file.string() + " db status");
  EXPECT_EQ(result.status, 78) << result.err;
  EXPECT_TRUE(result.err.starts_with(
      "config error: " + file.string() +
      ":2:8: database.url: the database URL has an invalid port \"notaport\"\nHINT: "))
      << result.err;
  EXPECT_EQ(result.err.find("s3cret"), std::string::npos) << result.err;
}

TEST_F(CliTest, AdminCommandsWorkOnAConfiguredDatabase) {
  auto result = Run("--database-url " + Url() + " locks release");
  EXPECT_EQ(result.status, 64);
  EXPECT_NE(result.err.find("exactly one of --record, --owner, --older-than"), std::string::npos)
      << result.err;
  QueryValue("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')");
  result = Run("--database-url " + Url() + " locks list");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("alice"), std::string::npos) << result.out;
  result = Run("--database-url " + Url() + " locks release --owner alice --json");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("\"record_key\": \"9\""), std::string::npos) << result.out;
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.edit_locks"), "0");
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, last_error) VALUES ('j', 1, 'dead', "
      "'boom')");
  result = Run("--database-url " + Url() + " queue status");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("job j: queued 0, deferred 0, done 0, dead 1"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("boom"), std::string::npos) << result.out;
  result = Run("--database-url " + Url() + " queue retry --dead --job j");
  EXPECT_EQ(result.out, "1 dead items queued again\n") << result.err;
  EXPECT_EQ(Run("--database-url " + Url() + " runs show 12345").status, 64);
}

// runs show prints the run for a person, and with --json its row, the
// settings it started with and its summary (batch run --json's object).
TEST_F(CliTest, RunsShowPrintsTheRunAndWithJsonItsSummary) {
  auto job = Write("job.yaml",
                   "batch: {job: j}\npolicy: {name: skip_locked}\noperation:\n  chunk_sql: "
                   "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1)\n");
  const std::string flags = "--database-url " + Url() + " --config " + job.string();
  ASSERT_EQ(Run(flags + " enqueue --select 'SELECT id FROM products WHERE id <= 3'").status, 0);
  auto run = Run(flags + " batch run");
  ASSERT_EQ(run.status, 0) << run.err;
  long long id = Count("SELECT max(run_id) FROM coexist.runs");

  auto text = Run(flags + " runs show " + std::to_string(id));
  EXPECT_EQ(text.status, 0) << text.err;
  std::istringstream lines(text.out);
  std::vector<std::string> line(5);
  for (auto& l : line) std::getline(lines, l);
  EXPECT_EQ(line[0], "run " + std::to_string(id) + " of job j (policy skip_locked): succeeded");
  EXPECT_TRUE(line[1].starts_with("  host ")) << line[1];
  EXPECT_NE(line[1].find(", ended "), std::string::npos) << line[1];
  EXPECT_EQ(line[2], "  claimed 3, done 3, deferred 0, dead 0");
  EXPECT_EQ(line[3], "  claiming stopped: drained");
  EXPECT_EQ(line[4], "  events: none");

  auto json = Run(flags + " runs show " + std::to_string(id) + " --json");
  EXPECT_EQ(json.status, 0) << json.err;
  auto out = nlohmann::json::parse(json.out);
  EXPECT_EQ(out["run_id"], id);
  EXPECT_EQ(out["outcome"], "succeeded");
  EXPECT_EQ(out["done"], 3);
  EXPECT_EQ(out["settings"]["workers"], 1);
  EXPECT_EQ(out["summary"]["outcome"], "succeeded");
  EXPECT_EQ(out["summary"]["stop_reason"], "drained");
  EXPECT_EQ(out["summary"]["done"], 3);
  EXPECT_EQ(out["summary"]["run_id"], id);
  EXPECT_FALSE(out["summary"].contains("workers"));
  EXPECT_EQ(out["events"], nlohmann::json::object());

  auto missing = Run(flags + " runs show 12345 --json");
  EXPECT_EQ(missing.status, 64);
  EXPECT_EQ(missing.out, "");
}

// coexist jobs: each job's items done of all, the rate of its running runs
// together and an ETA, a range job's segments; a job with nothing running
// has no rate.
// A range pass's ETA counts its rows not walked yet beside the queue's
// items, until every segment is walked.
TEST(JobRow, ARangePassEtaCountsItsRowsNotWalkedYet) {
  db::JobRow job;
  job.running_runs = 1;
  job.running_done = 100;
  job.running_seconds = 10;
  job.queued = 50;
  job.range_segments = 8;
  job.range_finished = 3;
  job.range_expected = 1000;
  job.range_walked = 400;
  EXPECT_DOUBLE_EQ(job.EtaSeconds().value_or(-1), (50 + 600) / 10.0);
  job.range_walked = 1200;  // rows that came to match after the pass began
  EXPECT_DOUBLE_EQ(job.EtaSeconds().value_or(-1), 5.0);
  job.range_walked = 400;
  job.range_finished = 8;
  EXPECT_DOUBLE_EQ(job.EtaSeconds().value_or(-1), 5.0) << "a walked pass: only the queue is left";
}

TEST_F(CliTest, JobsShowProgressRateAndEta) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at)"
      " SELECT 'nightly', g, CASE WHEN g <= 30 THEN 'queued' WHEN g <= 40 THEN 'deferred'"
      "  WHEN g <= 45 THEN 'done' ELSE 'dead' END::coexist.item_state,"
      "  CASE WHEN g BETWEEN 41 AND 45 THEN now() END FROM generate_series(1, 47) g");
  QueryValue(
      "INSERT INTO coexist.done_chunks (job, done_at, item_ids, record_keys, item_keys, "
      "attempts, payloads) VALUES ('nightly', now(), '{101,102,103}', '{1,2,3}', "
      "'{NULL,NULL,NULL}', '{1,1,1}', ARRAY['{}','{}','{}']::jsonb[])");
  // Two running runs: 60 items done in the 30 s since the first started.
  QueryValue(
      "INSERT INTO coexist.runs (job, policy, host, pid, started_at, done, details) VALUES"
      " ('nightly', 'skip_locked', 'a', 1, clock_timestamp() - interval '30 s', 40,"
      "  '{\"online_latency_ratio\": 1.31, \"online_latency_objective\": 1.5,"
      "    \"pacing\": {\"state\": \"throttled\", \"reason\": \"lock_waiters\","
      "                 \"online_latency\": {\"state\": \"over\", \"duty\": 0.4}}}'),"
      " ('nightly', 'skip_locked', 'b', 2, clock_timestamp() - interval '10 s', 20,"
      "  '{\"online_latency_ratio\": 1.12, \"pacing\": {\"state\": \"running\","
      "    \"online_latency\": {\"state\": \"within\", \"duty\": 0.8}}}'),"
      " ('settle', 'skip_locked', 'a', 3, now(), 0, '{}')");
  QueryValue(
      "INSERT INTO coexist.range_checkpoints (job, segment, pass, finished, applied, exceptions,"
      " expected) VALUES ('settle', 1, 1, true, 500, 0, 500), ('settle', 2, 1, false, 120, 10, "
      "400)");
  auto json = Run("--database-url " + Url() + " jobs --json");
  ASSERT_EQ(json.status, 0) << json.err;
  auto jobs = nlohmann::json::parse(json.out);
  ASSERT_EQ(jobs.size(), 2u) << json.out;
  const auto& nightly = jobs[0];
  EXPECT_EQ(nightly["job"], "nightly");
  EXPECT_EQ(nightly["running_runs"], 2);
  EXPECT_EQ(nightly["queued"], 30);
  EXPECT_EQ(nightly["deferred"], 10);
  EXPECT_EQ(nightly["done"], 8) << "5 in the queue, 3 in a done chunk";
  EXPECT_EQ(nightly["dead"], 2);
  // 60 items over about 30 s; the 40 queued and deferred at that rate.
  EXPECT_NEAR(nightly["items_per_second"].get<double>(), 2.0, 0.2);
  EXPECT_NEAR(nightly["eta_seconds"].get<double>(), 20.0, 2.0);
  EXPECT_FALSE(nightly.contains("range"));
  EXPECT_EQ(nightly["online_latency_ratio"], 1.31) << "the highest of its running runs";
  EXPECT_EQ(nightly["online_latency_objective"], 1.5);
  // Each run's pacer, as its heartbeat wrote it: one held, the lowest duty.
  EXPECT_EQ(nightly["runs_by_pacing_state"], (nlohmann::json{{"running", 1}, {"throttled", 1}}));
  EXPECT_EQ(nightly["pacing_duty"], 0.4);
  const auto& settle = jobs[1];
  EXPECT_EQ(settle["job"], "settle");
  EXPECT_TRUE(settle["items_per_second"].is_null()) << "a run that has done nothing has no rate";
  EXPECT_TRUE(settle["eta_seconds"].is_null());
  EXPECT_TRUE(settle["online_latency_ratio"].is_null());
  EXPECT_EQ(settle["runs_by_pacing_state"], (nlohmann::json{{"starting", 1}}))
      << "no heartbeat yet";
  EXPECT_TRUE(settle["pacing_duty"].is_null());
  EXPECT_EQ(
      settle["range"],
      (nlohmann::json{
          {"segments", 2}, {"finished", 1}, {"applied", 620}, {"expected", 900}, {"walked", 630}}));

  auto text = Run("--database-url " + Url() + " jobs");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(std::regex_search(
      text.out, std::regex("\nnightly +2 +8/50 +2 +[12]\\.[0-9] +[12][0-9] s  "
                           "running \\(1 throttled\\), duty 0\\.40, online latency 1\\.31x "
                           "its baseline \\(objective "
                           "1\\.50x\\)\n")))
      << text.out;
  EXPECT_NE(
      text.out.find("settle                         1                 0/0      0        -       -  "
                    "running; range: 1/2 segments, 620 rows applied, 630 of 900 walked\n2 "
                    "jobs\n"),
      std::string::npos)
      << text.out;

  // The same as Prometheus metrics, printed and written as a textfile that
  // promtool's linter accepts.
  auto metrics = Run("--database-url " + Url() + " jobs --prometheus");
  ASSERT_EQ(metrics.status, 0) << metrics.err;
  auto value = [&](const std::string& series) -> std::optional<double> {
    std::smatch match;
    std::regex line("\n" + std::regex_replace(series, std::regex(R"([{}])"), R"(\$&)") +
                    " ([0-9.e+-]+)\n");
    if (!std::regex_search(metrics.out, match, line)) return std::nullopt;
    return std::stod(match[1]);
  };
  EXPECT_EQ(value("coexist_job_items{job=\"nightly\",state=\"queued\"}"), 30) << metrics.out;
  EXPECT_EQ(value("coexist_job_items{job=\"nightly\",state=\"deferred\"}"), 10);
  EXPECT_EQ(value("coexist_job_items{job=\"nightly\",state=\"done\"}"), 8);
  EXPECT_EQ(value("coexist_job_items{job=\"nightly\",state=\"dead\"}"), 2);
  EXPECT_EQ(value("coexist_job_running_runs{job=\"nightly\"}"), 2);
  EXPECT_EQ(value("coexist_job_paused{job=\"nightly\"}"), 0);
  EXPECT_NEAR(value("coexist_job_items_per_second{job=\"nightly\"}").value_or(0), 2.0, 0.2);
  EXPECT_NEAR(value("coexist_job_eta_seconds{job=\"nightly\"}").value_or(0), 20.0, 2.0);
  EXPECT_EQ(value("coexist_job_online_latency_ratio{job=\"nightly\"}"), 1.31);
  EXPECT_EQ(value("coexist_job_online_latency_objective{job=\"nightly\"}"), 1.5);
  EXPECT_EQ(value("coexist_job_runs_by_pacing_state{job=\"nightly\",state=\"throttled\"}"), 1);
  EXPECT_EQ(value("coexist_job_runs_by_pacing_state{job=\"nightly\",state=\"running\"}"), 1);
  EXPECT_EQ(value("coexist_job_pacing_duty{job=\"nightly\"}"), 0.4);
  EXPECT_EQ(value("coexist_job_pacing_duty{job=\"settle\"}"), std::nullopt);
  EXPECT_EQ(value("coexist_job_items_per_second{job=\"settle\"}"), std::nullopt)
      << "no rate: no series";
  EXPECT_EQ(value("coexist_job_range_segments{job=\"settle\",state=\"finished\"}"), 1);
  EXPECT_EQ(value("coexist_job_range_segments{job=\"settle\",state=\"all\"}"), 2);
  EXPECT_EQ(value("coexist_job_range_rows_applied{job=\"settle\"}"), 620);
  EXPECT_EQ(value("coexist_job_range_rows{job=\"settle\",state=\"expected\"}"), 900);
  EXPECT_EQ(value("coexist_job_range_rows{job=\"settle\",state=\"walked\"}"), 630);
  EXPECT_NEAR(
      value("coexist_jobs_read_timestamp_seconds").value_or(0),
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
      60);
  const auto& dir = scratch_;
  auto written =
      Run("--database-url " + Url() + " jobs --textfile " + (dir / "jobs.prom").string());
  ASSERT_EQ(written.status, 0) << written.err;
  EXPECT_EQ(fs::status(dir / "jobs.prom").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  auto lint = RunCommand(
      {"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + (dir / "jobs.prom").string()});
  EXPECT_EQ(lint.status, 0) << lint.output;
  EXPECT_EQ(Run("--database-url " + Url() + " jobs --json --prometheus").status, 64)
      << "one output at a time";

  // As the watching role of docs/operations.md ("Database roles", there coexist_monitor): SELECT
  // only, and the same figures.
  QueryValue(
      "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobs_watcher')"
      " THEN CREATE ROLE jobs_watcher LOGIN; END IF; END$$;"
      " GRANT USAGE ON SCHEMA coexist TO jobs_watcher;"
      " GRANT SELECT ON ALL TABLES IN SCHEMA coexist TO jobs_watcher; SELECT 1");
  auto watched = Run("--database-url '" + conninfo() + " user=jobs_watcher' jobs --prometheus");
  ASSERT_EQ(watched.status, 0) << watched.err;
  EXPECT_NE(watched.out.find("coexist_job_items{job=\"nightly\",state=\"queued\"} 30\n"),
            std::string::npos)
      << watched.out;
}

// coexist events: the audit trail, newest first, with its filters.
TEST_F(CliTest, EventsListsTheAuditTrailWithFilters) {
  QueryValue(
      "WITH i AS (INSERT INTO coexist.events (at, kind, job, run_id, item_id, target, record_key,"
      " actor, details) VALUES"
      " (now() - interval '3 hours', 'item_deferred', 'j', 1, 10, 'products', 7, 'batch run 1',"
      "  '{\"reason\": \"row_locked\"}'),"
      " (now() - interval '1 minute', 'item_dead', 'j', 2, 11, 'products', 8, 'batch run 2',"
      "  '{\"attempts\": 5}'),"
      " (now(), 'items_retried', 'k', NULL, NULL, NULL, NULL, 'admin:ops@h', '{\"items\": 1}')"
      " RETURNING 1) SELECT count(*) FROM i");
  const std::string events = "--database-url " + Url() + " events";
  // Each line without its time stamp.
  auto lines = [](const std::string& out) {
    std::vector<std::string> result;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      auto kind = line.find("  ");
      result.push_back(kind == std::string::npos ? line : line.substr(kind + 2));
    }
    return result;
  };
  auto all = Run(events);
  EXPECT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(lines(all.out),
            (std::vector<std::string>{
                "items_retried job=k actor=admin:ops@h {\"items\": 1}",
                "item_dead job=j run=2 item=11 record=products:8 actor=\"batch run 2\" "
                "{\"attempts\": 5}",
                "item_deferred job=j run=1 item=10 record=products:7 actor=\"batch run 1\" "
                "{\"reason\": \"row_locked\"}",
                "3 events (newest first)"}));
  auto dead = Run(events + " --kind item_dead --json");
  EXPECT_EQ(dead.status, 0) << dead.err;
  auto json = nlohmann::json::parse(dead.out);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(json[0]["record_key"], "8");
  EXPECT_EQ(json[0]["details"]["attempts"], 5);
  EXPECT_TRUE(json[0]["subject"].is_null());
  EXPECT_EQ(lines(Run(events + " --record 7").out).back(), "1 event (newest first)");
  // Once coexist knows the target's key type (a run installed its guard),
  // any spelling of the key finds it; one that is not of the type is a
  // usage error naming --record.
  QueryValue("SELECT coexist.install_guard_trigger('public.products', 'id')");
  EXPECT_EQ(lines(Run(events + " --record 007").out).back(), "1 event (newest first)");
  auto bad_key = Run(events + " --record x7");
  EXPECT_EQ(bad_key.status, 64) << bad_key.err;
  EXPECT_NE(bad_key.err.find("--record 'x7' is not a key of the targets' key types"),
            std::string::npos)
      << bad_key.err;
  EXPECT_EQ(lines(Run(events + " --since 1h").out).back(), "2 events (newest first)");
  EXPECT_EQ(lines(Run(events + " --since '2000-01-01 00:00+00'").out).back(),
            "3 events (newest first)");
  auto newest_of_j = lines(Run(events + " --job j --limit 1").out);
  ASSERT_EQ(newest_of_j.size(), 2u);
  EXPECT_TRUE(newest_of_j[0].starts_with("item_dead ")) << newest_of_j[0];
  auto misspelt = Run(events + " --kind item_died");
  EXPECT_EQ(misspelt.status, 64);
  EXPECT_NE(misspelt.err.find("coexist: --kind 'item_died' is not an event kind\nHINT: give one "
                              "of item_deferred, item_escalated, item_dead,"),
            std::string::npos)
      << misspelt.err;
  auto bad = Run(events + " --since soon");
  EXPECT_EQ(bad.status, 64);
  EXPECT_NE(bad.err.find("coexist: --since 'soon' is neither a duration nor a timestamp\nHINT: "
                         "e.g. --since 2h, or --since '2026-12-01 08:00+00'.\n"),
            std::string::npos)
      << bad.err;
}

TEST_F(CliTest, QueuePurgeFollowsRetentionOrOlderThan) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at) VALUES"
      " ('j', 1, 'done', now() - interval '3 days'), ('j', 2, 'done', now() - interval '1 day'),"
      " ('j', 3, 'queued', NULL)");
  auto file = Write("retention.yaml", "retention:\n  done_items: 2d\n");
  auto result = Run("--config " + file.string() + " --database-url " + Url() + " queue purge");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("purged 1 done items (older than 48h), 0 events (720h)"),
            std::string::npos)
      << result.out;
  result = Run("--database-url " + Url() + " queue purge --older-than 12h --json");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("\"done_items\": 1"), std::string::npos) << result.out;
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key::text, ',') FROM coexist.items"), "3");
  result = Run("--database-url " + Url() + " queue purge --older-than soon");
  EXPECT_EQ(result.status, 64);
  EXPECT_NE(result.err.find("--older-than 'soon' is not a duration"), std::string::npos)
      << result.err;
  file = Write("bad.yaml", "retention:\n  runs: 10m\n");
  result = Run("--config " + file.string() + " --database-url " + Url() + " queue purge");
  EXPECT_EQ(result.status, 78);
  EXPECT_NE(result.err.find("bad.yaml:2:9: retention.runs: '10m' is shorter than an hour"),
            std::string::npos)
      << result.err;
}

TEST_F(CliTest, DemoUsesAThrowawayClusterAndLeavesNothingBehind) {
  auto result = Run("demo --records 200");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("(throwaway cluster)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("public.products: 200 rows, version trigger installed"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("queue       queued 0, deferred 0, done 0, dead 0"), std::string::npos)
      << result.out;
  EXPECT_EQ(ThrowawayFolders(), 0);
}

// Ctrl-C or SIGTERM while the throwaway cluster runs: the server stops and the
// folder goes, and the exit status says which signal it was.
TEST_F(CliTest, SignalsRemoveTheThrowawayCluster) {
  for (int signo : {SIGTERM, SIGINT}) {
    // Kept for the failure message: a sanitizer's report lands there too.
    const fs::path log = scratch_ / ("signal-" + std::to_string(signo) + ".log");
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("TMPDIR", scratch_.c_str(), 1);
      unsetenv("COEXIST_DATABASE_URL");
      setenv("XDG_STATE_HOME", scratch_.c_str(), 1);
      int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      // Large enough that seeding is still running when the signal comes.
      execl(COEXIST_BINARY, COEXIST_BINARY, "demo", "--records", "9000000", nullptr);
      _exit(127);
    }
    fs::path data;
    for (int i = 0; i < 600 && data.empty(); ++i) {
      std::this_thread::sleep_for(50ms);
      for (const auto& entry : fs::directory_iterator(scratch_)) {
        if (entry.path().filename().string().starts_with("coexist-pg-") &&
            fs::exists(entry.path() / "data" / "postmaster.pid")) {
          data = entry.path();
        }
      }
    }
    ASSERT_FALSE(data.empty()) << "the throwaway cluster never started";
    std::this_thread::sleep_for(500ms);
    kill(pid, signo);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << Slurp(log);
    EXPECT_EQ(WEXITSTATUS(status), 128 + signo) << Slurp(log);
    EXPECT_EQ(ThrowawayFolders(), 0) << "signal " << signo;
  }
}

// A value with a server message's DETAIL or CONTEXT lines stays on its
// record's line: grep and journald see one record per line.
TEST(LogValue, QuotesAndEscapesSoThatARecordIsOneLine) {
  EXPECT_EQ(log::Value("plain"), "plain");
  EXPECT_EQ(log::Value(""), "\"\"");
  EXPECT_EQ(log::Value("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(log::Value("ERROR:  bad\nCONTEXT:\tf"), "\"ERROR:  bad\\nCONTEXT:\\tf\"");
  EXPECT_EQ(log::Value("a\r\nb"), "\"a\\r\\nb\"");
}

}  // namespace
}  // namespace coexist

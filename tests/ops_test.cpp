// `coexist batch run` as operators schedule it: the metrics textfile after
// every run, the job lock (exit 4), SIGTERM mid-run, and --dry-run.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>

#include "db/connection.h"
#include "tests/ops_test_support.h"
#include "tests/support/database_test.h"
#include "tests/support/documented_grants.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ops_test::ParseExposition;
using ops_test::Slurp;

// The documented roles with names made unique: the batch role runs a job
// (--no-install, after the owner's `db install --config`), the online role
// uses the edit-lock API and writes the target through the guard trigger.
std::string DocumentedGrants(const std::string& online_role, const std::string& batch_role) {
  return testing::DocumentedGrants(COEXIST_SOURCE_DIR, online_role, batch_role);
}

struct PriorityRun {
  std::unique_ptr<pqxx::connection> online;
  std::unique_ptr<pqxx::work> held;
  CommandResult run;
};

class OpsTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    // Qualified: the test superuser is "coexist", so "$user" in the search
    // path would put an unqualified table into the coexist schema.
    QueryValue("CREATE TABLE public.ledger (key bigint NOT NULL)");
    dir_ = fs::temp_directory_path() / ("cx-ops-" + database_name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  // A skip_locked job "ops" over products; `sleep` seconds per chunk.
  std::string WriteConfig(const std::string& extra, const std::string& sleep = "0",
                          int chunk = 10) {
    auto path = (dir_ / "job.yaml").string();
    std::ofstream(path) << "batch: {job: ops, chunk_size: " << chunk
                        << "}\npolicy: {name: skip_locked}\n"
                        << testing::LedgerOperation(sleep) << extra;
    return path;
  }
  void Enqueue(int first, int last) {
    QueryValue("INSERT INTO coexist.queue (job, record_key) SELECT 'ops', g FROM generate_series(" +
               std::to_string(first) + ", " + std::to_string(last) + ") g");
  }
  CommandResult Coexist(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {COEXIST_BINARY, "--database-url", conninfo()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  // Everything a dry run could change, row versions included (ctid, xmin).
  std::string Snapshot() {
    return QueryValue(
               "SELECT md5(string_agg(q::text || q.ctid::text || q.xmin::text, ',' "
               "ORDER BY item_id)) FROM coexist.queue q") +
           QueryValue(
               "SELECT md5(string_agg(p::text || p.ctid::text || p.xmin::text, ',' "
               "ORDER BY id)) FROM products p") +
           QueryValue("SELECT count(*) FROM coexist.runs") + "/" +
           QueryValue("SELECT count(*) FROM coexist.events") + "/" +
           QueryValue(
               "SELECT md5(coalesce(string_agg(e::text, ',' ORDER BY record_key::bigint), '')) "
               "FROM coexist.edit_locks e");
  }

  // batch_priority as the documented batch role (with or without
  // pg_signal_backend) while an online role's idle transaction holds record
  // 61's row lock (so a cancel finds no statement and the batch terminates
  // it). Records 60..62 are queued. `held` is the online transaction.
  PriorityRun RunPriorityAsBatchRole(bool may_signal) {
    std::string online_role = "online_" + database_name();
    std::string batch_role = "batch_" + database_name();
    auto path = (dir_ / "priority.yaml").string();
    std::ofstream(path) << "batch: {job: ops, chunk_size: 10}\n"
                           "policy: {name: batch_priority, cancel_after: 100ms, "
                           "terminate_after: 300ms}\n"
                           "operation:\n"
                           "  chunk_sql: UPDATE products SET stock = stock - 1 "
                           "WHERE id = ANY ($1::bigint[])\n";
    auto install = Coexist({"--config", path, "db", "install"});
    EXPECT_EQ(install.status, 0) << install.output;
    QueryValue(DocumentedGrants(online_role, batch_role) +
               (may_signal ? "" : "REVOKE pg_signal_backend FROM " + batch_role + ";"));
    Enqueue(60, 62);
    PriorityRun out;
    out.online = db::Connect(conninfo() + " user=" + online_role, "coexist-online");
    out.held = std::make_unique<pqxx::work>(*out.online);
    out.held->exec("SELECT 1 FROM products WHERE id = 61 FOR UPDATE");
    out.run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                          "--config", path, "batch", "run", "--no-install"});
    return out;
  }

  fs::path dir_;
};

TEST_F(OpsTest, BatchRunWritesTheMetricsTextfileAndAFailedRunKeepsTheLastSuccess) {
  auto prom = dir_ / "coexist_ops.prom";
  auto config = WriteConfig("metrics: {textfile: " + prom.string() + "}\n");
  Enqueue(1, 30);
  // Record 3 is edit-locked: its item is deferred (exit 2), by reason.
  QueryValue("SELECT coexist.acquire_edit_lock('products', 3, 'alice', '10 minutes')");
  auto first = Coexist({"--config", config, "batch", "run"});
  ASSERT_EQ(first.status, 2) << first.output;
  auto samples = ParseExposition(Slurp(prom));
  EXPECT_EQ(
      samples.at(R"(coexist_batch_last_run_items{job="ops",outcome="done",policy="skip_locked"})"),
      29);
  EXPECT_EQ(
      samples.at(
          R"(coexist_batch_last_run_deferrals{job="ops",policy="skip_locked",reason="edit_locked"})"),
      1);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_run_success{job="ops",policy="skip_locked"})"), 1);
  double success = samples.at(R"(coexist_batch_last_success_timestamp_seconds{job="ops"})");
  EXPECT_GT(success, 0);
  EXPECT_EQ(samples.at(R"(coexist_batch_queued_items{job="ops"})"), 0);

  // The operation's table is gone: the run fails (the database rejects the
  // operation, 78); the file says so and keeps the last success time.
  QueryValue("DROP TABLE ledger");
  std::this_thread::sleep_for(1100ms);  // a later run timestamp, whole seconds apart
  auto second = Coexist({"--config", config, "batch", "run"});
  EXPECT_EQ(second.status, 78) << second.output;
  samples = ParseExposition(Slurp(prom));
  EXPECT_EQ(samples.at(R"(coexist_batch_last_run_success{job="ops",policy="skip_locked"})"), 0);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_success_timestamp_seconds{job="ops"})"), success);
  EXPECT_GT(samples.at(R"(coexist_batch_last_run_timestamp_seconds{job="ops"})"), success);
}

TEST_F(OpsTest, ARunWhileAnotherHoldsTheJobExitsFourAndClaimsNothing) {
  auto config = WriteConfig("");
  Enqueue(1, 20);
  auto holder = Connect("other-run");
  pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('ops')");
  auto result = Coexist({"--config", config, "batch", "run"});
  EXPECT_EQ(result.status, 4) << result.output;
  EXPECT_NE(result.output.find("job ops is already running"), std::string::npos) << result.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0 "
                  "AND run_id IS NULL"),
            20);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);

  holder.reset();  // the lock goes with the session
  result = Coexist({"--config", config, "batch", "run"});
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 20);
}

TEST_F(OpsTest, SigtermMidRunFinishesTheChunkAndLeavesNothingClaimed) {
  // Fixed chunks of 5 items, 50 ms each: the signal comes mid-queue.
  auto config = WriteConfig("pacing: {adaptive: false}\n", "0.05", 5);
  Enqueue(1, 100);
  auto log = dir_ / "run.log";
  pid_t pid = ops_test::StartCoexist(
      {}, {"--database-url", conninfo(), "--config", config, "batch", "run"}, log);
  ASSERT_TRUE(ops_test::WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 30s));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = WaitForExit(pid);
  EXPECT_EQ(status, 2) << Slurp(log);  // items left queued: not a full success
  long long applied = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(applied, 100) << "the run ended before the signal; make it slower";
  // Every applied item is done, exactly once; the rest is still queued,
  // untouched; the run is recorded as finished.
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), applied);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), applied);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0"),
            100 - applied);
  EXPECT_EQ(QueryValue("SELECT outcome || ' ' || (ended_at IS NOT NULL) FROM coexist.runs"),
            "incomplete true");
  EXPECT_NE(Slurp(log).find("claiming stopped: stopped"), std::string::npos) << Slurp(log);
}

TEST_F(OpsTest, DryRunReportsEachDecisionAndChangesNothing) {
  auto config = WriteConfig("");
  Enqueue(1, 30);
  // Item 3's record is edit-locked by an online user, item 5's row is locked
  // by an open online transaction, item 7 was deferred once before.
  QueryValue("SELECT coexist.acquire_edit_lock('products', 3, 'alice', '10 minutes')");
  QueryValue(
      "UPDATE coexist.queue SET state = 'deferred', deferrals = 1, "
      "defer_reason = 'row_locked' WHERE record_key = '7'");
  auto online = Connect("coexist-online");
  pqxx::work row_lock(*online);
  row_lock.exec("SELECT 1 FROM products WHERE id = 5 FOR UPDATE");

  auto before = Snapshot();
  auto json_path = dir_ / "dry.json";
  auto result = Coexist({"--config", config, "batch", "run", "--dry-run", "--rows", "5", "--json",
                         json_path.string()});
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(Snapshot(), before) << "the dry run changed something";

  auto report = nlohmann::json::parse(Slurp(json_path));
  EXPECT_EQ(report["total"], 30);
  EXPECT_EQ(report["by_decision"]["apply"], 28);
  EXPECT_EQ(report["by_decision"]["defer"], 2);
  std::map<std::string, std::string> reasons;
  for (const auto& item : report["items"]) {
    if (item["decision"] == "defer") reasons[item["key"]] = item["reason"];
  }
  EXPECT_EQ(reasons,
            (std::map<std::string, std::string>{{"3", "edit_locked"}, {"5", "row_locked"}}));
  EXPECT_EQ(report["busy"], "");
  // The table shows 5 items, then the totals.
  EXPECT_NE(result.output.find("... 25 more"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("items 30, apply 28, defer 2"), std::string::npos) << result.output;

  // The online transaction never waited for the dry run: it still holds
  // its lock and can write.
  row_lock.exec("UPDATE products SET stock = stock - 1 WHERE id = 5");
  row_lock.commit();

  // A real run then takes exactly what the dry run predicted.
  auto run = Coexist({"--config", config, "batch", "run"});
  EXPECT_EQ(run.status, 2) << run.output;  // item 3 deferred: edit-locked
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 29);
}

// Items queued behind an earlier item of their key are not claimable yet:
// the dry run does not list them, and says how many there are, so a queue
// of 20,000 items over 2,000 keys does not read as "items 2000".
TEST_F(OpsTest, DryRunCountsTheItemsWaitingBehindAnEarlierItemOfTheirKey) {
  auto config = WriteConfig("");
  Enqueue(1, 30);
  Enqueue(1, 3);  // a second item of keys 1 to 3
  auto json_path = dir_ / "dry.json";
  auto result =
      Coexist({"--config", config, "batch", "run", "--dry-run", "--json", json_path.string()});
  ASSERT_EQ(result.status, 0) << result.output;
  auto report = nlohmann::json::parse(Slurp(json_path));
  EXPECT_EQ(report["total"], 30);
  EXPECT_EQ(report["not_claimable_yet"], 3);
  EXPECT_NE(result.output.find("items 30, apply 30\n  and 3 more waiting items not claimable "
                               "yet: behind an earlier item of their key (a run takes them once "
                               "it is done) or deferred until policy.defer_delay\n"),
            std::string::npos)
      << result.output;
  // A real run does all 33: the second items once the first are done.
  auto run = Coexist({"--config", config, "batch", "run"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 33);
}

TEST_F(OpsTest, DryRunOutsideTheWindowClaimsNothing) {
  auto path = (dir_ / "window.yaml").string();
  std::ofstream(path) << "batch: {job: ops}\n"
                      << ops_test::WindowPolicy(2, 1)  // opens in two hours
                      << "operation:\n  chunk_sql: SELECT $1::bigint[]\n";
  Enqueue(1, 4);
  auto result = Coexist({"--config", path, "batch", "run", "--dry-run"});
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("claiming is not allowed now (outside_window)"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("items 4, not_claimed 4"), std::string::npos) << result.output;
}

TEST_F(OpsTest, DryRunSaysWhenTheJobIsBusy) {
  auto config = WriteConfig("");
  Enqueue(1, 3);
  auto holder = Connect("other-run");
  pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('ops')");
  auto result = Coexist({"--config", config, "batch", "run", "--dry-run"});
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("the job is busy"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("items 3, apply 3"), std::string::npos) << result.output;
}

TEST_F(OpsTest, TheDocumentedLeastPrivilegeRolesWork) {
  std::string online_role = "online_" + database_name();
  std::string batch_role = "batch_" + database_name();
  auto grants = DocumentedGrants(online_role, batch_role);
  ASSERT_NE(grants.find("GRANT pg_signal_backend TO " + batch_role), std::string::npos) << grants;
  auto config = WriteConfig("");
  auto install = Coexist({"--config", config, "db", "install"});  // the owner
  ASSERT_EQ(install.status, 0) << install.output;
  QueryValue(grants + "GRANT INSERT ON ledger TO " + batch_role + ";");
  Enqueue(1, 20);

  auto run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                         "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 20);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 20);

  // A range job as the same role: its pass keeps checkpoints in
  // coexist.range_checkpoints, in the chunk's own transaction.
  auto range = (dir_ / "range.yaml").string();
  std::ofstream(range)
      << "batch: {job: ops_range, chunk_size: 10, range: {where: \"id <= 30\"}}\n"
         "policy: {name: skip_locked}\n"
         "operation: {chunk_sql: 'UPDATE products SET stock = stock + 1 WHERE id = "
         "ANY ($1::bigint[])'}\n";
  QueryValue(
      "INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(1, 30) g "
      "ON CONFLICT (id) DO UPDATE SET stock = 0");
  auto walked = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                            "--config", range, "batch", "run", "--no-install"});
  EXPECT_EQ(walked.status, 0) << walked.output;
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id <= 30 AND stock = 1"), 30);

  // The batch role enqueues too (cron: enqueue, then run): with the schema
  // up to date, enqueue creates nothing and needs no CREATE right.
  auto enqueue =
      RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role, "--config",
                  config, "enqueue", "--select", "SELECT g FROM generate_series(21, 30) g"});
  EXPECT_EQ(enqueue.status, 0) << enqueue.output;
  EXPECT_NE(enqueue.output.find("10 added"), std::string::npos) << enqueue.output;
  // A schema behind the binary, which only its owner may bring up: the
  // command says so, exit 78, and adds nothing.
  QueryValue(
      "UPDATE coexist.schema_migrations SET version = -version WHERE version = (SELECT "
      "max(version) FROM coexist.schema_migrations)");
  auto behind =
      RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role, "--config",
                  config, "enqueue", "--select", "SELECT g FROM generate_series(31, 40) g"});
  EXPECT_EQ(behind.status, 78) << behind.output;
  EXPECT_NE(behind.output.find("migrations, and this role may not install it: ERROR:  permission "
                               "denied for database"),
            std::string::npos)
      << behind.output;
  EXPECT_NE(behind.output.find("run `coexist db install --config FILE` as the schema's owner"),
            std::string::npos)
      << behind.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 30);
  QueryValue("UPDATE coexist.schema_migrations SET version = -version WHERE version < 0");

  // Without --no-install the run would create objects it may not: refused.
  auto installing =
      RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role, "--config",
                  config, "batch", "run"});
  EXPECT_NE(installing.status, 0);
  EXPECT_NE(installing.output.find("permission denied"), std::string::npos) << installing.output;

  auto online = db::Connect(conninfo() + " user=" + online_role, "coexist-online");
  pqxx::work tx(*online);
  auto token = tx.exec1("SELECT coexist.acquire_edit_lock('products', 50, 'alice', '1 minute')")[0]
                   .as<std::string>();
  tx.exec_params("SELECT coexist.check_edit_lock('products', 50, $1::uuid)", token);
  tx.exec("UPDATE products SET stock = stock - 1 WHERE id = 50");
  tx.exec_params("SELECT coexist.release_edit_lock('products', 50, $1::uuid)", token);
  tx.commit();
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 50"), "999");
  // A lock the batch revoked: the online role learns who revoked it (CX002),
  // although it may not read coexist.events itself.
  pqxx::work again(*online);
  token = again.exec1("SELECT coexist.acquire_edit_lock('products', 51, 'alice', '1 minute')")[0]
              .as<std::string>();
  again.commit();
  QueryValue("SELECT coexist.revoke_edit_lock('products', 51, 'batch:nightly')");
  pqxx::work lost(*online);
  try {
    lost.exec_params("SELECT coexist.check_edit_lock('products', 51, $1::uuid)", token);
    ADD_FAILURE() << "check_edit_lock of a revoked lock passed";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "CX002") << e.what();
    EXPECT_NE(std::string(e.what()).find("was revoked by batch:nightly"), std::string::npos)
        << e.what();
  }
  lost.abort();
  // What the online role must not do: touch the batch's tables.
  // (libpqxx 6.4 throws insufficient_privilege without its sqlstate().)
  pqxx::work other(*online);
  EXPECT_THROW(other.exec("DELETE FROM coexist.queue"), pqxx::insufficient_privilege);
}

// A right the operation needs, missing (revoked mid-run by a DBA, or never
// granted), is the deployment's fault: the run stops with 78 and charges no
// item an attempt, even with max_attempts 1 (before, every item of the queue
// went dead within a few chunks).
TEST_F(OpsTest, ARevokedRightStopsTheRunWithoutChargingItems) {
  std::string online_role = "online_" + database_name();
  std::string batch_role = "batch_" + database_name();
  auto config = (dir_ / "job.yaml").string();
  std::ofstream(config) << "batch: {job: ops, chunk_size: 5, max_attempts: 1}\n"
                        << "policy: {name: skip_locked}\n"
                        << testing::LedgerOperation();
  auto install = Coexist({"--config", config, "db", "install"});
  ASSERT_EQ(install.status, 0) << install.output;
  // The ledger's INSERT is not granted: the operation's statement is refused.
  QueryValue(DocumentedGrants(online_role, batch_role));
  Enqueue(1, 20);
  auto run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                         "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 78) << run.output;
  EXPECT_NE(run.output.find("refuses the operation for every item: ERROR:  permission denied for "
                            "table ledger"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT state || ':' || attempts, ',') FROM "
                       "coexist.items"),
            "queued:0");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);

  // UPDATE on the target revoked: the run's start check (batch/check.h)
  // refuses it at the key, with the GRANT, before it claims anything.
  QueryValue("GRANT INSERT ON ledger TO " + batch_role + "; REVOKE UPDATE ON products FROM " +
             batch_role);
  run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                    "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 78) << run.output;
  EXPECT_NE(run.output.find("config error: " + config + ": target.table: role \"" + batch_role +
                            "\" may not UPDATE public.products\nHINT: the batch locks the rows "
                            "it applies (SELECT ... FOR UPDATE) and its operation writes them: "
                            "GRANT SELECT, UPDATE ON public.products TO " +
                            batch_role + ";\n"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT state || ':' || attempts, ',') FROM "
                       "coexist.items"),
            "queued:0");

  // Granted back: the next run does all of it.
  QueryValue("GRANT UPDATE ON products TO " + batch_role);
  run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                    "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 20);
}

// A server that turned read-only (a failed-over primary now a standby, or
// default_transaction_read_only set by an operator) is the server's fault,
// not the items': the run exits 75 (retry later) and no item is charged.
TEST_F(OpsTest, AReadOnlyServerStopsTheRunWithoutChargingItems) {
  std::string online_role = "online_" + database_name();
  std::string batch_role = "batch_" + database_name();
  auto config = (dir_ / "job.yaml").string();
  std::ofstream(config) << "batch: {job: ops, chunk_size: 5, max_attempts: 1}\n"
                        << "policy: {name: skip_locked}\n"
                        << testing::LedgerOperation();
  auto install = Coexist({"--config", config, "db", "install"});
  ASSERT_EQ(install.status, 0) << install.output;
  QueryValue(DocumentedGrants(online_role, batch_role) + "; GRANT INSERT ON ledger TO " +
             batch_role);
  Enqueue(1, 20);
  QueryValue("ALTER ROLE " + batch_role + " SET default_transaction_read_only = on");
  auto run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                         "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 75) << run.output;
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT state || ':' || attempts, ',') FROM "
                       "coexist.items"),
            "queued:0");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);

  QueryValue("ALTER ROLE " + batch_role + " RESET default_transaction_read_only");
  run = RunCommand({COEXIST_BINARY, "--database-url", conninfo() + " user=" + batch_role,
                    "--config", config, "batch", "run", "--no-install"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 20);
}

TEST_F(OpsTest, TheDocumentedBatchRoleMaySignalAnOnlineRolesBlocker) {
  auto p = RunPriorityAsBatchRole(true);
  EXPECT_EQ(p.run.status, 0) << p.run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 3);
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT subject, ',') FROM coexist.events "
                       "WHERE kind = 'backend_terminated'"),
            "coexist-online");
  EXPECT_THROW(p.held->exec("SELECT 1"), pqxx::broken_connection);
}

TEST_F(OpsTest, ABatchRoleWithoutSignalRightsDefersTheBlockedItemInsteadOfFailing) {
  auto p = RunPriorityAsBatchRole(false);
  EXPECT_EQ(p.run.status, 2) << p.run.output;  // deferred, not 70
  EXPECT_NE(p.run.output.find("online backends not signalled"), std::string::npos) << p.run.output;
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key::text || ':' || state, ',' ORDER BY "
                       "record_key::bigint) FROM coexist.items"),
            "60:done,61:deferred,62:done");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind LIKE 'backend_%'"), 0);
  EXPECT_NO_THROW(p.held->exec("SELECT 1")) << "the online user's session must live";
}

}  // namespace
}  // namespace coexist

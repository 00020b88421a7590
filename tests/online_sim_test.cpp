// The online simulator against a real PostgreSQL: each transaction kind's
// outcomes, the atomic floor, the lost-update check, the reserve scenario,
// and the command's exit statuses on bad input.

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/subprocess.h"
#include "config_core/config_error.h"
#include "db/target_table.h"
#include "online-sim/reserve.h"
#include "online-sim/simulator.h"
#include "schema/install.h"
#include "tests/support/database_test.h"

namespace coexist::online_sim {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr const char* kApp = "coexist-online-test";

// Users on few records, waiting for row locks without a timeout (a lock
// cycle could only end as a deadlock) and retrying conflicts quickly.
void Contend(config::OnlineConfig& config) {
  config.app_work = 1ms;
  config.lock_timeout = 0ms;
  config.max_retries = 50;
  config.backoff_base = 1ms;
  config.backoff_cap = 10ms;
}

config::OnlineConfig OnlyKind(const std::string& kind, int users) {
  config::OnlineConfig c;
  c.mix = config::OnlineMix{0, 0, 0, 0, 0, 0};
  if (kind == "view") c.mix.view = 1;
  if (kind == "optimistic_edit") c.mix.optimistic_edit = 1;
  if (kind == "pessimistic_edit") c.mix.pessimistic_edit = 1;
  if (kind == "offline_edit") c.mix.offline_edit = 1;
  if (kind == "atomic_decrement") c.mix.atomic_decrement = 1;
  if (kind == "nolock") c.mix.nolock = 1;
  if (kind == "multi_edit") c.mix.multi_edit = 1;
  c.users = users;
  c.pool_size = users;
  c.think_time = 0ms;
  c.think_distribution = config::ThinkDistribution::kFixed;
  c.records = 1;
  c.app_work = 0ms;
  c.application_name = kApp;
  return c;
}

const KindReport& KindOf(const Report& report, const std::string& kind) {
  for (const auto& k : report.kinds) {
    if (k.kind == kind) return k;
  }
  throw std::runtime_error("no kind " + kind);
}

long long Outcome(const Report& report, const std::string& kind, const std::string& outcome) {
  const auto& outcomes = KindOf(report, kind).outcomes;
  auto it = outcomes.find(outcome);
  return it == outcomes.end() ? 0 : it->second;
}

class OnlineSimTest : public testing::DatabaseTest {
 protected:
  Report Run(const config::OnlineConfig& config, long long per_user,
             milliseconds duration = std::chrono::seconds(60),
             const config::TargetTable& target = {}) {
    RunOptions options;
    options.duration = duration;
    options.transactions_per_user = per_user;
    Simulator simulator(conninfo(), target, config, options);
    simulator.Prepare();
    return simulator.Run();
  }
  // What the first `records` products lost of their initial 1000 stock.
  long long StockTaken(int records) {
    return Count("SELECT sum(1000 - stock) FROM products WHERE id <= " + std::to_string(records));
  }
  long long Stock(int id) {
    return std::stoll(QueryValue("SELECT stock FROM products WHERE id = " + std::to_string(id)));
  }
};

TEST_F(OnlineSimTest, ViewReadsWithoutChangingAnything) {
  auto config = OnlyKind("view", 4);
  config.records = 10;
  Report report = Run(config, 25);
  EXPECT_EQ(Outcome(report, "view", "ok"), 100);
  EXPECT_EQ(report.transactions, 100);
  EXPECT_EQ(KindOf(report, "view").latency.count, 100);
  EXPECT_TRUE(report.lost_check.performed);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(report.lost_check.actual_change, 0);
  EXPECT_EQ(report.pool_wait.count, 100);
}

// Two users read the same version, work 200 ms, and write: the second write
// conflicts once, gets the current row back and succeeds on its retry.
TEST_F(OnlineSimTest, TwoSessionsOnOneRowGiveOneOptimisticConflict) {
  auto config = OnlyKind("optimistic_edit", 2);
  config.app_work = 200ms;
  config.backoff_base = 0ms;
  Report report = Run(config, 1);
  const auto& kind = KindOf(report, "optimistic_edit");
  EXPECT_EQ(kind.conflicts, 1);
  EXPECT_EQ(kind.retried, 1);
  EXPECT_EQ(Outcome(report, "optimistic_edit", "ok"), 2);
  EXPECT_EQ(Stock(1), 998);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(QueryValue("SELECT version FROM products WHERE id = 1"), "2");
}

TEST_F(OnlineSimTest, OptimisticGivesUpAfterMaxRetries) {
  auto config = OnlyKind("optimistic_edit", 8);
  config.app_work = 20ms;
  config.max_retries = 0;
  config.backoff_base = 0ms;
  Report report = Run(config, 5);
  EXPECT_GT(Outcome(report, "optimistic_edit", "gave_up"), 0);
  EXPECT_EQ(Outcome(report, "optimistic_edit", "gave_up"),
            KindOf(report, "optimistic_edit").conflicts);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(1000 - Stock(1), Outcome(report, "optimistic_edit", "ok"));
}

// A row lock held by another session: NOWAIT fails at once with 55P03 and
// is counted as nowait; lock_timeout waits 100 ms and is counted apart. The
// user goes on after each failure.
TEST_F(OnlineSimTest, PessimisticCountsNowaitAndLockTimeoutApart) {
  auto holder = Connect();
  pqxx::work lock(*holder);
  lock.exec("SELECT 1 FROM products WHERE id = 1 FOR UPDATE");

  auto nowait = OnlyKind("pessimistic_edit", 1);
  nowait.lock_mode = config::LockMode::kNowait;
  Report report = Run(nowait, 3);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "nowait"), 3);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "lock_timeout"), 0);
  EXPECT_LT(KindOf(report, "pessimistic_edit").latency.max_ms, 100);

  auto timeout = OnlyKind("pessimistic_edit", 1);
  timeout.lock_timeout = 100ms;
  report = Run(timeout, 3);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "lock_timeout"), 3);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "nowait"), 0);
  EXPECT_GE(KindOf(report, "pessimistic_edit").latency.p50_ms, 90);
  lock.abort();
  EXPECT_EQ(Stock(1), 1000);
}

TEST_F(OnlineSimTest, PessimisticSerialisesWithoutLosingUpdates) {
  auto config = OnlyKind("pessimistic_edit", 8);
  config.app_work = 2ms;
  config.lock_timeout = 0ms;
  Report report = Run(config, 10);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "ok"), 80);
  EXPECT_EQ(Stock(1), 920);
  EXPECT_EQ(report.lost_check.lost, 0);
}

// Seed 000: the delta (2) and the floor (0) are separate; stock 5 allows
// exactly two decrements, and the floor holds under 4 concurrent users.
TEST_F(OnlineSimTest, AtomicDecrementNeverCrossesTheFloor) {
  QueryValue("UPDATE products SET stock = 5 WHERE id = 1");
  auto config = OnlyKind("atomic_decrement", 4);
  config.atomic_delta = 2;
  config.atomic_floor = 0;
  Report report = Run(config, 5);
  EXPECT_EQ(Outcome(report, "atomic_decrement", "ok"), 2);
  EXPECT_EQ(Outcome(report, "atomic_decrement", "floor"), 18);
  EXPECT_EQ(Stock(1), 1);
  EXPECT_EQ(report.lost_check.lost, 0);
}

// The blind write of nolock loses updates, and the check sees exactly how
// many: reported successes minus what the table lost.
TEST_F(OnlineSimTest, LostUpdateCheckCatchesBlindWrites) {
  auto config = OnlyKind("nolock", 8);
  config.app_work = 20ms;
  Report report = Run(config, 5);
  long long ok = Outcome(report, "nolock", "ok");
  EXPECT_EQ(ok, 40);
  EXPECT_GT(report.lost_check.lost, 0);
  EXPECT_EQ(report.lost_check.lost, ok - (1000 - Stock(1)));
  EXPECT_EQ(report.lost_check.keys_mismatched, 1);
}

TEST_F(OnlineSimTest, OfflineEditSavesUnderItsEditLockAndReleasesIt) {
  auto config = OnlyKind("offline_edit", 2);
  config.records = 2;
  config.offline_hold = 50ms;
  config.offline_abandon = 0;
  Report report = Run(config, 5);
  long long ok = Outcome(report, "offline_edit", "ok");
  EXPECT_EQ(ok + Outcome(report, "offline_edit", "edit_lock_busy"), 10) << ReportJson(report);
  EXPECT_GT(ok, 0);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.edit_locks"), "0");
}

TEST_F(OnlineSimTest, OfflineEditOnARecordSomeoneElseEditsIsBusy) {
  QueryValue("SELECT coexist.acquire_edit_lock('products', 1, 'someone-else', '1 hour')");
  auto config = OnlyKind("offline_edit", 1);
  Report report = Run(config, 3);
  EXPECT_EQ(Outcome(report, "offline_edit", "edit_lock_busy"), 3);
  EXPECT_EQ(Stock(1), 1000);
}

TEST_F(OnlineSimTest, AbandonedEditLeavesItsLockToExpire) {
  auto config = OnlyKind("offline_edit", 1);
  config.offline_hold = 10ms;
  config.offline_abandon = 1;
  Report report = Run(config, 1);
  EXPECT_EQ(Outcome(report, "offline_edit", "abandoned"), 1);
  EXPECT_EQ(QueryValue("SELECT owner FROM coexist.edit_locks WHERE record_key = '1'"),
            "online-user-0");
}

// An administrator releases the lock while the user edits: the save fails
// with CX002 (lock revoked) instead of overwriting.
TEST_F(OnlineSimTest, SaveAfterTheLockWasReleasedIsLockRevoked) {
  auto config = OnlyKind("offline_edit", 1);
  config.offline_hold = 1500ms;
  config.offline_abandon = 0;
  std::jthread admin([this] {
    for (int i = 0; i < 100; ++i) {
      if (QueryValue("SELECT count(*) FROM coexist.edit_locks") == "1") break;
      std::this_thread::sleep_for(10ms);
    }
    QueryValue("SELECT coexist.release_owner_edit_locks('online-user-0')");
  });
  Report report = Run(config, 1);
  EXPECT_EQ(Outcome(report, "offline_edit", "lock_revoked"), 1);
  EXPECT_EQ(Stock(1), 1000);
}

// The batch's guard trigger raises CX003/CX004/CX005 for online writes;
// here a test trigger raises each code (and PostgreSQL's) so every outcome
// is counted under its own name, and the user goes on.
struct RaisedCase {
  const char* sqlstate;
  const char* outcome;
};

class RaisedByTrigger : public OnlineSimTest, public ::testing::WithParamInterface<RaisedCase> {};

TEST_P(RaisedByTrigger, IsCountedUnderItsOwnOutcome) {
  QueryValue(std::string("CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
                         "BEGIN RAISE EXCEPTION 'refused by test' USING ERRCODE = '") +
             GetParam().sqlstate +
             "'; END $$; CREATE TRIGGER test_refuse BEFORE UPDATE ON products "
             "FOR EACH ROW EXECUTE FUNCTION test_refuse(); SELECT 1");
  for (const char* kind : {"optimistic_edit", "pessimistic_edit", "atomic_decrement"}) {
    Report report = Run(OnlyKind(kind, 1), 2);
    EXPECT_EQ(Outcome(report, kind, GetParam().outcome), 2) << kind;
  }
  EXPECT_EQ(Stock(1), 1000);
}

INSTANTIATE_TEST_SUITE_P(
    Codes, RaisedByTrigger,
    ::testing::Values(RaisedCase{"CX003", "refused_window"}, RaisedCase{"CX004", "refused_owner"},
                      RaisedCase{"CX005", "refused_edit_locked"}, RaisedCase{"40P01", "deadlock"},
                      RaisedCase{"40001", "serialization"}, RaisedCase{"57014", "canceled"},
                      RaisedCase{"23505", "other"}),
    [](const auto& test_case) { return std::string(test_case.param.sqlstate); });

// batch_priority terminates online backends: the user counts it, its
// connection is re-opened, and it goes on.
TEST_F(OnlineSimTest, TerminatedBackendIsCountedAndReconnected) {
  auto config = OnlyKind("pessimistic_edit", 1);
  config.app_work = 300ms;
  std::jthread killer([this] {
    auto admin = Connect("coexist-test-admin");
    for (int i = 0; i < 200; ++i) {
      pqxx::work tx(*admin);
      auto killed = tx.exec_params(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 "
          "AND state = 'idle in transaction' AND query LIKE '%FOR UPDATE'",
          std::string(kApp));
      tx.commit();
      if (!killed.empty()) return;
      std::this_thread::sleep_for(5ms);
    }
  });
  Report report = Run(config, 3);
  killer.join();
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "terminated"), 1);
  EXPECT_EQ(Outcome(report, "pessimistic_edit", "ok"), 2);
  EXPECT_EQ(report.reconnects, 1);
  EXPECT_EQ(report.lost_check.lost, 0);
}

TEST_F(OnlineSimTest, OpenModelCountsFromTheScheduledStart) {
  auto config = OnlyKind("view", 2);
  config.model = config::LoadModel::kOpen;
  config.rate = 200;
  config.records = 50;
  config.latency_limit = 1000ms;
  Report report = Run(config, 0, 1000ms);
  EXPECT_GT(report.transactions, 100);
  EXPECT_LT(report.transactions, 300);
  EXPECT_EQ(report.schedule_lag.count, report.transactions);
  EXPECT_EQ(report.late, 0);
}

TEST_F(OnlineSimTest, PoolLargerThanTheServerAllowsFailsBeforeAnyLoad) {
  auto config = OnlyKind("view", 1);
  config.pool_size = 5000;
  Simulator simulator(conninfo(), config::TargetTable{}, config, RunOptions{});
  try {
    simulator.Prepare();
    FAIL() << "a pool of 5000 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("the pool needs 5000 connections but the server allows"),
              std::string::npos)
        << e.what();
  }
}

// Seed 001's qualitative findings at 1 item, 16 clients x 25.
TEST_F(OnlineSimTest, ReserveReproducesSeed001AtOneItem) {
  ReserveOptions options;
  options.items = {1};
  Reserve reserve(conninfo(), options);
  auto rows = reserve.Run();
  ASSERT_EQ(rows.size(), 4u);
  std::map<std::string, ReserveRow> by;
  for (const auto& row : rows) by[row.method] = row;
  EXPECT_GT(by["nolock"].lost, 0);
  EXPECT_EQ(by["nolock"].ok, 400);
  EXPECT_EQ(by["optimistic"].lost, 0);
  EXPECT_GT(by["optimistic"].gaveup, 0);
  EXPECT_EQ(by["optimistic"].ok + by["optimistic"].gaveup, 400);
  EXPECT_GT(by["optimistic"].conflicts, by["optimistic"].gaveup);
  EXPECT_EQ(by["pessimistic"].ok, 400);
  EXPECT_EQ(by["pessimistic"].lost, 0);
  EXPECT_EQ(by["pessimistic"].stock_decreased, 400);
  EXPECT_EQ(by["atomic"].ok, 400);
  EXPECT_EQ(by["atomic"].lost, 0);
  auto json = nlohmann::json::parse(ReserveJson(rows));
  ASSERT_EQ(json.size(), 4u);
  std::vector<std::string> keys;
  for (const auto& [key, value] : json[0].items()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"conflicts", "gaveup", "items", "lost", "method", "ok",
                                            "seconds", "stock_decreased"}));
  EXPECT_EQ(QueryValue("SELECT to_regnamespace('coexist_reserve') IS NULL"), "t");
}

// Many users editing 4 of 6 records each: every save is all or nothing (the
// stock fell by exactly 4 per saved edit), and since every multi_edit
// locks its records in key order, none deadlocks another. lock_timeout 0
// waits forever, so a lock cycle could only end as a deadlock.
TEST_F(OnlineSimTest, MultiEditSavesAllOrNothingAndNeverDeadlocks) {
  auto config = OnlyKind("multi_edit", 16);
  config.records = 6;
  config.multi_edit_keys = 4;
  Contend(config);
  Report report = Run(config, 10);
  long long ok = Outcome(report, "multi_edit", "ok");
  EXPECT_EQ(Outcome(report, "multi_edit", "deadlock"), 0) << ReportJson(report);
  EXPECT_EQ(ok + Outcome(report, "multi_edit", "gave_up"), 160) << ReportJson(report);
  EXPECT_GT(ok, 0);
  EXPECT_GT(KindOf(report, "multi_edit").conflicts, 0) << "no contention: the test shows nothing";
  EXPECT_EQ(StockTaken(6), 4 * ok);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(report.lost_check.expected_change, -4 * ok);
}

// Two users read the same 4 records and work 200 ms: the second save finds
// the versions changed, rolls back (nothing of it is saved), and succeeds
// on its retry with the rows its lock returned.
TEST_F(OnlineSimTest, MultiEditConflictRollsBackAndRetries) {
  auto config = OnlyKind("multi_edit", 2);
  config.records = 4;
  config.multi_edit_keys = 4;
  config.app_work = 200ms;
  config.backoff_base = 0ms;
  Report report = Run(config, 1);
  const auto& kind = KindOf(report, "multi_edit");
  EXPECT_EQ(kind.conflicts, 1);
  EXPECT_EQ(kind.retried, 1);
  EXPECT_EQ(Outcome(report, "multi_edit", "ok"), 2);
  EXPECT_EQ(QueryValue("SELECT string_agg(stock || '/' || version, ' ' ORDER BY id) FROM products "
                       "WHERE id <= 4"),
            "998/2 998/2 998/2 998/2");
}

TEST_F(OnlineSimTest, MultiEditGivesUpAfterMaxRetries) {
  auto config = OnlyKind("multi_edit", 8);
  config.records = 3;
  config.multi_edit_keys = 3;
  config.app_work = 20ms;
  config.max_retries = 0;
  config.backoff_base = 0ms;
  Report report = Run(config, 5);
  long long gave_up = Outcome(report, "multi_edit", "gave_up");
  EXPECT_GT(gave_up, 0);
  EXPECT_EQ(gave_up, KindOf(report, "multi_edit").conflicts);
  EXPECT_EQ(gave_up + Outcome(report, "multi_edit", "ok"), 40);
  EXPECT_EQ(StockTaken(3), 3 * Outcome(report, "multi_edit", "ok"));
}

// Beside the other kinds on the same few records: nothing lost, no deadlock.
TEST_F(OnlineSimTest, MultiEditAmongTheOtherKindsLosesNothing) {
  auto config = OnlyKind("multi_edit", 12);
  config.mix.optimistic_edit = 1;
  config.mix.pessimistic_edit = 1;
  config.mix.atomic_decrement = 1;
  config.mix.view = 1;
  config.records = 5;
  config.multi_edit_keys = 3;
  Contend(config);
  Report report = Run(config, 15);
  EXPECT_EQ(report.transactions, 180);
  EXPECT_EQ(report.outcomes.count("deadlock"), 0u) << ReportJson(report);
  EXPECT_GT(Outcome(report, "multi_edit", "ok"), 0);
  EXPECT_EQ(report.lost_check.lost, 0) << ReportJson(report);
  EXPECT_EQ(StockTaken(5), -report.lost_check.expected_change);
}

TEST_F(OnlineSimTest, MultiEditNeedsAsManyRecordsAsItEdits) {
  auto config = OnlyKind("multi_edit", 1);
  config.records = 3;
  config.multi_edit_keys = 4;
  Simulator simulator(conninfo(), config::TargetTable{}, config, RunOptions{});
  try {
    simulator.Prepare();
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnavailable);
    EXPECT_EQ(std::string(e.what()),
              "multi_edit edits 4 records at a time but the simulator has 3");
  }
}

// Keys that are not integers: every kind (edit locks and multi_edit's key
// arrays included) works on a uuid key and on a text key whose values need
// quoting in an array literal.
class OtherKeyTypes : public OnlineSimTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(OtherKeyTypes, EveryKindWorksAndLosesNothing) {
  std::string type = GetParam();
  std::string keys = type == std::string("uuid")
                         ? "SELECT gen_random_uuid() FROM generate_series(1, 6)"
                         : R"(VALUES ('a"b'), ('c\d'), ('e,f'), ('g h'), ('{i}'), ('NULL'))";
  QueryValue("CREATE TABLE public.notes (id " + type +
             " PRIMARY KEY, stock integer NOT NULL, version bigint NOT NULL DEFAULT 0); "
             "INSERT INTO public.notes (id, stock) SELECT k, 1000 FROM (" +
             keys + ") AS s(k); SELECT 1");
  config::TargetTable target;
  target.table = "notes";
  {
    auto conn = Connect();
    db::InstallSchema(*conn, target);
  }
  auto config = OnlyKind("multi_edit", 8);
  config.mix.view = 1;
  config.mix.optimistic_edit = 1;
  config.mix.pessimistic_edit = 1;
  config.mix.offline_edit = 1;
  config.mix.atomic_decrement = 1;
  config.offline_hold = 5ms;
  config.offline_abandon = 0;
  config.records = 0;
  config.multi_edit_keys = 3;
  config.lock_timeout = 0ms;
  config.max_retries = 50;
  config.backoff_base = 1ms;
  Report report = Run(config, 12, std::chrono::seconds(60), target);
  EXPECT_EQ(report.transactions, 96);
  for (const char* kind :
       {"view", "optimistic_edit", "pessimistic_edit", "atomic_decrement", "multi_edit"}) {
    EXPECT_EQ(Outcome(report, kind, "ok") + Outcome(report, kind, "gave_up"),
              KindOf(report, kind).transactions)
        << kind << ": " << ReportJson(report);
  }
  EXPECT_EQ(report.lost_check.keys_checked, 6);
  EXPECT_EQ(report.lost_check.lost, 0);
  EXPECT_EQ(Count("SELECT sum(1000 - stock) FROM notes"), -report.lost_check.expected_change);

  // Under that contention every offline edit may meet a conflict or a busy
  // edit lock (seen: 11 of 11); alone, each one saves.
  auto alone = OnlyKind("offline_edit", 1);
  alone.offline_hold = 5ms;
  alone.offline_abandon = 0;
  alone.records = 0;
  Report solo = Run(alone, 5, std::chrono::seconds(60), target);
  EXPECT_EQ(Outcome(solo, "offline_edit", "ok"), 5) << ReportJson(solo);
  EXPECT_EQ(solo.lost_check.lost, 0);
}

INSTANTIATE_TEST_SUITE_P(Keys, OtherKeyTypes, ::testing::Values("uuid", "text"),
                         [](const auto& test_case) { return std::string(test_case.param); });

config::OnlineConfig FromYaml(const std::string& online_section) {
  auto config = config::LoadString("online:\n" + online_section, "sim.yaml").online;
  config.think_time = 0ms;
  config.think_distribution = config::ThinkDistribution::kFixed;
  config.app_work = 0ms;
  config.application_name = kApp;
  return config;
}

// A custom kind: its statements run with their placeholders bound, in its
// transaction, and the report counts it under its name. Every sale it
// records matches what the stock lost.
TEST_F(OnlineSimTest, CustomKindRunsItsScript) {
  QueryValue("CREATE TABLE sales (product bigint NOT NULL, qty integer NOT NULL); SELECT 1");
  auto config = FromYaml(R"(  users: 8
  pool_size: 8
  records: 5
  mix: {view: 0, optimistic_edit: 0, pessimistic_edit: 0, offline_edit: 0,
        atomic_decrement: 0, settle_order: 1}
  custom_kinds:
    settle_order:
      script:
        - \set key random_key
        - \set qty random(1, 3)
        - BEGIN
        - SELECT stock FROM public.products WHERE id = :key FOR UPDATE
        - UPDATE public.products SET stock = stock - :qty WHERE id = :key
        - \sleep 1ms
        - INSERT INTO sales (product, qty) VALUES (:key, :qty)
        - COMMIT
)");
  Report report = Run(config, 10);
  EXPECT_EQ(Outcome(report, "settle_order", "ok"), 80) << ReportJson(report);
  EXPECT_EQ(KindOf(report, "settle_order").weight, 1);
  EXPECT_EQ(Count("SELECT count(*) FROM sales"), 80);
  EXPECT_EQ(Count("SELECT count(DISTINCT qty) FROM sales"), 3);
  EXPECT_EQ(Count("SELECT sum(qty) FROM sales"), StockTaken(5));
  EXPECT_EQ(Count("SELECT count(*) FROM sales WHERE product > 5"), 0);
  EXPECT_FALSE(report.lost_check.performed);
  EXPECT_EQ(report.lost_check.skipped, "custom kinds ran");
}

// Custom kinds alone need no value column: an application's table with a
// text key and neither `stock` nor a version column runs them.
TEST_F(OnlineSimTest, CustomKindsAloneNeedNoValueColumn) {
  // Qualified: the test role is named coexist, so "$user" in the
  // search_path would put an unqualified table in coexist's schema.
  QueryValue(
      "CREATE TABLE public.shop_orders (order_no text PRIMARY KEY, status text NOT NULL);"
      "INSERT INTO public.shop_orders SELECT 'A-' || g, 'new' FROM generate_series(1, 5) g;"
      "SELECT 1");
  auto config = FromYaml(R"(  users: 4
  pool_size: 4
  mix: {view: 0, optimistic_edit: 0, pessimistic_edit: 0, offline_edit: 0,
        atomic_decrement: 0, ship: 1}
  custom_kinds:
    ship:
      script:
        - \set key random_key
        - UPDATE public.shop_orders SET status = 'shipped' WHERE order_no = :key
)");
  config::TargetTable orders;
  orders.table = "shop_orders";
  orders.key_column = "order_no";
  Report report = Run(config, 5, std::chrono::seconds(60), orders);
  EXPECT_EQ(Outcome(report, "ship", "ok"), 20) << ReportJson(report);
  EXPECT_GE(Count("SELECT count(*) FROM public.shop_orders WHERE status = 'shipped'"), 1);
}

// A kind's name may take all 63 bytes of a name; its statements' names on
// the server must still differ (PostgreSQL cuts them at 63 bytes).
TEST_F(OnlineSimTest, CustomKindWithTheLongestNameRunsEveryLine) {
  std::string name(63, 'k');
  auto config = FromYaml(
      "  users: 2\n  pool_size: 2\n  records: 3\n  mix: {view: 0, "
      "optimistic_edit: 0, pessimistic_edit: 0, offline_edit: 0, "
      "atomic_decrement: 0, " +
      name + ": 1}\n  custom_kinds:\n    " + name +
      ":\n      script:\n        - \\set key random_key\n"
      "        - SELECT stock FROM products WHERE id = :key\n"
      "        - SELECT version FROM products WHERE id = :key\n");
  Report report = Run(config, 5);
  EXPECT_EQ(Outcome(report, name, "ok"), 10) << ReportJson(report);
}

// A custom kind's failures are counted like the built-in kinds': a row
// lock held elsewhere is lock_timeout, a SQL error other by its SQLSTATE,
// and a script that leaves its transaction open is rolled back and counted.
TEST_F(OnlineSimTest, CustomKindFailuresAreCountedByOutcome) {
  auto holder = Connect();
  pqxx::work lock(*holder);
  lock.exec("SELECT 1 FROM products WHERE id = 1 FOR UPDATE");
  auto config = FromYaml(R"(  users: 1
  pool_size: 1
  records: 1
  lock_timeout: 100ms
  mix: {view: 0, optimistic_edit: 0, pessimistic_edit: 0, offline_edit: 0,
        atomic_decrement: 0, locks: 1, divides: 1, forgets: 1}
  custom_kinds:
    locks:
      script:
        - UPDATE products SET stock = stock - 1 WHERE id = 1
    divides:
      script:
        - \set n random(7, 7)
        - SELECT 1 / (:n::int - 7)
    forgets:
      script:
        - \set key random_key
        - BEGIN
        - UPDATE products SET note = 'forgotten' WHERE id = :key + 1
)");
  Report report = Run(config, 30);
  EXPECT_EQ(Outcome(report, "locks", "lock_timeout"), KindOf(report, "locks").transactions);
  EXPECT_EQ(Outcome(report, "divides", "other"), KindOf(report, "divides").transactions);
  EXPECT_EQ(KindOf(report, "divides").other_sqlstates.at("22012"),
            KindOf(report, "divides").transactions);
  EXPECT_EQ(KindOf(report, "forgets").other_sqlstates.at("open_transaction"),
            KindOf(report, "forgets").transactions);
  EXPECT_GT(KindOf(report, "forgets").transactions, 0);
  lock.abort();
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE note = 'forgotten'"), 0);
  EXPECT_EQ(Stock(1), 1000);
}

// A statement that does not prepare is a located configuration error before
// any load, not a run of failures.
TEST_F(OnlineSimTest, CustomStatementThatDoesNotPrepareIsAConfigError) {
  auto config = FromYaml(R"(  custom_kinds:
    typo:
      script:
        - \set key random_key
        - UPDATE public.prodcts SET stock = stock - 1 WHERE id = :key
)");
  Simulator simulator(conninfo(), config::TargetTable{}, config, RunOptions{});
  try {
    simulator.Prepare();
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "sim.yaml:6:11: online.custom_kinds.typo.script: the statement does not prepare: "
              "relation \"public.prodcts\" does not exist");
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
}

// The examples load, and the one with a custom kind runs on the demo table.
TEST_F(OnlineSimTest, ExamplesLoadAndTheCustomOneRuns) {
  std::string examples = std::string(COEXIST_SOURCE_DIR) + "/config/examples/";
  for (const char* name : {"online-sim", "online-sim-open"}) {
    EXPECT_NO_THROW(config::LoadFile(examples + name + ".yaml")) << name;
  }
  auto file = config::LoadFile(examples + "online-sim-custom.yaml");
  auto config = file.online;
  config.users = 8;
  config.pool_size = 8;
  config.think_time = 1ms;
  config.application_name = kApp;
  Report report = Run(config, 10, std::chrono::seconds(60), file.target);
  EXPECT_EQ(report.transactions, 80);
  EXPECT_GT(Outcome(report, "settle_order", "ok"), 0) << ReportJson(report);
  EXPECT_GT(Outcome(report, "multi_edit", "ok"), 0) << ReportJson(report);
  EXPECT_EQ(report.outcomes.count("other"), 0u) << ReportJson(report);
  EXPECT_EQ(report.outcomes.count("deadlock"), 0u) << ReportJson(report);
}

// The command: bad input gets its own exit status before any load.
int RunCli(const std::string& args) {
  int raw = std::system((std::string(COEXIST_BINARY) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

TEST_F(OnlineSimTest, CommandExitStatusesOnBadInput) {
  // online-sim overwrites the target's values: it needs --allow-database.
  std::string url = "--database-url '" + conninfo() + "'";
  std::string allow = " --allow-database " + database_name();
  EXPECT_EQ(RunCli(url + " online-sim --pool 5000 --duration 1s" + allow), 69);
  EXPECT_EQ(RunCli("--database-url 'host=/nonexistent-coexist port=1' online-sim --duration 1s"),
            75);
  auto config =
      std::filesystem::temp_directory_path() / ("online-sim-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(config) << "online:\n  mix:\n    view: 0\n    optimistic_edit: 0\n"
                           "    pessimistic_edit: 0\n    offline_edit: 0\n"
                           "    atomic_decrement: 0\n";
  EXPECT_EQ(RunCli(url + " --config " + config.string() + " online-sim --duration 1s" + allow), 78);
  std::filesystem::remove(config);
  EXPECT_EQ(RunCli(url + " online-sim --duration 1s --users 0" + allow), 64);
  EXPECT_EQ(RunCli(url + " online-sim --duration 1s --quiet --users 4 --pool 4" + allow), 0);
}

// A target named in the file is checked like every command's: a key column
// the table lacks is located at its line before any load (78).
TEST_F(OnlineSimTest, AWrongKeyColumnIsLocatedInTheFile) {
  QueryValue(
      "CREATE TABLE public.shop_items (item_no bigint PRIMARY KEY, stock integer); SELECT 1");
  auto dir = std::filesystem::temp_directory_path() / ("online-sim-key-" + database_name());
  std::filesystem::create_directories(dir);
  auto config = (dir / "sim.yaml").string();
  std::ofstream(config) << "target:\n  table: shop_items\n  key_column: id\n";
  auto output = (dir / "out.txt").string();
  pid_t pid =
      Spawn({.argv = {COEXIST_BINARY, "--database-url", conninfo(), "--config", config,
                      "online-sim", "--duration", "1s", "--allow-database", database_name()},
             .output_path = output,
             .parent_death_signal = SIGKILL});
  EXPECT_EQ(WaitForExit(pid), 78);
  std::ifstream in(output);
  std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(text.find(config + ":3:15: target.key_column: table public.shop_items has no column "
                               "\"id\""),
            std::string::npos)
      << text;
  std::filesystem::remove_all(dir);
}

TEST_F(OnlineSimTest, CtrlCPrintsThePartialResultAndExits130) {
  auto dir = std::filesystem::temp_directory_path() / ("online-sim-int-" + database_name());
  std::filesystem::create_directories(dir);
  auto output = (dir / "out.txt").string();
  auto json = (dir / "report.json").string();
  pid_t pid = Spawn(
      {.argv = {COEXIST_BINARY, "--database-url", conninfo(), "online-sim", "--duration", "60s",
                "--users", "4", "--pool", "4", "--json", json, "--allow-database", database_name()},
       .output_path = output,
       .parent_death_signal = SIGKILL});
  auto read = [&] {
    std::ifstream in(output);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // Wait for the load to run: a progress line comes once a second.
  for (int i = 0; i < 300 && read().find("tps") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(WaitForExit(pid), 128 + SIGINT);
  auto text = read();
  EXPECT_NE(text.find("(interrupted: partial result)"), std::string::npos) << text;
  EXPECT_NE(text.find("all kinds"), std::string::npos) << text;
  std::ifstream in(json);
  auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["interrupted"], true);
  EXPECT_LT(report["elapsed_seconds"].get<double>(), 30) << "Ctrl-C did not stop the run";
  EXPECT_GT(report["transactions"].get<long long>(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace coexist::online_sim

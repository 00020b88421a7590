// The edit-lock API (schema/migrations/0002_edit_locks.sql, 0010) and the guard
// trigger (0003, 0006, 0009) as an online application meets them.

#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

#include "db/sqlstate.h"
#include "tests/support/database_test.h"

namespace coexist::db {
namespace {

using coexist::testing::DatabaseTest;
using coexist::testing::SqlStateOf;

class EditLocks : public DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    conn_ = Connect();
  }

  std::string Acquire(long long key, const std::string& owner,
                      const std::string& ttl = "5 minutes") {
    pqxx::work tx(*conn_);
    auto token =
        tx.exec_params("SELECT coexist.acquire_edit_lock('products', $1, $2, $3::interval)", key,
                       owner, ttl)[0][0]
            .as<std::string>();
    tx.commit();
    return token;
  }

  // Runs `sql` with $1 = key, $2 = token; returns the SQLSTATE and message.
  std::pair<std::string, std::string> Fails(const std::string& sql, long long key,
                                            const std::string& token) {
    try {
      pqxx::work tx(*conn_);
      tx.exec_params(sql, key, token);
      tx.commit();
      return {"", ""};
    } catch (const pqxx::sql_error& e) {
      return {e.sqlstate(), e.what()};
    }
  }

  std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(EditLocks, SecondOwnerIsRefusedWithCx001) {
  Acquire(1, "alice");
  try {
    Acquire(1, "bob");
    FAIL() << "bob took alice's lock";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), sqlstate::kEditLockBusy);
    EXPECT_NE(std::string(e.what()).find("record 1 of products is being edited by alice"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(EditLocks, SameOwnerReacquiresTheSameLock) {
  std::string first = Acquire(2, "alice");
  EXPECT_EQ(Acquire(2, "alice"), first) << "a reload of the edit screen keeps the token";
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.edit_locks"), "1");
}

TEST_F(EditLocks, ExpiredLockCountsAsFree) {
  std::string alice = Acquire(3, "alice", "1 millisecond");
  QueryValue("SELECT pg_sleep(0.01)");
  std::string bob = Acquire(3, "bob");
  EXPECT_NE(alice, bob);
  EXPECT_EQ(QueryValue("SELECT owner FROM coexist.edit_locks WHERE record_key = '3'"), "bob");
  auto [state, message] =
      Fails("SELECT coexist.check_edit_lock('products', $1, $2::uuid)", 3, alice);
  EXPECT_EQ(state, sqlstate::kEditLockLost);
  EXPECT_NE(message.find("no longer held"), std::string::npos) << message;
}

TEST_F(EditLocks, RenewExtendsOnlyALiveLock) {
  std::string token = Acquire(4, "alice", "1 second");
  auto before = QueryValue("SELECT expires_at FROM coexist.edit_locks WHERE record_key = '4'");
  EXPECT_EQ(
      Fails("SELECT coexist.renew_edit_lock('products', $1, $2::uuid, '10 minutes')", 4, token)
          .first,
      "");
  auto after = QueryValue("SELECT expires_at FROM coexist.edit_locks WHERE record_key = '4'");
  EXPECT_LT(before, after);
  EXPECT_EQ(Fails("SELECT coexist.renew_edit_lock('products', $1, $2::uuid, '1 minute')", 4,
                  "00000000-0000-0000-0000-000000000000")
                .first,
            sqlstate::kEditLockLost);
}

TEST_F(EditLocks, SaveAfterReleaseFailsAndReleaseIsIdempotent) {
  std::string token = Acquire(5, "alice");
  EXPECT_EQ(Fails("SELECT coexist.check_edit_lock('products', $1, $2::uuid)", 5, token).first, "");
  EXPECT_EQ(QueryValue("SELECT coexist.release_edit_lock('products', 5, '" + token + "')"), "t");
  EXPECT_EQ(QueryValue("SELECT coexist.release_edit_lock('products', 5, '" + token + "')"), "f");
  EXPECT_EQ(Fails("SELECT coexist.check_edit_lock('products', $1, $2::uuid)", 5, token).first,
            sqlstate::kEditLockLost);
}

TEST_F(EditLocks, RevocationIsReportedWithWhoRevoked) {
  std::string token = Acquire(6, "alice");
  QueryValue(
      "WITH gone AS (DELETE FROM coexist.edit_locks WHERE record_key = '6' RETURNING token) "
      "INSERT INTO coexist.events (kind, target, record_key, actor, subject, details) "
      "SELECT 'edit_lock_revoked', 'products', 6, 'run 42', 'alice', "
      "jsonb_build_object('token', token) FROM gone");
  auto [state, message] =
      Fails("SELECT coexist.check_edit_lock('products', $1, $2::uuid)", 6, token);
  EXPECT_EQ(state, sqlstate::kEditLockLost);
  EXPECT_NE(message.find("was revoked by run 42"), std::string::npos) << message;
}

TEST_F(EditLocks, SessionTimeoutReleasesEveryLockOfTheOwner) {
  Acquire(7, "alice");
  Acquire(8, "alice");
  Acquire(9, "bob");
  EXPECT_EQ(QueryValue("SELECT coexist.release_owner_edit_locks('alice')"), "2");
  EXPECT_EQ(QueryValue("SELECT string_agg(owner, ',') FROM coexist.edit_locks"), "bob");
}

// The check share-locks the lock row until the save commits, so a revoke
// (DELETE) waits for the save instead of slipping in between.
TEST_F(EditLocks, CheckHoldsTheLockRowUntilTheSaveCommits) {
  std::string token = Acquire(10, "alice");
  pqxx::work save(*conn_);
  save.exec_params("SELECT coexist.check_edit_lock('products', 10, $1::uuid)", token);
  auto revoker = Connect();
  pqxx::work revoke(*revoker);
  revoke.exec("SET LOCAL lock_timeout = '100ms'");
  try {
    revoke.exec("DELETE FROM coexist.edit_locks WHERE record_key = '10'");
    FAIL() << "the revoke did not wait for the save";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), sqlstate::kLockNotAvailable);
  }
}

// The chaos suite's deadlock: alice saves (check_edit_lock holds
// her lock row, then her UPDATE of the record), while someone acquires the
// same record. The acquirer took the record's row FOR SHARE and waited for
// alice's lock row; alice's UPDATE waited for that share lock: 40P01 in one
// of them. Now the acquirer is refused with CX001 at once, whoever it is
// (another owner, or alice herself in a second tab), and alice's save goes
// through.
TEST_F(EditLocks, AcquireDuringTheHoldersSaveIsRefusedInsteadOfDeadlocking) {
  QueryValue("SELECT coexist.install_guard_trigger('products', 'id')");
  for (const char* acquirer : {"bob", "alice"}) {
    SCOPED_TRACE(acquirer);
    QueryValue("DELETE FROM coexist.edit_locks; SELECT 1");
    std::string token = Acquire(31, "alice");
    pqxx::work save(*conn_);
    save.exec_params("SELECT coexist.check_edit_lock('products', 31, $1::uuid)", token);
    std::string acquire_state = "(not run)";
    std::atomic<bool> acquired{false};
    std::jthread other([&] {
      try {
        auto conn = Connect("coexist-online other");
        acquire_state = SqlStateOf(*conn, "SELECT coexist.acquire_edit_lock('products', 31, '" +
                                              std::string(acquirer) + "', '5 minutes')");
      } catch (const std::exception& e) {  // 40P01 is no pqxx::sql_error in libpqxx 6.4
        acquire_state = e.what();
      }
      acquired = true;
    });
    // Alice writes once the acquirer has answered or waits on a lock (as it
    // did on her lock row, holding the record's row FOR SHARE).
    auto watcher = Connect();
    for (int i = 0; i < 500 && !acquired; ++i) {
      if (SqlStateOf(*watcher,
                     "DO $$BEGIN IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name"
                     " = 'coexist-online other' AND wait_event_type = 'Lock') THEN RAISE"
                     " EXCEPTION 'waiting' USING ERRCODE = 'P0001'; END IF; END$$") == "P0001") {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    try {
      save.exec("UPDATE products SET stock = stock + 1 WHERE id = 31");
      save.commit();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "alice's save failed: " << e.what();
    }
    other.join();
    EXPECT_EQ(acquire_state, sqlstate::kEditLockBusy);
  }
}

TEST_F(EditLocks, OwnerLongerThan200BytesIsRefused) {
  EXPECT_FALSE(Acquire(1, std::string(200, 'a')).empty());
  // 101 two-byte characters: the limit is in bytes, as NOTIFY's is.
  std::string accents;
  for (int i = 0; i < 101; ++i) accents += "\u00e9";
  for (const std::string& owner : {std::string(201, 'a'), accents}) {
    try {
      Acquire(2, owner);
      FAIL() << "an owner of " << owner.size() << " bytes was accepted";
    } catch (const pqxx::sql_error& e) {
      EXPECT_EQ(e.sqlstate(), sqlstate::kStringTooLong);
      EXPECT_NE(std::string(e.what()).find("edit-lock owner is " + std::to_string(owner.size()) +
                                           " bytes long; at most 200 are allowed"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.edit_locks WHERE record_key = '2'"), "0");
}

struct RevokedNotice : pqxx::notification_receiver {
  explicit RevokedNotice(pqxx::connection_base& conn)
      : pqxx::notification_receiver(conn, "coexist_edit_lock_revoked") {}
  void operator()(const std::string& text, int) override { payload = text; }
  std::string payload;
};

// A lock taken before owners were limited: revoking it must not fail on
// NOTIFY's 8000-byte payload limit.
TEST_F(EditLocks, RevokingTheLockOfAnOversizedOwnerNotifiesACutOwner) {
  QueryValue(
      "INSERT INTO coexist.edit_locks (target, record_key, owner, expires_at)"
      " VALUES ('products', 11, repeat('x', 9000), now() + interval '1 hour') RETURNING 1");
  RevokedNotice notice(*conn_);
  pqxx::nontransaction(*conn_).exec("SELECT 1");  // sends the LISTEN
  EXPECT_EQ(QueryValue("SELECT length(coexist.revoke_edit_lock('products', 11, 'batch run 7'))"),
            "9000");
  for (int i = 0; i < 100 && notice.payload.empty(); ++i) conn_->await_notification(0, 100'000);
  ASSERT_FALSE(notice.payload.empty());
  pqxx::work tx(*conn_);
  auto payload = tx.exec_params(
      "SELECT length(p->>'owner'), p->>'owner_truncated', p->>'by' FROM (SELECT $1::jsonb p) s",
      notice.payload)[0];
  EXPECT_EQ(payload[0].as<int>(), 200);
  EXPECT_EQ(payload[1].as<std::string>(), "true");
  EXPECT_EQ(payload[2].as<std::string>(), "batch run 7");
}

// A batch locks a record's row (FOR UPDATE) before it reads the record's
// edit lock: acquiring must wait for that chunk, or the lock could appear
// between the batch's read and its write.
TEST_F(EditLocks, AcquireWaitsWhileABatchHoldsTheRecordsRow) {
  QueryValue("SELECT coexist.install_guard_trigger('products', 'id', 'owner')");
  std::string alice = Acquire(13, "alice");
  auto batch = Connect("coexist-batch");
  {
    pqxx::work chunk(*batch);
    chunk.exec("SELECT 1 FROM products WHERE id IN (12, 13) FOR UPDATE");
    // A new lock and a re-acquire (alice reloads her edit screen) both wait.
    for (const auto& [key, owner] : {std::pair{12, "bob"}, {13, "alice"}}) {
      EXPECT_EQ(SqlStateOf(*conn_,
                           "SET LOCAL lock_timeout = '100ms';"
                           " SELECT coexist.acquire_edit_lock('products', " +
                               std::to_string(key) + ", '" + owner + "', '5 minutes')"),
                sqlstate::kLockNotAvailable)
          << owner << " took the lock while the batch held the row";
    }
    chunk.commit();
  }
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.edit_locks WHERE record_key = '12'"), "0");
  EXPECT_FALSE(Acquire(12, "bob").empty());
  EXPECT_EQ(Acquire(13, "alice"), alice);
}

// raise_edit_lock_lost looks up the revocation of one token on every CX002;
// without an index of its own it read every revocation ever recorded.
TEST_F(EditLocks, RevokedLockLookupUsesAnIndex) {
  QueryValue(
      "INSERT INTO coexist.events (kind, target, record_key, actor, details)"
      " SELECT 'edit_lock_revoked', 'products', g % 100, 'batch run 1',"
      " jsonb_build_object('token', gen_random_uuid()) FROM generate_series(1, 20000) g;"
      "ANALYZE coexist.events");
  pqxx::work tx(*conn_);
  std::string plan;
  for (const auto& row :
       tx.exec("EXPLAIN SELECT e.actor FROM coexist.events e"
               " WHERE e.kind = 'edit_lock_revoked' AND e.target = 'products'::regclass"
               " AND e.record_key = '5'"
               " AND e.details->>'token' = '00000000-0000-0000-0000-000000000001'"
               " ORDER BY e.event_id DESC LIMIT 1")) {
    plan += row[0].as<std::string>() + "\n";
  }
  EXPECT_NE(plan.find("events_revoked_token"), std::string::npos) << plan;
}

class GuardTrigger : public DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    conn_ = Connect();
  }
  void Exec(const std::string& sql) { pqxx::nontransaction(*conn_).exec(sql); }
  // An online writer's statement in its own session: its SQLSTATE, "" if it passed.
  std::string Online(const std::string& sql) {
    auto online = Connect("coexist-online");
    return SqlStateOf(*online, sql);
  }
  void ReadOnlyWindow(const std::string& target) {
    // start == end: 24 hours, every day, so it is active whenever the test
    // runs; read-only between runs too, so no run is needed for it to refuse.
    Exec(
        "INSERT INTO coexist.windows (job, target, position, time_zone, weekdays, start_time,"
        " end_time, mode, between_runs) VALUES ('nightly', '" +
        target + "', 0, 'UTC', '{1,2,3,4,5,6,7}', '00:00', '00:00', 'read_only', true)");
  }
  // The oid of the function the table's trigger calls.
  std::string TriggerFunction(const std::string& table, const std::string& trigger) {
    return QueryValue("SELECT tgfoid FROM pg_trigger WHERE tgrelid = '" + table +
                      "'::regclass AND tgname = '" + trigger + "'");
  }
  std::string FunctionNamed(const std::string& kind, const std::string& table) {
    return QueryValue("SELECT to_regproc(coexist.trigger_function_name('" + kind + "', '" + table +
                      "'))::oid");
  }
  std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(GuardTrigger, GuardsEveryPartitionOfAHashPartitionedTarget) {
  Exec(
      "CREATE TABLE parts (id bigint NOT NULL, stock integer NOT NULL DEFAULT 0,"
      " version bigint NOT NULL DEFAULT 0, owner text NOT NULL DEFAULT 'online')"
      " PARTITION BY HASH (id);"
      "CREATE TABLE parts_0 PARTITION OF parts FOR VALUES WITH (MODULUS 2, REMAINDER 0);"
      "CREATE TABLE parts_1 PARTITION OF parts FOR VALUES WITH (MODULUS 2, REMAINDER 1);"
      "INSERT INTO parts (id) SELECT generate_series(1, 10);"
      "SELECT coexist.install_version_trigger('parts', 'version');"
      "SELECT coexist.install_guard_trigger('parts', 'id', 'owner')");
  ReadOnlyWindow("parts");
  for (int id = 1; id <= 10; ++id) {
    EXPECT_EQ(Online("UPDATE parts SET stock = 1 WHERE id = " + std::to_string(id)),
              sqlstate::kWindowRefused)
        << "id " << id;
  }
  EXPECT_EQ(Online("INSERT INTO parts (id) VALUES (11)"), sqlstate::kWindowRefused);
  EXPECT_EQ(Online("DELETE FROM parts_0"), sqlstate::kWindowRefused);
  Exec("DELETE FROM coexist.windows");

  std::string token = QueryValue("SELECT coexist.acquire_edit_lock('parts', 3, 'alice', '1 hour')");
  EXPECT_EQ(Online("UPDATE parts SET stock = 2 WHERE id = 3"), sqlstate::kEditLockedRefused);
  EXPECT_EQ(Online("DELETE FROM parts WHERE id = 3"), sqlstate::kEditLockedRefused);
  EXPECT_EQ(Online("SELECT coexist.check_edit_lock('parts', 3, '" + token +
                   "'); UPDATE parts SET stock = 3 WHERE id = 3"),
            "");
  EXPECT_EQ(QueryValue("SELECT stock || ':' || version FROM parts WHERE id = 3"), "3:1");

  Exec(
      "SET coexist.actor = 'batch'; UPDATE parts SET owner = 'batch' WHERE id = 4;"
      " RESET coexist.actor");
  EXPECT_EQ(Online("UPDATE parts SET stock = 4 WHERE id = 4"), sqlstate::kOwnerRefused);
  EXPECT_EQ(Online("UPDATE parts SET stock = 5 WHERE id = 5"), "");
}

TEST_F(GuardTrigger, GuardsARangePartitionAttachedAfterTheInstall) {
  Exec(
      "CREATE TABLE ranged (id bigint NOT NULL, version bigint NOT NULL DEFAULT 0)"
      " PARTITION BY RANGE (id);"
      "CREATE TABLE ranged_low PARTITION OF ranged FOR VALUES FROM (0) TO (100);"
      "SELECT coexist.install_guard_trigger('ranged', 'id');"
      "CREATE TABLE ranged_high PARTITION OF ranged FOR VALUES FROM (100) TO (200);"
      "INSERT INTO ranged (id) VALUES (1), (150)");
  QueryValue("SELECT coexist.acquire_edit_lock('ranged', 150, 'alice', '1 hour')");
  EXPECT_EQ(Online("UPDATE ranged SET version = 7 WHERE id = 150"), sqlstate::kEditLockedRefused);
  EXPECT_EQ(Online("UPDATE ranged_high SET version = 7"), sqlstate::kEditLockedRefused);
  ReadOnlyWindow("ranged");
  EXPECT_EQ(Online("INSERT INTO ranged (id) VALUES (151)"), sqlstate::kWindowRefused);
  EXPECT_EQ(Online("UPDATE ranged SET version = 7 WHERE id = 1"), sqlstate::kWindowRefused);
}

// Windows and edit locks of a sub-partition could not be told from those of
// its root: refused, naming the root.
TEST_F(GuardTrigger, RefusesAPartitionedPartitionAsTarget) {
  Exec(
      "CREATE TABLE tree (id bigint NOT NULL) PARTITION BY RANGE (id);"
      "CREATE TABLE tree_low PARTITION OF tree FOR VALUES FROM (0) TO (100)"
      " PARTITION BY HASH (id)");
  try {
    Exec("SELECT coexist.install_guard_trigger('tree_low', 'id')");
    FAIL() << "a partitioned partition was accepted";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "0A000");
    EXPECT_NE(std::string(e.what()).find("table tree_low is a partition of tree"),
              std::string::npos)
        << e.what();
  }
}

// The batch's writes skip the guard by its WHEN clause (0025), not by a call
// of its function per row; online writers still meet it. A guard installed
// before 0025 gains the clause at the next install, unless the table is busy
// beyond lock_timeout: then it stays as it was, and the install goes on.
TEST_F(GuardTrigger, SkippedForTheBatchByItsWhenClause) {
  const std::string has_condition =
      "SELECT tgqual IS NOT NULL FROM pg_trigger"
      " WHERE tgrelid = 'products'::regclass AND tgname = 'coexist_guard'";
  Exec("SELECT coexist.install_guard_trigger('products', 'id')");
  EXPECT_EQ(QueryValue(has_condition), "t");
  QueryValue("SELECT coexist.acquire_edit_lock('products', 1, 'alice', '1 hour')");
  EXPECT_EQ(Online("UPDATE products SET stock = 0 WHERE id = 1"), sqlstate::kEditLockedRefused);
  auto batch = Connect("coexist-batch");
  EXPECT_EQ(
      SqlStateOf(*batch, "SET coexist.actor = 'batch'; UPDATE products SET stock = 0 WHERE id = 1"),
      "");
  EXPECT_EQ(QueryValue("SELECT stock || ' ' || version FROM products WHERE id = 1"), "0 1");

  // As installed before 0025: the same function, no WHEN clause.
  Exec(
      "CREATE OR REPLACE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON products"
      " FOR EACH ROW EXECUTE FUNCTION " +
      QueryValue("SELECT coexist.trigger_function_name('guard', 'products')") + "()");
  EXPECT_EQ(QueryValue(has_condition), "f");
  {
    auto online = Connect("coexist-online");
    pqxx::work busy(*online);
    busy.exec("UPDATE products SET stock = stock WHERE id = 2");
    Exec(
        "SET lock_timeout = '100ms'; SELECT coexist.install_guard_trigger('products', 'id');"
        " RESET lock_timeout");
    EXPECT_EQ(QueryValue(has_condition), "f") << "kept while an online transaction holds the table";
    busy.commit();
  }
  EXPECT_EQ(Online("UPDATE products SET stock = 0 WHERE id = 1"), sqlstate::kEditLockedRefused);
  Exec("SELECT coexist.install_guard_trigger('products', 'id')");
  EXPECT_EQ(QueryValue(has_condition), "t");
  EXPECT_EQ(Online("UPDATE products SET stock = 0 WHERE id = 1"), sqlstate::kEditLockedRefused);
}

// Two tables whose names share their first 60 characters, in a long schema:
// before 0009 both names were cut to one function, and the second install
// gave the first table a guard that reads the second's key column.
TEST_F(GuardTrigger, LongTargetNamesGetFunctionsOfTheirOwn) {
  const std::string schema = "a_schema_whose_name_is_long_enough_to_matter";
  const std::string common(60, 't');
  const std::string first = schema + "." + common + "_a";
  const std::string second = schema + "." + common + "_b";
  Exec("CREATE SCHEMA " + schema + ";" + "CREATE TABLE " + first +
       " (a_id bigint PRIMARY KEY, version bigint NOT NULL DEFAULT 0);" + "CREATE TABLE " + second +
       " (b_id bigint PRIMARY KEY, v2 bigint NOT NULL DEFAULT 0);" + "INSERT INTO " + first +
       " VALUES (1, 0); INSERT INTO " + second + " VALUES (1, 0);" +
       "SELECT coexist.install_guard_trigger('" + first + "', 'a_id');" +
       "SELECT coexist.install_guard_trigger('" + second + "', 'b_id');" +
       "SELECT coexist.install_version_trigger('" + first + "', 'version');" +
       "SELECT coexist.install_version_trigger('" + second + "', 'v2')");
  for (const char* trigger : {"coexist_guard", "coexist_bump_version"}) {
    EXPECT_NE(TriggerFunction(first, trigger), TriggerFunction(second, trigger)) << trigger;
    EXPECT_LE(Count("SELECT octet_length(proname) FROM pg_proc WHERE oid = (SELECT tgfoid FROM"
                    " pg_trigger WHERE tgrelid = '" +
                    first + "'::regclass AND tgname = '" + trigger + "')"),
              63);
  }
  for (const auto& table : {first, second}) {
    QueryValue("SELECT coexist.acquire_edit_lock('" + table + "', 1, 'alice', '1 hour')");
    EXPECT_EQ(Online("UPDATE " + table + " SET " + (table == first ? "version" : "v2") + " = 5"),
              sqlstate::kEditLockedRefused)
        << table;
  }
  Exec("DELETE FROM coexist.edit_locks");
  EXPECT_EQ(Online("UPDATE " + first + " SET version = 5"), "");
  EXPECT_EQ(Online("UPDATE " + second + " SET v2 = 5"), "");
  EXPECT_EQ(QueryValue("SELECT version FROM " + first), "1") << "bumped once, from 0";
  EXPECT_EQ(QueryValue("SELECT v2 FROM " + second), "1");
  // Stable: the same name whatever the search_path.
  EXPECT_EQ(FunctionNamed("guard", first), TriggerFunction(first, "coexist_guard"));
  const std::string name = "SELECT coexist.trigger_function_name('guard', '" + first + "')";
  EXPECT_EQ(QueryValue("SET search_path = " + schema + "; " + name), QueryValue(name));
}

// What an install before 0009 left: functions named after target::text, one
// of them cut to 63 bytes and shared by two long targets, and an orphan of
// another search_path. Installing points the triggers at the new functions
// and drops every old one once no trigger calls it.
TEST_F(GuardTrigger, InstallDropsTheFunctionsOfTheOldNaming) {
  const std::string common = "public." + std::string(60, 'o');
  const std::string cut(57, 'o');  // 'guard:' and 57 bytes of target::text: 63
  Exec("CREATE TABLE " + common + "_a (id bigint PRIMARY KEY);" + "CREATE TABLE " + common +
       "_b (id bigint PRIMARY KEY);" + "CREATE FUNCTION coexist.\"guard:" + cut +
       "\"() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';" +
       "CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON " + common +
       "_a FOR EACH ROW EXECUTE FUNCTION coexist.\"guard:" + cut + "\"();" +
       "CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON " + common +
       "_b FOR EACH ROW EXECUTE FUNCTION coexist.\"guard:" + cut + "\"();" +
       "CREATE FUNCTION coexist.\"guard:products\"() RETURNS trigger LANGUAGE plpgsql AS"
       " 'BEGIN RETURN NEW; END';"
       "CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON products"
       " FOR EACH ROW EXECUTE FUNCTION coexist.\"guard:products\"();"
       "CREATE FUNCTION coexist.\"guard:public.products\"() RETURNS trigger LANGUAGE plpgsql AS"
       " 'BEGIN RETURN NEW; END';"
       "CREATE FUNCTION coexist.\"bump_version:products\"() RETURNS trigger LANGUAGE plpgsql AS"
       " 'BEGIN NEW.version := OLD.version + 1; RETURN NEW; END';"
       "CREATE OR REPLACE TRIGGER coexist_bump_version BEFORE UPDATE ON products"
       " FOR EACH ROW EXECUTE FUNCTION coexist.\"bump_version:products\"()");
  const std::string old_names =
      "SELECT count(*) FROM pg_proc WHERE pronamespace = 'coexist'::regnamespace AND proname IN"
      " ('guard:products', 'guard:public.products', 'bump_version:products', 'guard:" +
      cut + "')";
  EXPECT_EQ(QueryValue(old_names), "4");

  Exec(
      "SELECT coexist.install_guard_trigger('products', 'id', 'owner');"
      "SELECT coexist.install_version_trigger('products', 'version');"
      "SELECT coexist.install_guard_trigger('" +
      common + "_a', 'id')");
  EXPECT_EQ(QueryValue(old_names), "1") << "the cut name is still called by the second table";
  Exec("SELECT coexist.install_guard_trigger('" + common + "_b', 'id')");
  EXPECT_EQ(QueryValue(old_names), "0");

  for (const auto& [table, trigger, kind] :
       {std::tuple{std::string("products"), "coexist_guard", "guard"},
        {std::string("products"), "coexist_bump_version", "bump_version"},
        {common + "_a", "coexist_guard", "guard"},
        {common + "_b", "coexist_guard", "guard"}}) {
    EXPECT_EQ(TriggerFunction(table, trigger), FunctionNamed(kind, table))
        << table << " " << trigger;
  }
  EXPECT_EQ(QueryValue("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'products'::regclass"),
            "2");
  QueryValue("SELECT coexist.acquire_edit_lock('products', 1, 'alice', '1 hour')");
  EXPECT_EQ(Online("UPDATE products SET stock = 0 WHERE id = 1"), sqlstate::kEditLockedRefused);
}

}  // namespace
}  // namespace coexist::db

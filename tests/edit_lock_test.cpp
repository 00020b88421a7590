// The edit-lock API (db/migrations/0002_edit_locks.sql) as an online
// application would call it.

#include "db/sqlstate.h"
#include "tests/support/database_test.h"

namespace coexist::db {
namespace {

using coexist::testing::DatabaseTest;

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
  EXPECT_EQ(QueryValue("SELECT owner FROM coexist.edit_locks WHERE record_key = 3"), "bob");
  auto [state, message] =
      Fails("SELECT coexist.check_edit_lock('products', $1, $2::uuid)", 3, alice);
  EXPECT_EQ(state, sqlstate::kEditLockLost);
  EXPECT_NE(message.find("no longer held"), std::string::npos) << message;
}

TEST_F(EditLocks, RenewExtendsOnlyALiveLock) {
  std::string token = Acquire(4, "alice", "1 second");
  auto before = QueryValue("SELECT expires_at FROM coexist.edit_locks WHERE record_key = 4");
  EXPECT_EQ(
      Fails("SELECT coexist.renew_edit_lock('products', $1, $2::uuid, '10 minutes')", 4, token)
          .first,
      "");
  auto after = QueryValue("SELECT expires_at FROM coexist.edit_locks WHERE record_key = 4");
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
      "WITH gone AS (DELETE FROM coexist.edit_locks WHERE record_key = 6 RETURNING token) "
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
    revoke.exec("DELETE FROM coexist.edit_locks WHERE record_key = 10");
    FAIL() << "the revoke did not wait for the save";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), sqlstate::kLockNotAvailable);
  }
}

}  // namespace
}  // namespace coexist::db

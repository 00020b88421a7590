// db::Classify on exceptions built here, as libpqxx 6.4 throws them: no
// server needed. Whoever retries on kRetryable (the worker's chunk scanning,
// the latency probe, the lock steps) must never see a commit in doubt.

#include "db/failure.h"

#include <gtest/gtest.h>

#include <pqxx/except>

namespace coexist::db {
namespace {

// libpqxx derives statement_completion_unknown (40003) from
// transaction_rollback, but nothing says the work rolled back.
TEST(Classify, AStatementWhoseCompletionIsUnknownIsInDoubtNotRetryable) {
  pqxx::statement_completion_unknown unknown("could not tell");
  const pqxx::transaction_rollback& as_rollback = unknown;
  EXPECT_EQ(Classify(as_rollback), FailureKind::kInDoubt);
  EXPECT_EQ(Classify(pqxx::in_doubt_error("lost while committing")), FailureKind::kInDoubt);
  EXPECT_EQ(ExitCodeOf(FailureKind::kInDoubt), ExitCode::kTempFail);
}

TEST(Classify, RollbacksThatUndidTheWorkAreRetryable) {
  EXPECT_EQ(Classify(pqxx::serialization_failure("40001")), FailureKind::kRetryable);
  EXPECT_EQ(Classify(pqxx::deadlock_detected("40P01")), FailureKind::kRetryable);
  EXPECT_EQ(Classify(pqxx::transaction_rollback("40000")), FailureKind::kRetryable);
  EXPECT_EQ(Classify(pqxx::sql_error("canceled", "SELECT 1", "57014")), FailureKind::kRetryable);
}

// too_many_connections is a broken_connection in libpqxx 6.4, not an
// sql_error: 53300 from a query's result is a lost connection; one that
// comes as an sql_error is the server's (class 53).
TEST(Classify, TooManyConnectionsByTypeOrBySqlState) {
  EXPECT_EQ(Classify(pqxx::too_many_connections("sorry, too many clients already")),
            FailureKind::kConnectionLost);
  EXPECT_EQ(Classify(pqxx::sql_error("sorry", "", "53300")), FailureKind::kServer);
  EXPECT_EQ(SqlStateOf(pqxx::insufficient_privilege("denied")), "42501");
}

}  // namespace
}  // namespace coexist::db

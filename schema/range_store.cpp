#include "schema/range_store.h"

#include <pqxx/pqxx>

#include "db/array_literal.h"

namespace coexist::db {
namespace {

constexpr const char* kColumns =
    "segment, pass, upper_key, last_key, finished, applied, exceptions, expected";

RangeSegment SegmentOf(const pqxx::row& row) {
  RangeSegment s;
  s.segment = row[0].as<int>();
  s.pass = row[1].as<long long>();
  if (!row[2].is_null()) s.upper_key = row[2].as<std::string>();
  if (!row[3].is_null()) s.last_key = row[3].as<std::string>();
  s.finished = row[4].as<bool>();
  s.applied = row[5].as<long long>();
  s.exceptions = row[6].as<long long>();
  s.expected = row[7].as<long long>();
  return s;
}

std::vector<RangeSegment> SegmentsOf(const pqxx::result& result) {
  std::vector<RangeSegment> out;
  for (const auto& row : result) out.push_back(SegmentOf(row));
  return out;
}

}  // namespace

std::vector<RangeSegment> ReadSegments(pqxx::transaction_base& tx, const std::string& job) {
  return SegmentsOf(tx.exec_params(std::string("SELECT ") + kColumns +
                                       " FROM coexist.range_checkpoints WHERE job = $1 "
                                       "ORDER BY segment",
                                   job));
}

void LockPassStart(pqxx::transaction_base& tx, const std::string& job) {
  tx.exec_params("SELECT pg_advisory_xact_lock(coexist.range_pass_lock_class(), hashtext($1))",
                 job);
}

std::vector<RangeSegment> StartPass(pqxx::transaction_base& tx, const std::string& job,
                                    long long pass, const std::vector<std::string>& uppers,
                                    long long matching_rows) {
  tx.exec_params("DELETE FROM coexist.range_checkpoints WHERE job = $1", job);
  // Segment i runs from bound i-1 (exclusive: its checkpoint starts there)
  // to bound i (inclusive); the last one has no upper bound. The bounds are
  // the rows' percentiles: each segment expects an equal share of them,
  // the last one the remainder.
  return SegmentsOf(tx.exec_params(
      std::string("INSERT INTO coexist.range_checkpoints (job, segment, pass, upper_key, "
                  "last_key, expected) SELECT $1, s - 1, $2, u[s], u[s - 1], "
                  "CASE WHEN s <= cardinality(u) THEN $4 / (cardinality(u) + 1) "
                  "ELSE $4 - cardinality(u) * ($4 / (cardinality(u) + 1)) END "
                  "FROM (SELECT $3::text[] AS u) b, generate_series(1, cardinality(u) + 1) s "
                  "ORDER BY s RETURNING ") +
          kColumns,
      job, pass, ArrayLiteral(uppers), matching_rows));
}

std::optional<RangeSegment> TryLockSegment(pqxx::transaction_base& tx, const std::string& job,
                                           int segment) {
  auto rows = tx.exec_params(std::string("SELECT ") + kColumns +
                                 " FROM coexist.range_checkpoints "
                                 "WHERE job = $1 AND segment = $2 FOR UPDATE SKIP LOCKED",
                             job, segment);
  if (rows.empty()) return std::nullopt;
  return SegmentOf(rows[0]);
}

void AdvanceSegment(pqxx::transaction_base& tx, const std::string& job, int segment,
                    const std::string& last_key, long long applied, long long exceptions,
                    long long run_id) {
  tx.exec_params0(
      "UPDATE coexist.range_checkpoints SET last_key = $3, applied = applied + $4, "
      "exceptions = exceptions + $5, run_id = $6, updated_at = now() "
      "WHERE job = $1 AND segment = $2",
      job, segment, last_key, applied, exceptions, run_id);
}

void FinishSegment(pqxx::transaction_base& tx, const std::string& job, int segment,
                   long long run_id) {
  tx.exec_params0(
      "UPDATE coexist.range_checkpoints SET finished = true, run_id = $3, updated_at = now() "
      "WHERE job = $1 AND segment = $2",
      job, segment, run_id);
}

}  // namespace coexist::db

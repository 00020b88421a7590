#include "schema/guard_rows.h"

#include <pqxx/pqxx>

#include "db/array_literal.h"

namespace coexist::db {

void ReplaceWindows(pqxx::transaction_base& tx, const std::string& job,
                    const std::vector<WindowRow>& rows) {
  tx.exec_params("DELETE FROM coexist.windows WHERE job = $1", job);
  for (const auto& w : rows) {
    tx.exec_params(
        "INSERT INTO coexist.windows (job, target, position, time_zone, weekdays, start_time,"
        " end_time, mode, between_runs) VALUES ($1, $2::regclass, $3, $4, $5::integer[],"
        " $6::time, $7::time, $8, $9)",
        job, w.target, w.position, w.time_zone, ArrayLiteral(w.weekdays), w.start_time, w.end_time,
        w.mode, w.between_runs);
  }
}

std::string ReplaceWindowsPlan(pqxx::transaction_base& tx, const std::string& job) {
  return "DELETE FROM coexist.windows WHERE job = " + tx.quote(job) +
         "; INSERT INTO coexist.windows ...  -- the policy's windows";
}

long long ReleaseReadOnlyWindows(pqxx::transaction_base& tx, const std::string& job) {
  return tx.exec_params("DELETE FROM coexist.windows WHERE job = $1 AND mode = 'read_only'", job)
      .affected_rows();
}

void ForgetTarget(pqxx::transaction_base& tx, const std::string& target, const std::string& job) {
  tx.exec_params("DELETE FROM coexist.targets WHERE target = $1::regclass", target);
  tx.exec_params("DELETE FROM coexist.windows WHERE target = $1::regclass OR job = $2", target,
                 job);
}

bool AnyTargetGuarded(pqxx::transaction_base& tx) {
  return tx
      .exec1(
          "SELECT to_regclass('coexist.targets') IS NOT NULL AND "
          "EXISTS (SELECT 1 FROM coexist.targets)")[0]
      .as<bool>();
}

std::vector<std::string> OtherGuardedTables(pqxx::transaction_base& tx,
                                            const std::vector<std::string>& tables) {
  std::vector<std::string> out;
  for (const auto& row : tx.exec_params(
           "SELECT format('%I.%I', n.nspname, c.relname) FROM coexist.targets t"
           " JOIN pg_class c ON c.oid = t.target JOIN pg_namespace n ON n.oid = c.relnamespace"
           " WHERE NOT format('%I.%I', n.nspname, c.relname) = ANY ($1::text[]) ORDER BY 1",
           ArrayLiteral(tables))) {
    out.push_back(row[0].as<std::string>());
  }
  return out;
}

void DeleteAllWindows(pqxx::transaction_base& tx) { tx.exec("DELETE FROM coexist.windows"); }

}  // namespace coexist::db

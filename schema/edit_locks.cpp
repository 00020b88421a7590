#include "schema/edit_locks.h"

#include <pqxx/pqxx>

#include "db/array_literal.h"
#include "schema/events.h"

namespace coexist::db {
namespace {

constexpr const char* kSelectColumns =
    "target::text, record_key, owner,"
    " to_char(acquired_at, 'YYYY-MM-DD HH24:MI:SSOF'), to_char(expires_at, 'YYYY-MM-DD "
    "HH24:MI:SSOF'),"
    " extract(epoch FROM clock_timestamp() - acquired_at)::float8, expires_at <= clock_timestamp()";

EditLockRow RowOf(const pqxx::row& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
          row[3].as<std::string>(), row[4].as<std::string>(), row[5].as<double>(),
          row[6].as<bool>()};
}

}  // namespace

std::vector<EditLockRow> ReadEditLocks(pqxx::transaction_base& tx, bool include_expired) {
  std::vector<EditLockRow> out;
  for (const auto& row : tx.exec_params(std::string("SELECT ") + kSelectColumns +
                                            " FROM coexist.edit_locks"
                                            " WHERE $1 OR expires_at > clock_timestamp()"
                                            " ORDER BY acquired_at, target::text, record_key",
                                        include_expired)) {
    out.push_back(RowOf(row));
  }
  return out;
}

std::vector<EditLockRow> ReleaseEditLocks(pqxx::transaction_base& tx,
                                          const std::optional<std::string>& target,
                                          const std::optional<std::string>& record_key,
                                          const std::optional<std::string>& owner,
                                          std::optional<std::chrono::milliseconds> older_than,
                                          const std::string& actor) {
  // One audited release for every caller: the SQL function (0016). NULL
  // parameters select nothing by themselves.
  auto result = tx.exec_params(
      std::string("SELECT ") + kSelectColumns +
          " FROM coexist.admin_release_edit_locks($1::regclass, $2::text, $3,"
          " $4::bigint * interval '1 millisecond', $5) ORDER BY acquired_at",
      target, record_key, owner,
      older_than ? std::optional<long long>(older_than->count()) : std::nullopt, actor);
  std::vector<EditLockRow> out;
  for (const auto& row : result) out.push_back(RowOf(row));
  return out;
}

long long DeleteExpiredEditLocks(pqxx::transaction_base& tx, const std::string& actor) {
  auto result = tx.exec_params(
      "WITH gone AS ("
      "  DELETE FROM coexist.edit_locks WHERE expires_at <= clock_timestamp() RETURNING *),"
      " audit AS (" +
          InsertEventsSql("kind, target, record_key, actor, subject, details") + "  SELECT " +
          SqlLiteral(EventKind::kEditLockExpired) +
          ", target, record_key, $1, owner,"
          "         jsonb_build_object('token', token, 'expires_at', expires_at)"
          "    FROM gone)"
          " SELECT count(*) FROM gone",
      actor);
  return result[0][0].as<long long>();
}

std::vector<LiveEditLock> ReadLiveEditLocks(pqxx::transaction_base& tx, const std::string& target,
                                            const std::vector<std::string>& keys) {
  std::vector<LiveEditLock> out;
  if (keys.empty()) return out;
  for (const auto& row : tx.exec_prepared("find_edit_locks", target, ArrayLiteral(keys))) {
    out.push_back({row[0].as<std::string>(), row[1].as<std::string>(),
                   std::chrono::milliseconds(row[2].as<long long>())});
  }
  return out;
}

void PrepareBatchStatements(pqxx::connection_base& conn) {
  conn.prepare("insert_takeovers", R"sql(
    INSERT INTO coexist.takeovers (run_id, item_id, target, record_key)
    SELECT $1, i, $4::regclass, k FROM unnest($2::bigint[], $3::text[]) AS u(i, k))sql");
  conn.prepare("delete_takeovers",
               "DELETE FROM coexist.takeovers WHERE item_id = ANY ($1::bigint[])");
  conn.prepare("find_edit_locks", R"sql(
    SELECT record_key, owner,
           (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
      FROM coexist.edit_locks
     WHERE target = $1::regclass AND record_key = ANY ($2::text[])
       AND expires_at > clock_timestamp())sql");
}

void InsertTakeovers(pqxx::transaction_base& tx, long long run_id,
                     const std::vector<long long>& item_ids, const std::vector<std::string>& keys,
                     const std::string& target) {
  tx.exec_prepared("insert_takeovers", run_id, ArrayLiteral(item_ids), ArrayLiteral(keys), target);
}

void DeleteTakeovers(pqxx::transaction_base& tx, const std::vector<long long>& item_ids) {
  tx.exec_prepared("delete_takeovers", ArrayLiteral(item_ids));
}

bool HasTakeovers(pqxx::transaction_base& tx, const std::string& target) {
  return tx
      .exec_params1("SELECT count(*) > 0 FROM coexist.takeovers WHERE target = $1::regclass",
                    target)[0]
      .as<bool>();
}

}  // namespace coexist::db

// Every SQL statement of the edit-lock admin commands (locks list, release,
// sweep). The application-side API lives in schema/migrations/0002 and 0003.

#include "admin/edit_locks.h"

#include <pwd.h>
#include <unistd.h>

#include <pqxx/pqxx>

namespace coexist::admin {
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

std::vector<EditLockRow> ListEditLocks(pqxx::connection_base& conn, bool include_expired) {
  pqxx::read_transaction tx(conn);
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

std::vector<EditLockRow> ReleaseEditLocks(pqxx::connection_base& conn,
                                          const ReleaseSelector& selector,
                                          const std::string& actor) {
  pqxx::work tx(conn);
  // One audited release for every caller: the SQL function (0016). NULL
  // parameters select nothing by themselves: exactly one selector is set.
  auto result = tx.exec_params(
      std::string("SELECT ") + kSelectColumns +
          " FROM coexist.admin_release_edit_locks($1::regclass, $2::text, $3,"
          " $4::bigint * interval '1 millisecond', $5) ORDER BY acquired_at",
      selector.target, selector.record_key, selector.owner,
      selector.older_than ? std::optional<long long>(selector.older_than->count()) : std::nullopt,
      actor);
  tx.commit();
  std::vector<EditLockRow> out;
  for (const auto& row : result) out.push_back(RowOf(row));
  return out;
}

long long SweepExpiredEditLocks(pqxx::connection_base& conn, const std::string& actor) {
  pqxx::work tx(conn);
  auto result = tx.exec_params(
      "WITH gone AS ("
      "  DELETE FROM coexist.edit_locks WHERE expires_at <= clock_timestamp() RETURNING *),"
      " audit AS ("
      "  INSERT INTO coexist.events (kind, target, record_key, actor, subject, details)"
      "  SELECT 'edit_lock_expired', target, record_key, $1, owner,"
      "         jsonb_build_object('token', token, 'expires_at', expires_at)"
      "    FROM gone)"
      " SELECT count(*) FROM gone",
      actor);
  tx.commit();
  return result[0][0].as<long long>();
}

std::string CurrentActor() {
  const passwd* pw = getpwuid(geteuid());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string("admin:") + (pw != nullptr ? pw->pw_name : std::to_string(geteuid())) + "@" +
         host;
}

}  // namespace coexist::admin

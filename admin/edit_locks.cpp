// The edit-lock admin commands (locks list, release, sweep): their
// statements are the schema's (schema/edit_locks.h).

#include "admin/edit_locks.h"

#include <pwd.h>
#include <unistd.h>

#include <pqxx/pqxx>

namespace coexist::admin {

std::vector<EditLockRow> ListEditLocks(pqxx::connection_base& conn, bool include_expired) {
  pqxx::read_transaction tx(conn);
  return db::ReadEditLocks(tx, include_expired);
}

std::vector<EditLockRow> ReleaseEditLocks(pqxx::connection_base& conn,
                                          const ReleaseSelector& selector,
                                          const std::string& actor) {
  pqxx::work tx(conn);
  auto out = db::ReleaseEditLocks(tx, selector.target, selector.record_key, selector.owner,
                                  selector.older_than, actor);
  tx.commit();
  return out;
}

long long SweepExpiredEditLocks(pqxx::connection_base& conn, const std::string& actor) {
  pqxx::work tx(conn);
  long long swept = db::DeleteExpiredEditLocks(tx, actor);
  tx.commit();
  return swept;
}

std::string CurrentActor() {
  const passwd* pw = getpwuid(geteuid());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string("admin:") + (pw != nullptr ? pw->pw_name : std::to_string(geteuid())) + "@" +
         host;
}

}  // namespace coexist::admin

#include "db/failure.h"

#include <pqxx/except>

#include "db/sqlstate.h"

namespace coexist::db {

std::string SqlStateOf(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) return "42501";
  if (dynamic_cast<const pqxx::too_many_connections*>(&e) != nullptr) return "53300";
  return "";
}

StatementFault JudgeStatement(const std::string& sqlstate) {
  if (sqlstate == sqlstate::kQueryCanceled || sqlstate == sqlstate::kLockNotAvailable) {
    return StatementFault::kTimeout;
  }
  std::string cls = sqlstate.substr(0, 2);
  if (cls == "42" || cls == "3D" || cls == "3F" || cls == "28" || cls == "0L" || cls == "0P") {
    return StatementFault::kDeployment;
  }
  if (cls == "53" || cls == "57" || cls == "58" || cls == "XX") return StatementFault::kServer;
  return StatementFault::kItem;
}

}  // namespace coexist::db

#include "db/backend_priority.h"

#include <pqxx/pqxx>

namespace coexist::db {

Prioritize ReadPrioritize(pqxx::transaction_base& tx) {
  auto row = tx.exec1(
      "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'prioritize'), "
      "(SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
      "WHERE e.extname = 'prioritize')");
  Prioritize state;
  state.available = row[0].as<bool>();
  if (!row[1].is_null()) state.schema = row[1].as<std::string>();
  return state;
}

std::string PrioritizeFix(const Prioritize& state) {
  std::string create = "run CREATE EXTENSION prioritize; as a superuser in the job's database";
  if (state.available) return create;
  return "install the Debian package postgresql-15-prioritize on the database server, then " +
         create;
}

Prioritize CreatePrioritizeIfAvailable(pqxx::connection_base& conn) {
  pqxx::work tx(conn);
  auto state = ReadPrioritize(tx);
  if (state.available && !state.schema) {
    tx.exec("SET LOCAL client_min_messages = warning");
    tx.exec("CREATE EXTENSION IF NOT EXISTS prioritize");
    state = ReadPrioritize(tx);
  }
  tx.commit();
  return state;
}

int LowerOwnBackendPriority(pqxx::connection_base& conn, const std::string& schema, int nice) {
  pqxx::work tx(conn);
  // The extension says NOTICE on every change and WARNING when the kernel
  // refuses one; the caller reports the outcome itself.
  tx.exec("SET LOCAL client_min_messages = error");
  std::string get = tx.quote_name(schema) + ".get_backend_priority(pg_backend_pid())";
  std::string set = tx.quote_name(schema) + ".set_backend_priority(pg_backend_pid(), $1)";
  auto row = tx.exec_params1("SELECT CASE WHEN " + get + " >= $1 THEN " + get + " ELSE CASE WHEN " +
                                 set + " THEN $1 ELSE " + get + " END END",
                             nice);
  tx.commit();
  return row[0].as<int>();
}

}  // namespace coexist::db

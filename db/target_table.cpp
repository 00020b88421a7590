#include "db/target_table.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "common/error.h"
#include "db/migrations.h"

namespace coexist::db {
namespace {

std::string QuotedName(pqxx::transaction_base& tx, const config::TargetTable& target) {
  return tx.quote_name(target.schema) + "." + tx.quote_name(target.table);
}

}  // namespace

bool TargetExists(pqxx::transaction_base& tx, const config::TargetTable& target) {
  return tx.exec_params1("SELECT to_regclass($1) IS NOT NULL", QuotedName(tx, target))[0]
      .as<bool>();
}

std::vector<std::string> MissingTargetColumns(pqxx::transaction_base& tx,
                                              const config::TargetTable& target) {
  std::vector<std::pair<const char*, std::string>> wanted = {
      {"key_column", target.key_column}, {"version_column", target.version_column}};
  if (target.owner_column) wanted.emplace_back("owner_column", *target.owner_column);
  std::vector<std::string> missing;
  for (const auto& [key, column] : wanted) {
    bool present =
        tx.exec_params1(
              "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1)"
              " AND attname = $2 AND attnum > 0 AND NOT attisdropped)",
              QuotedName(tx, target), column)[0]
            .as<bool>();
    if (!present) missing.emplace_back(key);
  }
  return missing;
}

std::string KeyTypeOf(pqxx::transaction_base& tx, const config::TargetTable& target) {
  auto rows = tx.exec_params(
      "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = to_regclass($1)"
      " AND attname = $2 AND attnum > 0 AND NOT attisdropped",
      QuotedName(tx, target), target.key_column);
  if (rows.empty()) {
    throw ConfigurationError("table " + target.Name() + " has no key column " + target.key_column,
                             "set target.key_column to the table's key, or create the table.");
  }
  return rows[0][0].as<std::string>();
}

VersionTrigger VersionTriggerOf(pqxx::transaction_base& tx, const config::TargetTable& target) {
  std::string table = QuotedName(tx, target);
  // to_regclass, not a cast: a missing table is kMissing, not an error.
  constexpr const char* kOnTarget =
      "SELECT count(*) > 0 FROM pg_trigger"
      " WHERE tgrelid = to_regclass($1) AND tgname = 'coexist_bump_version'";
  if (!tx.exec_params1(kOnTarget, table)[0].as<bool>()) return VersionTrigger::kMissing;
  // Before 0009 the function's name cannot be asked for.
  if (!tx.exec1("SELECT to_regprocedure('coexist.trigger_function_name(text,regclass)') IS NOT "
                "NULL")[0]
           .as<bool>()) {
    return VersionTrigger::kOutdated;
  }
  bool current = tx.exec_params1(std::string(kOnTarget) +
                                     " AND tgfoid = to_regproc(coexist.trigger_function_name("
                                     "'bump_version', $1::regclass))",
                                 table)[0]
                     .as<bool>();
  return current ? VersionTrigger::kCurrent : VersionTrigger::kOutdated;
}

SchemaInstall InstallSchema(pqxx::connection_base& conn, const config::TargetTable& target) {
  SchemaInstall result;
  result.migrations_applied = InstallMigrations(conn);
  VersionTrigger trigger;
  {
    pqxx::read_transaction tx(conn);
    result.target_exists = TargetExists(tx, target);
    trigger = result.target_exists ? VersionTriggerOf(tx, target) : VersionTrigger::kMissing;
  }
  if (result.target_exists && trigger != VersionTrigger::kCurrent) {
    InstallVersionTrigger(conn, target);
  }
  return result;
}

void InstallVersionTrigger(pqxx::connection_base& conn, const config::TargetTable& target) {
  pqxx::work tx(conn);
  std::string table = tx.quote_name(target.schema) + "." + tx.quote_name(target.table);
  tx.exec_params("SELECT coexist.install_version_trigger($1::regclass, $2)", table,
                 target.version_column);
  tx.commit();
  spdlog::info("version trigger installed target={} column={}", target.Name(),
               target.version_column);
}

void SeedDemoTable(pqxx::connection_base& conn, long long records, long long initial_stock) {
  InstallMigrations(conn);
  {
    pqxx::work tx(conn);
    tx.exec(R"sql(
      CREATE TABLE IF NOT EXISTS public.products (
        id         bigint      PRIMARY KEY,
        stock      bigint      NOT NULL,
        version    bigint      NOT NULL DEFAULT 0,
        owner      text        NOT NULL DEFAULT 'online' CHECK (owner IN ('online', 'batch')),
        note       text,
        updated_at timestamptz NOT NULL DEFAULT now()
      ))sql");
    // The batch's own counter in simulations (coexist simulate): kept apart
    // from stock, so the online lost-update check and the batch's ledger
    // check each see only their own writes.
    tx.exec(
        "ALTER TABLE public.products ADD COLUMN IF NOT EXISTS settled bigint NOT NULL DEFAULT 0");
    tx.exec("TRUNCATE public.products");
    tx.exec_params(
        "INSERT INTO public.products (id, stock) SELECT g, $2 FROM generate_series(1, $1) g",
        records, initial_stock);
    tx.commit();
  }
  InstallVersionTrigger(conn, config::TargetTable{});
  pqxx::nontransaction(conn).exec("ANALYZE public.products");
  spdlog::info("demo table seeded target=public.products records={}", records);
}

}  // namespace coexist::db

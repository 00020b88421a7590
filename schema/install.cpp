#include "schema/install.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "schema/migrations.h"

namespace coexist::db {

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

void GrantOnlineUse(pqxx::transaction_base& tx, const std::string& role) {
  std::string name = tx.quote_name(role);
  tx.exec("GRANT USAGE ON SCHEMA coexist TO " + name +
          "; GRANT SELECT, INSERT, UPDATE, DELETE ON coexist.edit_locks TO " + name +
          "; GRANT SELECT ON coexist.windows, coexist.targets TO " + name);
}

}  // namespace coexist::db

#include "schema/status.h"

#include <pqxx/pqxx>

#include "schema/queue_store_ops.h"

namespace coexist::db {

Status ReadStatus(pqxx::connection_base& conn, const config::TargetTable& target) {
  Status status;
  status.latest_version = LatestVersion();
  status.migrations = AppliedMigrations(conn);
  status.installed_version = status.migrations.empty() ? 0 : status.migrations.back().version;
  status.target = target.Name();

  pqxx::read_transaction tx(conn);
  status.server_version = tx.exec("SHOW server_version")[0][0].as<std::string>();
  if (TargetExists(tx, target)) {
    std::string table = tx.quote_name(target.schema) + "." + tx.quote_name(target.table);
    status.target_rows = tx.exec("SELECT count(*) FROM " + table)[0][0].as<long long>();
    status.version_trigger = VersionTriggerOf(tx, target) != VersionTrigger::kMissing;
  }
  if (status.installed_version == 0) return status;
  auto totals = ReadQueueTotals(tx);
  status.queue_by_state = std::move(totals.by_state);
  auto locks = tx.exec(
      "SELECT count(*) FILTER (WHERE expires_at > now()), count(*) FILTER (WHERE expires_at <= "
      "now()) FROM coexist.edit_locks");
  status.live_edit_locks = locks[0][0].as<long long>();
  status.expired_edit_locks = locks[0][1].as<long long>();
  status.runs = totals.runs;
  return status;
}

}  // namespace coexist::db

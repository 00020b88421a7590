#include "batch/install.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <set>

#include "batch/check.h"
#include "batch/guard.h"
#include "common/error.h"
#include "config_core/duration.h"
#include "db/array_literal.h"
#include "schema/edit_locks.h"
#include "schema/guard_rows.h"
#include "schema/migrations.h"
#include "schema/queue_store_ops.h"

namespace coexist::batch {
namespace {

std::vector<config::TargetTable> TablesOf(const config::Config& config) {
  std::vector<config::TargetTable> tables = {config.target};
  tables.insert(tables.end(), config.targets.begin(), config.targets.end());
  return tables;
}

// "SHARE ROW EXCLUSIVE on public.film and its 7 partitions, at most 2s at
// a time, 4 attempts".
std::string LockText(const std::string& mode, const db::TargetFacts& facts,
                     const db::LockAttempts& how) {
  std::string on = mode + " on " + facts.qualified;
  if (facts.partitions > 0) {
    on += " and its " + std::to_string(facts.partitions) + " partition" +
          (facts.partitions == 1 ? "" : "s");
  }
  return on + ", waiting at most " + config::FormatDuration(how.lock_timeout) + " at a time, " +
         std::to_string(how.attempts) + " attempts";
}

// What the installer itself may do, for the statements it is about to run:
// a problem (78) before anything runs rather than 42501 half-way.
struct InstallerRights {
  bool create_in_database = false;  // CREATE SCHEMA coexist
  std::string role;
};

InstallerRights ReadInstallerRights(pqxx::transaction_base& tx) {
  auto row = tx.exec1("SELECT has_database_privilege(current_database(), 'CREATE'), current_user");
  return {row[0].as<bool>(), row[1].as<std::string>()};
}

struct TableRights {
  bool owner = false;    // ALTER TABLE
  bool trigger = false;  // CREATE TRIGGER
};

TableRights ReadTableRights(pqxx::transaction_base& tx, const std::string& qualified) {
  auto row = tx.exec_params1(
      "SELECT pg_has_role(c.relowner, 'USAGE'), has_table_privilege(c.oid, 'TRIGGER') "
      "FROM pg_class c WHERE c.oid = $1::regclass",
      qualified);
  return {row[0].as<bool>(), row[1].as<bool>()};
}

// Whether the target's guard trigger calls this schema's current function
// (then installing it again replaces at most the function: no table lock).
bool GuardCurrent(pqxx::transaction_base& tx, const std::string& qualified) {
  return tx
      .exec_params1(
          "SELECT count(*) > 0 FROM pg_trigger t WHERE t.tgrelid = $1::regclass"
          " AND t.tgname = 'coexist_guard' AND t.tgqual IS NOT NULL"
          " AND t.tgfoid = to_regproc(coexist.trigger_function_name('guard', $1::regclass))",
          qualified)[0]
      .as<bool>();
}

// The columns `db uninstall --drop-*-column` drops, quoted, when there.
std::vector<std::string> ColumnsToDrop(const config::TargetTable& t, const db::TargetFacts& facts,
                                       const UninstallOptions& options) {
  std::vector<std::string> columns;
  if (options.drop_version_column && !facts.version_type.empty()) {
    columns.push_back(facts.version_sql);
  }
  if (options.drop_owner_column && t.owner_column && !facts.owner_type.empty()) {
    columns.push_back(facts.owner_sql);
  }
  return columns;
}

std::string Quoted(pqxx::transaction_base& tx, const std::string& text) { return tx.quote(text); }

// 1. The configuration against the catalog: the target's shape and columns
// (a missing version column is fine when the install adds it).
CheckedConfig CheckForInstall(pqxx::connection_base& conn, const config::Config& config,
                              const InstallOptions& options) {
  return CheckConfig(conn, config,
                     {.operation = CheckScope::Operation::kSkip,
                      .privileges = false,
                      .payloads = false,
                      .version_column_to_be_added = options.add_version_column,
                      .owner_column_to_be_added = options.add_owner_column});
}

// 2. and 3., for a configuration the check accepted.
InstallPlan PlanChecked(pqxx::connection_base& conn, const CheckedConfig& checked,
                        const InstallOptions& options) {
  const config::Config& config = checked.config();
  InstallPlan plan;
  std::vector<std::string> missing_rights;
  pqxx::read_transaction tx(conn);
  auto installer = ReadInstallerRights(tx);
  bool schema = db::SchemaInstalled(tx);
  // 2. The schema's migrations this database lacks.
  std::set<int> applied;
  bool targets_installed = false;
  if (schema) {
    applied = db::AppliedVersions(tx);
    targets_installed = db::AnyTargetGuarded(tx);
  } else if (!installer.create_in_database) {
    missing_rights.push_back(
        "CREATE on the database (for schema coexist): GRANT CREATE ON "
        "DATABASE " +
        tx.quote_name(conn.dbname()) + " TO " + tx.quote_name(installer.role) + ";");
  }
  std::vector<std::string> missing;
  for (const auto& migration : db::AllMigrations()) {
    if (!applied.contains(migration.version)) missing.push_back(migration.name);
  }
  if (!missing.empty()) {
    plan.steps.push_back(
        {"-- the schema's migration" + std::string(missing.size() == 1 ? " " : "s ") +
             missing.front() + (missing.size() == 1 ? "" : " .. " + missing.back()) + " (" +
             std::to_string(missing.size()) +
             ", each in a transaction of its own; "
             "schema/migrations/)",
         targets_installed ? "objects of schema coexist; an installed target's trigger is "
                             "re-created only when its migration says so"
                           : "objects of schema coexist only"});
  }
  // 3. Per table: the version column, the version trigger, the guard.
  for (const auto& t : TablesOf(config)) {
    auto facts = db::ReadTargetFacts(tx, t);
    auto rights = ReadTableRights(tx, facts.qualified);
    if (options.add_version_column && facts.version_type.empty()) {
      if (!rights.owner) {
        missing_rights.push_back("ownership of " + facts.qualified +
                                 " (ALTER TABLE adds the version column): run db install as "
                                 "the table's owner");
      }
      plan.steps.push_back({db::AddVersionColumnSql(facts.qualified, facts.version_sql),
                            LockText("ACCESS EXCLUSIVE", facts, options.locks)});
    }
    if (options.add_owner_column && t.owner_column && facts.owner_type.empty()) {
      if (!rights.owner) {
        missing_rights.push_back("ownership of " + facts.qualified +
                                 " (ALTER TABLE adds the owner column): run db install as the "
                                 "table's owner");
      }
      plan.steps.push_back({db::AddOwnerColumnSql(facts.qualified, tx.quote_name(*t.owner_column)),
                            LockText("ACCESS EXCLUSIVE", facts, options.locks)});
    }
    auto version = schema ? db::VersionTriggerOf(tx, t) : db::VersionTrigger::kMissing;
    // trigger_function_name came with migration 9, the WHEN clause with 25.
    bool guard = applied.contains(25) && GuardCurrent(tx, facts.qualified);
    if ((version != db::VersionTrigger::kCurrent || !guard) && !rights.trigger) {
      missing_rights.push_back("TRIGGER on " + facts.qualified + ": GRANT TRIGGER ON " +
                               facts.qualified + " TO " + tx.quote_name(installer.role) +
                               "; (or run db install as the table's owner)");
    }
    std::string table = Quoted(tx, facts.qualified);
    plan.steps.push_back(
        {"SELECT coexist.install_version_trigger(" + table + ", " + Quoted(tx, t.version_column) +
             ")  -- " +
             (version == db::VersionTrigger::kCurrent
                  ? std::string("already current: nothing")
                  : "CREATE TRIGGER coexist_bump_version BEFORE UPDATE ON " + facts.qualified),
         version == db::VersionTrigger::kCurrent
             ? "none"
             : LockText("SHARE ROW EXCLUSIVE", facts, options.locks)});
    plan.steps.push_back(
        {"SELECT coexist.install_guard_trigger(" + table + ", " + Quoted(tx, t.key_column) +
             (t.owner_column ? ", " + Quoted(tx, *t.owner_column) : std::string()) + ")  -- " +
             (guard ? std::string("its function replaced only if changed")
                    : "CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON " +
                          facts.qualified),
         guard ? "none on " + facts.qualified + " (the function's row in pg_proc)"
               : LockText("SHARE ROW EXCLUSIVE", facts, options.locks)});
  }
  plan.steps.push_back({db::ReplaceWindowsPlan(tx, config.batch.job), "rows of coexist.windows"});
  if (!missing_rights.empty()) {
    std::string list;
    for (const auto& right : missing_rights) list += "\n  " + right;
    throw ConfigurationError("role " + installer.role + " lacks what db install needs:" + list,
                             "nothing was changed. Grant it, or run db install as a role that has "
                             "it (docs/operations.md, \"Database roles\").");
  }
  return plan;
}

}  // namespace

InstallPlan PlanInstall(pqxx::connection_base& conn, const config::Config& config,
                        const InstallOptions& options) {
  return PlanChecked(conn, CheckForInstall(conn, config, options), options);
}

InstallPlan Install(pqxx::connection_base& conn, const config::Config& config,
                    const InstallOptions& options) {
  CheckedConfig checked = CheckForInstall(conn, config, options);
  auto plan = PlanChecked(conn, checked, options);
  if (options.add_version_column) {
    for (const auto& t : TablesOf(config)) {
      if (db::AddVersionColumn(conn, t, options.locks)) {
        plan.changed.push_back("column " + t.version_column + " added to " + t.Name());
      }
    }
  }
  if (options.add_owner_column) {
    for (const auto& t : TablesOf(config)) {
      if (db::AddOwnerColumn(conn, t, options.locks)) {
        plan.changed.push_back("column " + *t.owner_column + " added to " + t.Name());
      }
    }
  }
  db::InstallMigrations(conn);
  InstallGuard(conn, checked, options.locks);
  return plan;
}

InstallPlan Uninstall(pqxx::connection_base& conn, const config::Config& config,
                      const UninstallOptions& options) {
  InstallPlan plan;
  std::vector<std::pair<config::TargetTable, db::TargetFacts>> tables;
  {
    pqxx::read_transaction tx(conn);
    if (!db::SchemaInstalled(tx)) return plan;  // nothing of coexist's here
    // Checks first, all of them, before anything is dropped.
    if (auto live = db::FindLiveRun(tx, options.schema ? "" : config.batch.job)) {
      throw Error(ExitCode::kJobBusy,
                  "run " + std::to_string(live->run_id) + " of job " + live->job +
                      " is working: nothing was removed",
                  "let it finish, or stop it (coexist ctl --job " + live->job +
                      " stop), then uninstall again.");
    }
    std::vector<std::string> ours;
    for (const auto& t : TablesOf(config)) {
      auto facts = db::ReadTargetFacts(tx, t);
      if (!facts.exists) continue;
      ours.push_back(facts.qualified);
      if (db::HasTakeovers(tx, facts.qualified)) {
        throw ConfigurationError(
            "rows of " + facts.qualified + " are still taken over by a run that ended abnormally",
            "hand them back first: coexist --config FILE runs sweep; then uninstall again.");
      }
      tables.emplace_back(t, std::move(facts));
    }
    if (options.schema) {
      std::string others;
      for (const auto& table : db::OtherGuardedTables(tx, ours)) {
        others += (others.empty() ? "" : ", ") + table;
      }
      if (!others.empty()) {
        throw ConfigurationError(
            "other tables still have coexist's triggers: " + others + "; nothing was removed",
            "uninstall their jobs first (coexist --config THEIR.yaml db uninstall), then remove "
            "the schema.");
      }
      auto totals = db::ReadQueueTotals(tx);
      long long waiting = totals.by_state["queued"] + totals.by_state["deferred"];
      if (waiting > 0 && !options.discard_queue) {
        throw UsageError(std::to_string(waiting) +
                             " items still wait in the queue; --schema would drop them: nothing "
                             "was removed",
                         "run them first (coexist batch run), or pass --discard-queue to drop "
                         "them with the schema.");
      }
    }
  }
  for (const auto& [t, facts] : tables) {
    PlannedStep step{"DROP TRIGGER IF EXISTS coexist_guard ON " + facts.qualified +
                         "; DROP TRIGGER IF EXISTS coexist_bump_version ON " + facts.qualified +
                         "; DROP FUNCTION their functions",
                     LockText("ACCESS EXCLUSIVE", facts, options.locks)};
    plan.steps.push_back(step);
    for (const auto& column : ColumnsToDrop(t, facts, options)) {
      plan.steps.push_back({"ALTER TABLE " + facts.qualified + " DROP COLUMN " + column,
                            LockText("ACCESS EXCLUSIVE", facts, options.locks)});
    }
  }
  if (options.schema) plan.steps.push_back({"DROP SCHEMA coexist CASCADE", "schema coexist"});
  if (options.plan_only) return plan;
  for (const auto& [t, facts] : tables) {
    db::WithLockAttempts(
        conn, "remove coexist's triggers from " + facts.qualified, facts.qualified, options.locks,
        [&](pqxx::transaction_base& tx) {
          // DROP TRIGGER on a partitioned table locks the partitions' clones
          // before the parent, the reverse of an UPDATE's order (parent, then
          // the partition it plans for): an online write between the two
          // deadlocked with it. Locking the table first (parent, then its
          // partitions) keeps the application's order.
          tx.exec("LOCK TABLE " + facts.qualified + " IN ACCESS EXCLUSIVE MODE");
          auto names = tx.exec_params1(
              "SELECT coexist.trigger_function_name('guard', $1::regclass),"
              " coexist.trigger_function_name('bump_version', $1::regclass)",
              facts.qualified);
          tx.exec("DROP TRIGGER IF EXISTS coexist_guard ON " + facts.qualified);
          tx.exec("DROP TRIGGER IF EXISTS coexist_bump_version ON " + facts.qualified);
          for (const auto& name : names) {
            if (name.is_null()) continue;
            // Only a function no trigger calls any more goes.
            bool unused = !tx.exec_params(
                                 "SELECT 1 FROM pg_proc p WHERE p.oid = to_regproc($1)"
                                 " AND NOT EXISTS (SELECT 1 FROM pg_trigger g"
                                 " WHERE g.tgfoid = p.oid)",
                                 name.as<std::string>())
                               .empty();
            if (unused) tx.exec("DROP FUNCTION " + name.as<std::string>() + "()");
          }
          db::ForgetTarget(tx, facts.qualified, config.batch.job);
        });
    plan.changed.push_back("triggers removed from " + facts.qualified);
    for (const auto& column : ColumnsToDrop(t, facts, options)) {
      db::WithLockAttempts(
          conn, "drop column " + column + " of " + facts.qualified, facts.qualified, options.locks,
          [&](pqxx::transaction_base& tx) {
            tx.exec("ALTER TABLE " + facts.qualified + " DROP COLUMN IF EXISTS " + column);
          });
      plan.changed.push_back("column " + column + " dropped from " + facts.qualified);
    }
  }
  if (options.schema) {
    pqxx::work tx(conn);
    tx.exec("DROP SCHEMA coexist CASCADE");
    tx.commit();
    plan.changed.push_back("schema coexist dropped");
  }
  return plan;
}

}  // namespace coexist::batch

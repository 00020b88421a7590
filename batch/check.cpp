#include "batch/check.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "batch/operation.h"
#include "common/log.h"
#include "db/backend_priority.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "policies/policy.h"
#include "schema/queue_store_ops.h"

namespace coexist::batch {
namespace {

// Waiting items whose payloads the params check looks at: enough to see a
// field that no item has, cheap on a queue of millions.
constexpr int kPayloadSample = 1000;

// What pg_class.relkind names, for "X is a view, not a table".
std::string KindName(char kind) {
  switch (kind) {
    case 'v':
      return "a view";
    case 'm':
      return "a materialized view";
    case 'f':
      return "a foreign table";
    case 'S':
      return "a sequence";
    case 'i':
    case 'I':
      return "an index";
    default:
      return std::string("a relation of kind '") + kind + "'";
  }
}

class Checker {
 public:
  // `t` is the job's target (`prefix` "target") or one of `targets:`
  // ("targets[0]"), located by `at`.
  Checker(const config::Config& config, const policies::Policy& policy, CheckReport& report,
          const config::TargetTable& t, const config::Config::TargetMarks& at, std::string prefix)
      : config_(config),
        policy_(policy),
        report_(report),
        t_(t),
        at_(at),
        prefix_(std::move(prefix)),
        primary_(&t == &config.target) {}

  // The table, its columns and the role's rights; false when the table is
  // missing or no table, so that nothing else about it is worth saying.
  bool Target(const db::TargetFacts& facts, bool privileges, const CheckScope& scope) {
    version_to_be_added_ = scope.version_column_to_be_added;
    owner_to_be_added_ = scope.owner_column_to_be_added;
    const auto& t = t_;
    const auto& at = at_;
    if (!facts.exists) {
      Problem(at.table, Key("table"), "table " + t.Name() + " does not exist",
              "create it, or name an existing table (schema.table).");
      return false;
    }
    if (facts.kind != 'r' && facts.kind != 'p') {
      Problem(at.table, Key("table"),
              facts.qualified + " is " + KindName(facts.kind) + ", not a table",
              "coexist installs triggers on the target and locks its rows; name the table "
              "itself (a view's base table).");
      return false;
    }
    Key(facts);
    Version(facts);
    if (t.owner_column && facts.owner_type.empty() && !owner_to_be_added_) {
      Problem(at.owner_column, Key("owner_column"), Lacks(facts, *t.owner_column),
              "name a column of the table.");
    }
    if (primary_ && policy_.TakesOver() && !t.owner_column) {
      Problem(config_.policy.name_at, Key("owner_column"),
              std::string(policy_.Name()) + " needs an owner column",
              "set target.owner_column to a text column holding online/batch.");
    }
    if (privileges) Privileges(facts);
    for (const auto& trigger : facts.user_triggers) {
      report_.warnings.push_back(
          prefix_ + " " + facts.qualified + " has trigger " + trigger +
          ", which is not coexist's: it fires on the batch's updates too; make sure it neither "
          "writes column " +
          t.version_column + " nor waits on what online users lock, then list it in " + prefix_ +
          ".known_triggers to silence this");
    }
    return true;
  }

  // The payload fields the operation binds (operation.params), against a
  // sample of the job's waiting items: a field none of them has binds NULL
  // for every item (a typo such as `dlta` for `delta`), which fails or,
  // worse, applies NULL everywhere; a problem before anything runs. A field
  // some lack: a warning.
  void PayloadFields(pqxx::connection_base& conn, CheckScope::Operation scope) {
    const auto& op = config_.operation;
    if (scope == CheckScope::Operation::kSkip || op.params.empty()) return;
    std::optional<db::PayloadFields> seen;
    {
      pqxx::read_transaction tx(conn);
      seen = db::ReadPayloadFields(tx, config_.batch.job, op.params, kPayloadSample);
    }
    if (!seen || seen->looked_at == 0) return;
    std::string present;
    for (const auto& field : seen->present) present += (present.empty() ? "" : ", ") + field;
    std::string items = std::to_string(seen->looked_at) + " waiting item" +
                        (seen->looked_at == 1 ? "" : "s") + " of job " + config_.batch.job;
    for (size_t i = 0; i < op.params.size(); ++i) {
      const auto& field = op.params[i];
      auto having = seen->having[i];
      std::string key = "operation.params[" + std::to_string(i) + "]";
      if (having == 0) {
        Problem(i < op.params_at.size() ? op.params_at[i] : config::Mark{}, key,
                "payload field '" + field + "' is in none of the " + items +
                    ": every item would bind NULL for it",
                present.empty() ? "their payloads have no fields: enqueue items whose payload "
                                  "carries '" +
                                      field + "', or remove it from params."
                                : "their payloads have: " + present +
                                      ". Name one of those, or remove it from params.");
      } else if (having < seen->looked_at) {
        report_.warnings.push_back(std::to_string(seen->looked_at - having) + " of the " + items +
                                   " have no payload field '" + field + "' (" + key +
                                   "): NULL is bound for them");
      }
    }
  }

  void OperationSql(pqxx::connection_base& conn, CheckScope::Operation scope) {
    const auto& op = config_.operation;
    bool configured = op.Configured();
    if (scope == CheckScope::Operation::kSkip) return;
    if (!configured) {
      if (scope == CheckScope::Operation::kRequired) {
        Problem(
            {}, "operation", "no operation is configured",
            "set operation.chunk_sql (over arrays), operation.item_sql, or operation.set (the SET "
            "list of an UPDATE coexist writes).");
      }
      return;
    }
    try {
      CheckOperation(conn, config_);
    } catch (const config::ConfigError& e) {
      report_.problems.push_back(e);
    }
  }

 private:
  void Key(const db::TargetFacts& facts) {
    const auto& t = t_;
    const auto& at = at_.key_column;
    if (facts.key_type.empty()) {
      Problem(at, Key("key_column"), Lacks(facts, t.key_column), "name a column of the table.");
      return;
    }
    if (!db::IsSupportedKeyType(facts.key_type)) {
      Problem(at, Key("key_column"),
              "column \"" + t.key_column + "\" of " + facts.qualified + " is " + facts.key_type +
                  "; the key must be of a supported type",
              "supported key types: smallint, integer, bigint, text, varchar, uuid; name such a "
              "column that identifies a row (for a composite key, add a unique surrogate "
              "column).");
      return;
    }
    if (!facts.key_unique) NotUnique(facts);
  }

  // The key column is not unique by itself: the one fix that works on the
  // table's shape, or none when its shape allows none (docs/configuration.md,
  // "Targets shaped as real schemas"). Every DDL proposed here is run by
  // target_check_test on the shape it addresses.
  void NotUnique(const db::TargetFacts& facts) {
    const auto& t = t_;
    const auto& at = at_.key_column;
    std::string column = "column \"" + t.key_column + "\" of " + facts.qualified;
    if (facts.kind == 'p') {
      std::string by;
      for (const auto& c : facts.partition_key) by += (by.empty() ? "" : ", ") + c;
      if (facts.partition_key == std::vector<std::string>{facts.key_sql}) {
        Problem(
            at, Key("key_column"),
            column + " is not unique: no primary key or unique index on it alone",
            "the batch claims and locks one row per key; the table is partitioned by it, so "
            "a unique index on it works: CREATE UNIQUE INDEX ON " +
                facts.qualified + " (" + facts.key_sql +
                "); (it blocks writes while it builds; on a large table build each "
                "partition's index CONCURRENTLY first, then attach them: docs/configuration.md)");
        return;
      }
      Problem(at, Key("key_column"),
              column + " is not unique by itself, and cannot be: " + facts.qualified +
                  " is partitioned by " + (by.empty() ? "an expression" : "(" + by + ")") +
                  ", and a unique index of a partitioned table must include its partition key",
              "the batch claims and locks one row per key, so the key must be one column that "
              "identifies a row: name the partition key column when it does (target.key_column), "
              "or make the target a table that is not partitioned; coexist does not key rows by "
              "several columns.");
      return;
    }
    std::string surrogate = "coexist_id";
    if (facts.key_in_composite_unique) {
      Problem(at, Key("key_column"),
              column +
                  " is one column of a composite key (a unique index of several columns), "
                  "not unique by itself",
              "coexist keys a row by one column: add a surrogate key and name it in "
              "target.key_column: ALTER TABLE " +
                  facts.qualified + " ADD COLUMN " + surrogate +
                  " bigint GENERATED ALWAYS AS IDENTITY UNIQUE; (this rewrites the table under an "
                  "ACCESS EXCLUSIVE lock: run it in a quiet moment)");
      return;
    }
    Problem(at, Key("key_column"),
            column + " is not unique: no primary key or unique index on it alone",
            "the batch claims and locks one row per key; when its values are unique, index it "
            "without blocking writes: CREATE UNIQUE INDEX CONCURRENTLY ON " +
                facts.qualified + " (" + facts.key_sql + ");");
  }

  void Version(const db::TargetFacts& facts) {
    const auto& t = t_;
    const auto& at = at_.version_column;
    if (facts.version_type.empty()) {
      if (version_to_be_added_) return;  // db install --add-version-column adds it
      Problem(at, Key("version_column"), Lacks(facts, t.version_column),
              "name the table's version column, or add one (instant on PostgreSQL 11+): " +
                  db::AddVersionColumnSql(facts.qualified, facts.version_sql) +
                  "; `coexist db install --add-version-column` runs it (waiting at most 2s at a "
                  "time for the table's lock, and trying again).");
      return;
    }
    if (!db::IsIntegerType(facts.version_type)) {
      Problem(at, Key("version_column"),
              "column \"" + t.version_column + "\" of " + facts.qualified + " is " +
                  facts.version_type + "; the version must be of an integer type",
              "coexist's trigger adds 1 to it on every UPDATE: name a smallint, integer or "
              "bigint column (a timestamp is a poor lock key).");
    }
  }

  void Privileges(const db::TargetFacts& facts) {
    const auto& t = t_;
    std::string role = "role \"" + facts.role + "\"";
    if (!facts.may_select) {
      Problem(at_.table, Key("table"),
              role + " may not SELECT the key and version columns of " + facts.qualified,
              "the batch reads the rows it claims: GRANT SELECT ON " + facts.qualified + " TO " +
                  facts.role + ";");
    }
    if (!facts.may_update) {
      Problem(at_.table, Key("table"), role + " may not UPDATE " + facts.qualified,
              "the batch locks the rows it applies (SELECT ... FOR UPDATE) and its operation "
              "writes them: GRANT SELECT, UPDATE ON " +
                  facts.qualified + " TO " + facts.role + ";");
    } else if (policy_.TakesOver() && t.owner_column && !facts.owner_type.empty() &&
               !facts.may_update_owner) {
      Problem(at_.owner_column, Key("owner_column"),
              role + " may not UPDATE column \"" + *t.owner_column + "\" of " + facts.qualified,
              std::string(policy_.Name()) + " takes rows over through it: GRANT UPDATE (" +
                  *t.owner_column + ") ON " + facts.qualified + " TO " + facts.role + ";");
    }
    if (primary_ && !policy_.SignalPattern().empty() && !facts.may_signal) {
      // Not a problem: the policy then defers what an online session
      // blocks (docs/operations.md, "Database roles").
      report_.warnings.push_back(
          role + " is not a member of pg_signal_backend: " + policy_.Name() +
          " cannot cancel or terminate the online sessions blocking it and defers those items "
          "instead (GRANT pg_signal_backend TO " +
          facts.role + ";)");
    }
  }

  std::string Lacks(const db::TargetFacts& facts, const std::string& column) const {
    return "table " + facts.qualified + " has no column \"" + column + "\"";
  }

  // At the key; a target key left to its default at target.table, the
  // key that chose the table; else just the file.
  void Problem(const config::Mark& mark, const std::string& key, const std::string& message,
               std::string hint) {
    config::Mark at = mark;
    if (at.line == 0 && key.starts_with(prefix_ + ".")) at = at_.table;
    if (at.line == 0) at = {config_.source, 0, 0};
    report_.problems.emplace_back(at, key, message, std::move(hint));
  }

  std::string Key(const char* column) const { return prefix_ + "." + column; }

  const config::Config& config_;
  const policies::Policy& policy_;
  CheckReport& report_;
  const config::TargetTable& t_;
  const config::Config::TargetMarks& at_;
  std::string prefix_;
  bool primary_;
  bool version_to_be_added_ = false;
  bool owner_to_be_added_ = false;
};

// pacing.cpu_priority without the prioritize extension: the run goes on
// with its backends at the server's priority (its own threads still
// lowered), so a warning, not a problem.
void PrioritizeWarning(pqxx::connection_base& conn, const config::Config& config,
                       CheckReport& report) {
  if (config.pacing.cpu_nice == 0) return;
  db::Prioritize state;
  {
    pqxx::read_transaction tx(conn);
    state = db::ReadPrioritize(tx);
  }
  if (state.schema) return;
  report.warnings.push_back(
      "pacing.cpu_priority: the prioritize extension is not installed in this database, so the "
      "batch's PostgreSQL backends run at the server's priority (its own threads are lowered); " +
      db::PrioritizeFix(state));
}

// batch.range.where, parsed and planned against the target, never run.
void RangeWhere(pqxx::connection_base& conn, const config::Config& config, CheckReport& report) {
  if (!config.batch.range) return;
  const auto& range = *config.batch.range;
  const auto& t = config.target;
  std::string table = conn.quote_name(t.schema) + "." + conn.quote_name(t.table);
  try {
    db::ParseOnly(conn, "SELECT 1 FROM " + table + " WHERE (" + range.where + ")");
  } catch (const pqxx::sql_error& e) {
    std::string what = e.what();
    report.problems.emplace_back(
        range.where_at, "batch.range.where",
        "the database rejects it: " + what.substr(0, what.find('\n')),
        "write one boolean condition over the columns of " + t.Name() +
            " (e.g. status = 'to_settle'); the walk reads SELECT ... FROM " + t.Name() +
            " WHERE (<where>).");
    return;
  }
  // A condition that parses but selects nothing is allowed (the rows may
  // come later), but an operator checking it wants to know: a run walks
  // nothing and succeeds.
  pqxx::read_transaction tx(conn);
  if (!tx.exec1("SELECT EXISTS (SELECT 1 FROM " + table + " WHERE (" + range.where + "))")[0]
           .as<bool>()) {
    report.warnings.push_back("batch.range.where selects no row of " + t.Name() +
                              " now: a run walks nothing and succeeds (exit 0); if rows should "
                              "match, check the condition");
  }
}

// The catalog's facts about the target and the tables of `targets:`, read
// in one transaction: the check judges them, it never reads them twice.
struct Tables {
  db::TargetFacts target;
  std::vector<db::TargetFacts> more;
};

Tables ReadTables(pqxx::connection_base& conn, const config::Config& config) {
  Tables tables;
  pqxx::read_transaction tx(conn);
  tables.target = db::ReadTargetFacts(tx, config.target);
  for (const auto& t : config.targets) tables.more.push_back(db::ReadTargetFacts(tx, t));
  return tables;
}

CheckReport CheckWith(pqxx::connection_base& conn, const config::Config& config,
                      const policies::Policy& policy, const Tables& tables,
                      const CheckScope& scope) {
  CheckReport report;
  Checker checker(config, policy, report, config.target, config.target_at, "target");
  const db::TargetFacts& facts = tables.target;
  const std::vector<db::TargetFacts>& more = tables.more;
  bool target_ok = checker.Target(facts, scope.privileges, scope);
  // The tables the operation writes beside the target: the same checks,
  // at their own keys.
  for (size_t i = 0; i < config.targets.size(); ++i) {
    Checker also(config, policy, report, config.targets[i], config.targets_at[i],
                 "targets[" + std::to_string(i) + "]");
    target_ok = also.Target(more[i], scope.privileges, scope) && target_ok;
  }
  // The operation of a target that is not there would only repeat it.
  if (target_ok) checker.OperationSql(conn, scope.operation);
  if (scope.payloads) checker.PayloadFields(conn, scope.operation);
  if (target_ok) RangeWhere(conn, config, report);
  PrioritizeWarning(conn, config, report);
  return report;
}

}  // namespace

CheckReport CheckDatabase(pqxx::connection_base& conn, const config::Config& config,
                          const CheckScope& scope) {
  Tables tables = ReadTables(conn, config);
  return CheckWith(conn, config, *policies::Create(config.policy), tables, scope);
}

CheckedConfig CheckConfig(pqxx::connection_base& conn, const config::Config& config,
                          const CheckScope& scope) {
  Tables tables = ReadTables(conn, config);
  std::shared_ptr<const policies::Policy> policy = policies::Create(config.policy);
  auto report = CheckWith(conn, config, *policy, tables, scope);
  for (const auto& warning : report.warnings) {
    spdlog::warn("target check warning target={} warning={}", config.target.Name(),
                 log::Value(warning));
  }
  if (report.problems.empty()) return CheckedConfig(config, std::move(policy));
  // Every problem at once, so one round of fixes is enough: all but the
  // first logged, the first thrown (the command's error and exit 78).
  for (size_t i = 1; i < report.problems.size(); ++i) {
    const auto& problem = report.problems[i];
    spdlog::error("target check problem {}/{}: {} ({})", i + 1, report.problems.size(),
                  problem.what(), problem.hint());
  }
  if (report.problems.size() == 1) throw report.problems.front();
  const auto& first = report.problems.front();
  throw config::ConfigError(first.mark(), "",
                            std::string(first.what()).substr(first.mark().ToString().size() + 2) +
                                " (1 of " + std::to_string(report.problems.size()) +
                                " problems; the others are logged above)",
                            first.hint());
}

}  // namespace coexist::batch

#include "db/target_table.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "config_core/duration.h"
#include "db/array_literal.h"
#include "db/failure.h"
#include "db/sqlstate.h"

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

TargetFacts ReadTargetFacts(pqxx::transaction_base& tx, const config::TargetTable& target) {
  // One row when the relation exists. has_column_privilege by attnum, over
  // the columns that are there: by name it raises for a missing column.
  constexpr const char* kFacts = R"sql(
    WITH p AS (SELECT to_regclass($1::text) AS rel, $2::text AS k, $3::text AS v, $4::text AS o),
    cols AS (
      SELECT a.attname::text AS name, a.attnum, format_type(a.atttypid, a.atttypmod) AS type
        FROM p JOIN pg_attribute a ON a.attrelid = p.rel
       WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attname::text IN (p.k, p.v, p.o))
    SELECT c.relkind, format('%I.%I', n.nspname, c.relname), current_user,
           quote_ident(p.k), quote_ident(p.v),
           coalesce((SELECT type FROM cols WHERE name = p.k), ''),
           coalesce((SELECT type FROM cols WHERE name = p.v), ''),
           coalesce((SELECT type FROM cols WHERE name = p.o), ''),
           EXISTS (SELECT 1 FROM pg_index i JOIN cols k ON k.name = p.k
                    WHERE i.indrelid = c.oid AND i.indisunique AND i.indisvalid
                      AND i.indnkeyatts = 1 AND i.indkey[0] = k.attnum
                      AND i.indpred IS NULL AND i.indexprs IS NULL),
           coalesce((SELECT bool_and(has_column_privilege(c.oid, attnum, 'SELECT'))
                       FROM cols WHERE name IN (p.k, p.v)), false),
           has_any_column_privilege(c.oid, 'UPDATE'),
           coalesce((SELECT has_column_privilege(c.oid, attnum, 'UPDATE')
                       FROM cols WHERE name = p.o), false),
           coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
             OR pg_has_role(current_user, 'pg_signal_backend', 'MEMBER'),
           EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary),
           EXISTS (SELECT 1 FROM pg_index i JOIN cols k ON k.name = p.k
                    WHERE i.indrelid = c.oid AND i.indisunique AND i.indnkeyatts > 1
                      AND k.attnum = ANY (i.indkey::int2[])),
           coalesce((SELECT array_agg(quote_ident(a.attname) ORDER BY x.n)
                       FROM pg_partitioned_table pt,
                            unnest(pt.partattrs::int2[]) WITH ORDINALITY x(attnum, n)
                            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.attnum
                      WHERE pt.partrelid = c.oid AND NOT 0 = ANY (pt.partattrs::int2[])),
                    '{}')::text,
           (SELECT count(*) FROM pg_partition_tree(c.oid) WHERE relid <> c.oid),
           CASE WHEN p.o <> '' THEN quote_ident(p.o) ELSE '' END
      FROM p JOIN pg_class c ON c.oid = p.rel JOIN pg_namespace n ON n.oid = c.relnamespace)sql";
  TargetFacts facts;
  std::string owner = target.owner_column.value_or("");
  auto rows = tx.exec_params(kFacts, QuotedName(tx, target), target.key_column,
                             target.version_column, owner);
  if (rows.empty()) return facts;
  const auto& row = rows[0];
  facts.exists = true;
  facts.kind = row[0].c_str()[0];
  facts.qualified = row[1].as<std::string>();
  facts.role = row[2].as<std::string>();
  facts.key_sql = row[3].as<std::string>();
  facts.version_sql = row[4].as<std::string>();
  facts.key_type = row[5].as<std::string>();
  facts.version_type = row[6].as<std::string>();
  facts.owner_type = row[7].as<std::string>();
  facts.key_unique = row[8].as<bool>();
  facts.may_select = row[9].as<bool>();
  facts.may_update = row[10].as<bool>();
  facts.may_update_owner = row[11].as<bool>();
  facts.may_signal = row[12].as<bool>();
  facts.has_primary_key = row[13].as<bool>();
  facts.key_in_composite_unique = row[14].as<bool>();
  facts.partition_key = ParseArrayLiteral(row[15].as<std::string>());
  facts.partitions = row[16].as<int>();
  facts.owner_sql = row[17].as<std::string>();
  // tgtype bits (pg_trigger.h): 1 row, 2 before, 4 insert, 8 delete,
  // 16 update, 32 truncate, 64 instead.
  constexpr const char* kTriggers = R"sql(
    SELECT tgname || ' (' ||
           CASE WHEN tgtype & 2 <> 0 THEN 'BEFORE' WHEN tgtype & 64 <> 0 THEN 'INSTEAD OF'
                ELSE 'AFTER' END || ' ' ||
           concat_ws(' OR ', CASE WHEN tgtype & 4 <> 0 THEN 'INSERT' END,
                     CASE WHEN tgtype & 16 <> 0 THEN 'UPDATE' END,
                     CASE WHEN tgtype & 8 <> 0 THEN 'DELETE' END,
                     CASE WHEN tgtype & 32 <> 0 THEN 'TRUNCATE' END) || ')'
      FROM pg_trigger
     WHERE tgrelid = to_regclass($1) AND NOT tgisinternal
       AND tgname NOT IN ('coexist_bump_version', 'coexist_guard')
       AND NOT tgname::text = ANY ($2::text[])
     ORDER BY tgname)sql";
  for (const auto& trigger :
       tx.exec_params(kTriggers, QuotedName(tx, target), ArrayLiteral(target.known_triggers))) {
    facts.user_triggers.push_back(trigger[0].as<std::string>());
  }
  return facts;
}

std::string AddVersionColumnSql(const std::string& qualified, const std::string& version_column) {
  return "ALTER TABLE " + qualified + " ADD COLUMN " + version_column +
         " bigint NOT NULL DEFAULT 0";
}

std::string AddOwnerColumnSql(const std::string& qualified, const std::string& owner_column) {
  return "ALTER TABLE " + qualified + " ADD COLUMN " + owner_column +
         " text NOT NULL DEFAULT 'online'";
}

void WithLockAttempts(pqxx::connection_base& conn, const std::string& what,
                      const std::string& table, const LockAttempts& how,
                      const std::function<void(pqxx::transaction_base&)>& statements) {
  auto backoff = how.first_backoff;
  for (int attempt = 1;; ++attempt) {
    try {
      pqxx::work tx(conn);
      tx.exec_params("SELECT set_config('lock_timeout', $1, true)",
                     std::to_string(how.lock_timeout.count()) + "ms");
      statements(tx);
      tx.commit();
      return;
    } catch (const pqxx::sql_error& e) {
      if (SqlStateOf(e) != sqlstate::kLockNotAvailable) throw;
    } catch (const pqxx::deadlock_detected&) {
      // A deadlock's victim had its transaction rolled back whole, like a
      // lock_timeout's: nothing changed, and the next attempt may pass.
      // (libpqxx 6.4's deadlock_detected is no sql_error.)
    }
    if (attempt >= how.attempts) {
      throw TempFailError(
          "could not " + what + ": another session holds a lock on " + table + " (" +
              std::to_string(attempt) + " attempts, lock_timeout " +
              config::FormatDuration(how.lock_timeout) + " each)",
          "nothing was changed by this step. A long transaction on the table blocks it; run "
          "it again when the table is quiet, or find the holder: SELECT pid, usename, "
          "application_name, state, xact_start FROM pg_stat_activity WHERE pid IN (SELECT pid "
          "FROM pg_locks WHERE relation = '" +
              table + "'::regclass AND granted);");
    }
    spdlog::warn("table locked, trying again step={} table={} attempt={} retry_in={}",
                 log::Value(what), table, attempt, config::FormatDuration(backoff));
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
}

bool AddVersionColumn(pqxx::connection_base& conn, const config::TargetTable& target,
                      const AddColumnAttempts& how) {
  std::optional<TargetFacts> facts;
  {
    pqxx::read_transaction tx(conn);
    facts = ReadTargetFacts(tx, target);
  }
  if (!facts->exists || !facts->version_type.empty()) return false;
  bool added = false;
  WithLockAttempts(conn, "add column " + target.version_column + " to " + target.Name(),
                   facts->qualified, how, [&](pqxx::transaction_base& tx) {
                     // Read again under the transaction: another installer may
                     // have added it meanwhile.
                     if (!ReadTargetFacts(tx, target).version_type.empty()) return;
                     tx.exec(AddVersionColumnSql(facts->qualified, facts->version_sql));
                     added = true;
                   });
  if (added) {
    spdlog::info("version column added target={} column={}", target.Name(), target.version_column);
  }
  return added;
}

bool AddOwnerColumn(pqxx::connection_base& conn, const config::TargetTable& target,
                    const LockAttempts& how) {
  if (!target.owner_column) return false;
  std::optional<TargetFacts> facts;
  {
    pqxx::read_transaction tx(conn);
    facts = ReadTargetFacts(tx, target);
  }
  if (!facts->exists || !facts->owner_type.empty()) return false;
  bool added = false;
  WithLockAttempts(
      conn, "add column " + *target.owner_column + " to " + target.Name(), facts->qualified, how,
      [&](pqxx::transaction_base& tx) {
        if (!ReadTargetFacts(tx, target).owner_type.empty()) return;
        tx.exec(AddOwnerColumnSql(facts->qualified, tx.quote_name(*target.owner_column)));
        added = true;
      });
  return added;
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

bool IsIntegerType(const std::string& type) {
  return type == "smallint" || type == "integer" || type == "bigint";
}

bool IsSupportedKeyType(const std::string& type) {
  return IsIntegerType(type) || type == "text" || type == "uuid" ||
         type.starts_with("character varying");
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

void InstallVersionTrigger(pqxx::connection_base& conn, const config::TargetTable& target,
                           const LockAttempts& how) {
  std::string table = conn.quote_name(target.schema) + "." + conn.quote_name(target.table);
  WithLockAttempts(conn, "install the version trigger on " + target.Name(), table, how,
                   [&](pqxx::transaction_base& tx) {
                     tx.exec_params("SELECT coexist.install_version_trigger($1::regclass, $2)",
                                    table, target.version_column);
                   });
  spdlog::info("version trigger installed target={} column={}", target.Name(),
               target.version_column);
}

}  // namespace coexist::db

#include "batch/range_chunk_call.h"

#include "batch/operation.h"
#include "batch/record_sql.h"
#include "db/failure.h"
#include "db/sqlstate.h"
#include "schema/range_chunk_function.h"

namespace coexist::batch {
namespace {

RangeCallState StateOf(const std::string& state) {
  if (state == "fenced") return RangeCallState::kFenced;
  if (state == "busy") return RangeCallState::kBusy;
  if (state == "walked") return RangeCallState::kWalked;
  if (state == "applied") return RangeCallState::kApplied;
  return RangeCallState::kRetake;
}

}  // namespace

bool CreateRangeChunkCall(pqxx::connection_base& conn, const config::Config& config,
                          const RecordSql& sql, const Operation& operation) {
  try {
    db::RangeChunkSpec spec;
    spec.table = sql.target();
    spec.key = conn.quote_name(config.target.key_column);
    spec.key_type = sql.key_type();
    spec.where = config.batch.range->where;
    if (config.target.owner_column)
      spec.owner_column = conn.quote_name(*config.target.owner_column);
    if (!config.operation.set.empty()) {
      spec.set_update = [&](const std::string& rows) { return SetUpdate(conn, config, rows); };
    }
    spec.statement = operation.statement();
    pqxx::nontransaction(conn).exec(db::RangeChunkFunctionSql(spec));
  } catch (const pqxx::sql_error& e) {
    // A database that revoked TEMP from PUBLIC: the statements still work.
    if (db::SqlStateOf(e) == db::sqlstate::kInsufficientPrivilege) return false;
    throw;
  }
  conn.prepare("call_range_chunk", db::kRangeChunkCallSql);
  return true;
}

RangeCallResult CallRangeChunk(pqxx::connection_base& conn, long long run_id,
                               const std::string& job, int segment, long long pass, int size,
                               bool skip_queued_keys) {
  pqxx::nontransaction tx(conn);
  auto row =
      tx.exec_prepared1("call_range_chunk", run_id, job, segment, pass, size, skip_queued_keys);
  RangeCallResult result;
  result.state = StateOf(row[0].as<std::string>());
  result.keys = row[1].as<int>();
  result.applied = row[2].as<long long>();
  return result;
}

}  // namespace coexist::batch

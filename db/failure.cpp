#include "db/failure.h"

#include <pqxx/except>

#include "common/error.h"
#include "db/sqlstate.h"

namespace coexist::db {
namespace {

FailureKind ClassifySqlState(const std::string& state) {
  if (state == sqlstate::kQueryCanceled || state == sqlstate::kLockNotAvailable) {
    return FailureKind::kRetryable;
  }
  std::string cls = state.substr(0, 2);
  if (cls == "08" || state.starts_with("57P")) return FailureKind::kConnectionLost;
  if (cls == "42" || cls == "3D" || cls == "3F" || cls == "28" || cls == "0L" || cls == "0P") {
    return FailureKind::kConfiguration;
  }
  if (cls == "53" || cls == "57" || cls == "58" || cls == "XX" || state == "25006") {
    return FailureKind::kServer;
  }
  return FailureKind::kItem;
}

}  // namespace

std::string SqlStateOf(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) return "42501";
  return "";
}

FailureKind Classify(const std::exception& e) {
  // in_doubt_error first: it must never be taken for a plain lost connection.
  // statement_completion_unknown (40003) derives from transaction_rollback,
  // but nothing says the work rolled back: it must never be retried blindly.
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr ||
      dynamic_cast<const pqxx::statement_completion_unknown*>(&e) != nullptr) {
    return FailureKind::kInDoubt;
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    return FailureKind::kConnectionLost;
  }
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) {
    return FailureKind::kRetryable;
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    return ClassifySqlState(SqlStateOf(*sql));
  }
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    if (error->code() == ExitCode::kConfig) return FailureKind::kConfiguration;
    if (error->code() == ExitCode::kTempFail) return FailureKind::kConnectionLost;
  }
  return FailureKind::kBug;
}

ExitCode ExitCodeOf(FailureKind kind) {
  switch (kind) {
    case FailureKind::kConnectionLost:
    case FailureKind::kInDoubt:
    case FailureKind::kRetryable:
    case FailureKind::kServer:
      return ExitCode::kTempFail;
    case FailureKind::kConfiguration:
      return ExitCode::kConfig;
    case FailureKind::kItem:
    case FailureKind::kBug:
      break;
  }
  return ExitCode::kSoftware;
}

}  // namespace coexist::db

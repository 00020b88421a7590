#include "cli/failure.h"

#include <pqxx/except>

#include "common/error.h"
#include "config_core/config_error.h"
#include "db/failure.h"

namespace coexist::cli {
namespace {

// A database error that escaped a command, as db::Classify judges it.
Failure DescribeDatabaseFailure(const std::exception& e) {
  using db::FailureKind;
  auto kind = db::Classify(e);
  auto code = db::ExitCodeOf(kind);
  const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
  std::string state = sql != nullptr ? db::SqlStateOf(*sql) + ": " : "";
  switch (kind) {
    case FailureKind::kInDoubt:
      return {code,
              std::string("coexist: whether the last transaction committed is unknown (the "
                          "connection was lost while committing, or the server could not "
                          "tell): ") +
                  e.what(),
              "check what it did (coexist queue status, coexist runs list) before running "
              "it again; a batch run may simply be run again."};
    case FailureKind::kConnectionLost:
      return {code, std::string("coexist: lost the database connection: ") + state + e.what(), ""};
    case FailureKind::kRetryable:
      // A deadlock, serialization failure or timeout that escaped the
      // command's own retries: trying again later is the cure.
      return {code,
              "coexist: the database rolled back or cancelled a statement: " + state + e.what(),
              "run it again later."};
    case FailureKind::kServer:
      return {code, "coexist: the server could not run a statement: " + state + e.what(), ""};
    case FailureKind::kConfiguration:
      // A right revoked or an object gone is the deployment's to fix.
      return {code, "coexist: the database refused a statement: " + state + e.what(),
              "grant the role what it needs (docs/operations.md, \"Database roles\") or "
              "restore what the error names, then run again."};
    case FailureKind::kItem:
      return {code, "coexist: database error " + state + e.what(), ""};
    case FailureKind::kBug:
      break;
  }
  return {code, std::string("coexist: internal error: ") + e.what(),
          "this is a bug; please report it with the command you ran."};
}

}  // namespace

Failure Describe(const std::exception& e) {
  if (const auto* config = dynamic_cast<const config::ConfigError*>(&e)) {
    return {config->code(), std::string("config error: ") + config->what(), config->hint()};
  }
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    return {error->code(), std::string("coexist: ") + error->what(), error->hint()};
  }
  return DescribeDatabaseFailure(e);
}

Failure Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return Describe(e);
  } catch (...) {
    return {ExitCode::kSoftware, "coexist: internal error: an unknown exception",
            "this is a bug; please report it with the command you ran."};
  }
}

}  // namespace coexist::cli

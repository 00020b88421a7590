#pragma once

// The configuration against the live database (docs/configuration.md,
// "Checking against the database"): what only the catalog can tell. The
// target is a table (a partitioned one is checked on its parent; a view is
// refused), its key column an integer type and unique, its version column
// there and an integer, its owner column there when one is configured; the
// role may read and update it as the policy does; the operation SQL
// prepares (never runs); each payload field the operation binds
// (operation.params) is in some of the job's waiting items' payloads (a
// sample of 1,000; in none is a problem, missing in some a warning). User
// triggers on the target are warnings, and so is pacing.cpu_priority in a
// database without the prioritize extension. A range job's
// batch.range.where must prepare against the target.
//
// One check, called from everywhere: `config check --database`, `db
// install`, `batch run`, `batch daemon` (through batch::Run), `enqueue` and
// `runs sweep`. It writes nothing (the operation is prepared, and its
// item_sql function is a pg_temp one of this session), so a failing check
// leaves nothing half-installed: callers check before they install.
//
// Thread safety: uses `conn` only; one thread at a time.

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config_core/config_error.h"

namespace pqxx {
class connection_base;
}
namespace coexist::policies {
class Policy;
}

namespace coexist::batch {

// What a check looks at besides the target's table and columns.
struct CheckScope {
  enum class Operation {
    kRequired,      // batch run, daemon: the operation must be configured, and prepare
    kIfConfigured,  // config check, enqueue: prepared when configured
    kSkip,          // db install: the schema's business only
  };
  Operation operation = Operation::kRequired;
  // The role's rights for what the policy does to the target (SELECT and
  // UPDATE; UPDATE of the owner column for a policy that takes rows over).
  // Off for `db install`, which the table's owner runs, not the batch role.
  bool privileges = true;
  // The payload fields of operation.params against the job's waiting
  // items. Off for `enqueue`: the items it is about to add may be the
  // ones that carry the field.
  bool payloads = true;
  // `db install --add-version-column`: a missing version column is not a
  // problem (the install adds it, after every check has passed).
  bool version_column_to_be_added = false;
  // `db install --add-owner-column`: likewise for a configured owner column.
  bool owner_column_to_be_added = false;
};

struct CheckReport {
  // Every problem found, in the order of the keys; each located at its key
  // (file:line:column, or just the file when the key is not written), with
  // the fix as its hint.
  std::vector<config::ConfigError> problems;
  // Things that work but deserve a look (a user trigger on the target, a
  // right the policy can do without): one line each.
  std::vector<std::string> warnings;
};

// Reads the catalog in a transaction of its own on `conn`, which must have
// none open. Throws pqxx errors (and TempFailError) when the database
// cannot be asked; what it finds wrong goes in the report.
CheckReport CheckDatabase(pqxx::connection_base& conn, const config::Config& config,
                          const CheckScope& scope = {});

// What `db install` checks, and what InstallGuard needs checked: the
// target's shape and columns, not the operation nor the batch role's rights.
inline constexpr CheckScope kInstallCheck{.operation = CheckScope::Operation::kSkip,
                                          .privileges = false};

// A configuration the database has accepted, and the policy it names, made
// once. Only CheckConfig makes one, so a step that takes it (InstallGuard,
// a run's steps) knows the check ran and never repeats it, and every step
// of a run asks the same policy object.
class CheckedConfig {
 public:
  const config::Config& config() const { return config_; }
  const policies::Policy& policy() const { return *policy_; }

 private:
  friend CheckedConfig CheckConfig(pqxx::connection_base&, const config::Config&,
                                   const CheckScope&);
  CheckedConfig(config::Config config, std::shared_ptr<const policies::Policy> policy)
      : config_(std::move(config)), policy_(std::move(policy)) {}

  config::Config config_;  // a copy: it outlives the caller's
  std::shared_ptr<const policies::Policy> policy_;
};

// CheckDatabase for a command that goes on to work: logs each warning
// (`target check warning ...`) and throws the first problem (exit 78).
CheckedConfig CheckConfig(pqxx::connection_base& conn, const config::Config& config,
                          const CheckScope& scope = {});

}  // namespace coexist::batch

#pragma once

// `coexist db install` and `db uninstall` on a live application's database
// (docs/configuration.md, "Installing on a live database"). The contract:
//
//   1. Every check first, writing nothing: the configuration against the
//      catalog (batch/check.h: the target is a table, its key one unique
//      column, its version column an integer or about to be added), and the
//      installer's own rights for each statement it is about to run.
//   2. Then the statements, in order, each in a transaction of its own. A
//      statement that locks an application's table (ALTER TABLE, CREATE
//      TRIGGER, DROP TRIGGER) waits for that lock at most
//      LockAttempts::lock_timeout at a time and tries again after a
//      backoff (db::WithLockAttempts), so online writes queue behind it for
//      at most that long. It locks a partitioned table parent first, as an
//      online UPDATE does, so the two never deadlock.
//   3. PlanInstall lists those statements and the lock each takes, and runs
//      none (`db install --plan`).
//
// After an install, every role that could write the target before writes
// it as before: the guard runs with its owner's rights (0030), and it
// refuses online writes only for the policy (CX003 while a run works in a
// read_only window, CX004, CX005), never for lack of a right.
//
// Thread safety: uses `conn` only; one thread at a time. `conn` must have
// no transaction open.

#include <string>
#include <vector>

#include "config/config.h"
#include "db/target_table.h"

namespace pqxx {
class connection_base;
}

namespace coexist::batch {

struct InstallOptions {
  bool add_version_column = false;  // ALTER TABLE ... ADD COLUMN when missing
  bool add_owner_column = false;    // likewise, for a configured target.owner_column
  db::LockAttempts locks;           // for every statement that locks a target
};

// One statement of an install or uninstall, as `--plan` prints it.
struct PlannedStep {
  std::string statement;  // the SQL it runs
  std::string locks;      // what it locks, and for how long at most
};

struct InstallPlan {
  std::vector<PlannedStep> steps;  // in the order they run; empty: nothing to do
  // What changed, one line each ("column version added to sales.orders"):
  // filled by Install and Uninstall, not by a plan.
  std::vector<std::string> changed;
};

// The steps an install would run now, after every check has passed. Reads
// only. Throws config::ConfigError (78, located) for what the check finds,
// ConfigurationError (78) for a right the installer lacks.
InstallPlan PlanInstall(pqxx::connection_base& conn, const config::Config& config,
                        const InstallOptions& options);

// Checks, then runs the plan. Returns the steps it ran. Throws as
// PlanInstall before anything is changed; TempFailError (75) when a
// table's lock did not come (the steps before it are done, and an install
// run again goes on from there).
InstallPlan Install(pqxx::connection_base& conn, const config::Config& config,
                    const InstallOptions& options);

struct UninstallOptions {
  // Also ALTER TABLE ... DROP COLUMN the version column (its values are
  // lost; only what `--add-version-column` added should go).
  bool drop_version_column = false;
  bool drop_owner_column = false;  // likewise, what `--add-owner-column` added
  // Also DROP SCHEMA coexist: the queue, runs, events and edit locks of
  // every job. Refused while another table still has coexist's triggers,
  // and while items wait, unless `discard_queue`.
  bool schema = false;
  bool discard_queue = false;
  db::LockAttempts locks;
  bool plan_only = false;  // check and list the steps, run none (`--plan`)
};

// Removes what Install added for `config`'s job and tables: the guard and
// version triggers and their functions, the job's windows, the tables'
// edit locks and rows of coexist.targets. Refused (JobBusy, exit 4) while a
// run of the job is alive, and (78) while a table still has rows a
// status_partition run took over. Returns the steps it ran.
InstallPlan Uninstall(pqxx::connection_base& conn, const config::Config& config,
                      const UninstallOptions& options);

}  // namespace coexist::batch

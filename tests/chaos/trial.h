#pragma once

// One iteration of a fault: a fresh database cloned from the template, a
// job whose items repeat keys (several items per key, often one right after
// the other, so a chunk would carry two items of one key if the claim let
// it), the coexist processes the fault runs, and the final clean runs.
// Include only from the suite's .cpp files (it brings in libpqxx).

#include <chrono>
#include <filesystem>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "tests/chaos/child.h"
#include "tests/chaos/findings.h"
#include "tests/chaos/lab.h"
#include "tests/chaos/rng.h"

namespace coexist::chaos {

// The policies every process fault cycles through, as coexist's policy names.
const std::vector<std::string>& AllPolicies();

struct JobShape {
  std::string policy = "skip_locked";
  int workers = 1;
  int chunk_size = 10;
  double chunk_sleep = 0.03;  // seconds the operation sleeps per chunk
  int items = 400;
  int keys = 80;         // distinct keys the items use: items / keys per key on average
  int max_attempts = 5;  // batch.max_attempts
  Role batch_role = Role::kBatch;
  // A range job (batch.range): no items are enqueued; `keys` rows of the
  // target are marked to settle (to_settle = 1, a qty each) and one pass
  // settles each once, sending the rows it cannot have to the queue. The
  // operation leaves the mark, so only the checkpoints keep a row from
  // being settled twice. `items` is then `keys` (a ledger row per row).
  bool range = false;
  // The range job's operation as operation.set (coexist writes the UPDATE,
  // and the walk's one call takes no lock before it), its ledger row then
  // written by a trigger of the table; otherwise chunk_sql.
  bool set_form = false;
};

// A random range job under `policy` with 1 or 2 workers.
JobShape RandomRangeShape(Rng& rng, const std::string& policy, int workers);

// A random shape for `policy` and `workers`: chunk size, items, keys and a
// sleep that makes one run last about a second or two.
JobShape RandomShape(Rng& rng, const std::string& policy, int workers);
// "skip_locked w4 c10 400/80"
std::string Describe(const JobShape& shape);

class Trial {
 public:
  // Creates the database, writes the job's configuration and enqueues its
  // items with `coexist enqueue`.
  Trial(Lab& lab, const std::string& label, JobShape shape, Rng& rng);
  ~Trial();
  Trial(const Trial&) = delete;
  Trial& operator=(const Trial&) = delete;

  Lab& lab() { return lab_; }
  const JobShape& shape() const { return shape_; }
  const std::string& database() const { return database_; }
  const std::filesystem::path& dir() const { return dir_; }
  long long items() const { return shape_.items; }
  std::string Conninfo(Role role) const { return lab_.Conninfo(database_, role); }

  // `coexist ... batch run` / `batch daemon` as the job's batch role.
  Child StartBatch(const std::string& log);
  Child StartDaemon(const std::string& log);
  // Any coexist command line against this database (as `role`).
  Child StartCoexist(const std::vector<std::string>& args, const std::string& log,
                     Role role = Role::kSuperuser);

  // One statement as the superuser, on the driver's own connection, which
  // is opened again when a fault broke it (throws while the server is down).
  pqxx::result Query(const std::string& sql);
  std::string Value(const std::string& sql);
  long long Count(const std::string& sql) { return std::stoll(Value(sql)); }
  // Count() that answers -1 instead of throwing (the server may be down).
  long long TryCount(const std::string& sql);

  long long Applied() { return TryCount("SELECT count(*) FROM chaos_ledger"); }
  // Items still queued or deferred (a range job: and its pass's segments
  // not walked yet).
  long long Pending();

  // Returns once `rows` items are applied, `run` exited, or 60 s passed.
  void WaitForApplied(long long rows, Child& run);
  // Waits a random moment of `run`: mostly until a random share of the items
  // is applied; with `early`, sometimes a few hundred ms after its start.
  void WaitForRandomMoment(Child& run, Rng& rng, bool early);

  // The final clean `batch run`s, until nothing is queued or deferred (at
  // most a dozen). A run that hangs or exits with a status other than 0, 2,
  // 3 or 4 (busy: the killed run's session is still going away) is a
  // violation ("final_run").
  void DrainWithCleanRuns(Findings& findings);

  // Keeps the folder (configuration, logs) for a post-mortem; the
  // database goes with the cluster.
  void Keep() { keep_ = true; }

 private:
  void WriteConfig();
  void Enqueue(Rng& rng);
  // A range job's rows to settle, instead of Enqueue.
  void MarkRowsToSettle(Rng& rng);

  Lab& lab_;
  JobShape shape_;
  std::string database_;
  std::filesystem::path dir_;
  std::filesystem::path config_;
  std::unique_ptr<pqxx::connection> probe_;
  int clean_runs_ = 0;
  bool keep_ = false;
};

}  // namespace coexist::chaos

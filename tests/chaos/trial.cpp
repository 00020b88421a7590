#include "tests/chaos/trial.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "db/connection.h"

namespace coexist::chaos {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string PolicyYaml(const std::string& policy) {
  if (policy == "online_priority") return "{name: online_priority, max_wait: 1s}";
  if (policy == "batch_priority") {
    return "{name: batch_priority, cancel_after: 100ms, terminate_after: 300ms, "
           "online_application_name: 'coexist-online%'}";
  }
  if (policy == "time_window") {
    // start == end: a 24-hour window, open whenever the suite runs.
    return "{name: time_window, mode: allow, drain_margin: 0s, windows: "
           "[{time_zone: UTC, start: \"00:00\", end: \"00:00\"}]}";
  }
  return "{name: " + policy + "}";
}

// `count` distinct keys of the template's rows, in a random order.
std::vector<long long> RandomKeys(Rng& rng, int count) {
  std::vector<long long> keys;
  for (long long k = 1; k <= Lab::kRecords; ++k) keys.push_back(k);
  for (std::size_t i = keys.size() - 1; i > 0; --i) {
    std::swap(keys[i], keys[static_cast<std::size_t>(rng.Int(0, static_cast<int>(i)))]);
  }
  keys.resize(static_cast<std::size_t>(count));
  return keys;
}

bool IsConnectionLoss(const pqxx::sql_error& e) {
  std::string state = e.sqlstate();
  return state.starts_with("08") || state.starts_with("57P");
}

}  // namespace

const std::vector<std::string>& AllPolicies() {
  static const std::vector<std::string> policies = {
      "skip_locked", "online_priority", "batch_priority", "status_partition", "time_window"};
  return policies;
}

JobShape RandomShape(Rng& rng, const std::string& policy, int workers) {
  JobShape shape;
  shape.policy = policy;
  shape.workers = workers;
  shape.chunk_size = rng.Pick(std::vector<int>{5, 10, 20});
  shape.items = rng.Int(240, 480);
  shape.keys = rng.Int(shape.items / 8, shape.items / 3);
  // About 1 to 2 s of work for one run: the faults land inside it.
  double seconds = rng.Real(1.0, 2.0);
  double chunks = static_cast<double>(shape.items) / std::min(shape.chunk_size, shape.keys);
  shape.chunk_sleep = std::clamp(seconds * workers / chunks - 0.008, 0.005, 0.3);
  return shape;
}

JobShape RandomRangeShape(Rng& rng, const std::string& policy, int workers) {
  JobShape shape;
  shape.policy = policy;
  shape.workers = workers;
  shape.range = true;
  shape.set_form = rng.Chance(0.5);
  shape.chunk_size = rng.Pick(std::vector<int>{5, 10, 20});
  shape.keys = rng.Int(120, static_cast<int>(Lab::kRecords));
  shape.items = shape.keys;
  // About 1 to 2 s of walking for one run: the faults land inside it. The
  // walk reads the range in chunks of chunk_size rows, to settle or not.
  double seconds = rng.Real(1.0, 2.0);
  double chunks = static_cast<double>(shape.keys) / shape.chunk_size;
  shape.chunk_sleep = std::clamp(seconds * workers / chunks - 0.008, 0.005, 0.3);
  return shape;
}

std::string Describe(const JobShape& shape) {
  char text[160];
  std::snprintf(text, sizeof(text), "%s%s w%d c%d %d/%d %.0fms",
                shape.range ? (shape.set_form ? "range set " : "range ") : "", shape.policy.c_str(),
                shape.workers, shape.chunk_size, shape.items, shape.keys, shape.chunk_sleep * 1000);
  return text;
}

Trial::Trial(Lab& lab, const std::string& label, JobShape shape, Rng& rng)
    : lab_(lab), shape_(std::move(shape)) {
  database_ = lab_.CreateDatabase();
  dir_ = lab_.work_dir() / label;
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  config_ = dir_ / "job.yaml";
  WriteConfig();
  if (shape_.range) {
    MarkRowsToSettle(rng);
  } else {
    Enqueue(rng);
  }
}

Trial::~Trial() {
  probe_.reset();
  try {
    lab_.DropDatabase(database_);
  } catch (const std::exception&) {
    // The next iteration uses another database; the cluster goes at exit.
  }
  if (!keep_ && !lab_.keep_logs()) std::filesystem::remove_all(dir_);
}

// The documented set-based style (docs/batch.md): one UPDATE ... FROM
// unnest(...) over the chunk, and in the same statement one ledger row per
// item it applied, carrying the item's uid. Two items of one key in one
// statement would move the row once and leave one ledger row for two done
// items.
void Trial::WriteConfig() {
  char sleep[32];
  std::snprintf(sleep, sizeof(sleep), "%.3f", shape_.chunk_sleep);
  std::ofstream(config_)
      << "database: {statement_timeout: 30s}\n"
      << "target: {owner_column: owner"
      << (shape_.range && shape_.set_form ? ", known_triggers: [settle_ledger]" : "") << "}\n"
      << "batch: {job: chaos, chunk_size: " << shape_.chunk_size << ", workers: " << shape_.workers
      << ", max_attempts: " << shape_.max_attempts
      << (shape_.range ? ", range: {where: \"to_settle = 1\"}" : "") << "}\n"
      << "pacing: {adaptive: false, max_load: {lock_waiters: 0, replication_lag: 0s},\n"
         "         critical_load: {lock_waiters: 0}}\n"
      << "policy: " << PolicyYaml(shape_.policy) << "\n"
      << "daemon: {poll_interval: 500ms, reconnect_initial: 100ms, reconnect_max: 1s}\n"
      // online-sim (the online_sim_killed fault): it edits stock, the batch settled.
      << "online: {users: 16, pool_size: 6, think_time: 20ms, value_column: stock,\n"
         "         application_name: coexist-online-sim, offline_hold: 200ms, offline_ttl: 2s,\n"
         "         offline_abandon: 0, lock_timeout: 500ms}\n"
      << "operation:\n";
  if (shape_.range && shape_.set_form) {
    // The same settlement as the chunk_sql below, as a SET list: the pause
    // an InitPlan, once a statement (a chunk); the ledger row the trigger's
    // (MarkRowsToSettle).
    std::ofstream(config_, std::ios::app)
        << "  set: settled = settled + qty + (SELECT 0 FROM pg_sleep(" << sleep << "))\n";
    return;
  }
  std::ofstream(config_, std::ios::app) << "  chunk_sql: |\n"
                                           "    WITH pause AS (SELECT pg_sleep("
                                        << sleep << ")),\n";
  if (shape_.range) {
    // Settles each row of the chunk by its qty and leaves its mark: the
    // predicate stays true, so only the walk (its checkpoints committed with
    // each chunk, its exceptions) keeps a row from being settled twice in a
    // pass, and a second time would leave a second ledger row for it.
    std::ofstream(config_, std::ios::app)
        << "    moved AS (\n"
           "      UPDATE products p SET settled = p.settled + p.qty\n"
           "       WHERE p.id = ANY ($1::bigint[]) AND (SELECT true FROM pause)\n"
           "      RETURNING p.id, p.qty)\n"
           "    INSERT INTO chaos_ledger (uid, item_key, qty) SELECT id, id, qty FROM moved\n";
    return;
  }
  std::ofstream(config_, std::ios::app)
      << "    moved AS (\n"
         "      UPDATE products p SET settled = p.settled + i.qty\n"
         "        FROM unnest($1::bigint[], $2::integer[], $3::bigint[]) AS i(id, qty, uid)\n"
         "       WHERE p.id = i.id AND (SELECT true FROM pause)\n"
         "      RETURNING i.uid, i.id, i.qty)\n"
         "    INSERT INTO chaos_ledger (uid, item_key, qty) SELECT uid, id, qty FROM moved\n"
         "  params: [qty, uid]\n";
}

void Trial::Enqueue(Rng& rng) {
  std::vector<long long> keys = RandomKeys(rng, shape_.keys);
  auto file = dir_ / "items.jsonl";
  std::ofstream out(file);
  long long key = keys.front();
  for (int uid = 1; uid <= shape_.items; ++uid) {
    // A third of the items repeat the key before them: runs of one key.
    if (!rng.Chance(0.3)) key = rng.Pick(keys);
    out << "{\"key\":" << key << ",\"payload\":{\"qty\":" << rng.Int(1, 9) << ",\"uid\":" << uid
        << "}}\n";
  }
  out.close();
  auto enqueue = RunCommand({CoexistBinary(), "--database-url", Conninfo(Role::kSuperuser),
                             "--config", config_.string(), "enqueue", "--file", file.string()});
  if (enqueue.status != 0) {
    throw std::runtime_error("coexist enqueue failed (" + std::to_string(enqueue.status) +
                             "): " + enqueue.output);
  }
}

void Trial::MarkRowsToSettle(Rng& rng) {
  // The documented grants gave the batch role UPDATE on the whole table,
  // these columns included.
  Query(
      "ALTER TABLE products ADD COLUMN to_settle integer NOT NULL DEFAULT 0,"
      " ADD COLUMN qty integer NOT NULL DEFAULT 0");
  std::string ids;
  std::vector<long long> keys = RandomKeys(rng, shape_.keys);
  for (long long key : keys) {
    ids += (ids.empty() ? "" : ",") + std::to_string(key) + ":" + std::to_string(rng.Int(1, 9));
  }
  Query(
      "UPDATE products p SET to_settle = 1, qty = split_part(m, ':', 2)::integer"
      " FROM unnest(string_to_array('" +
      ids + "', ',')) AS m WHERE p.id = split_part(m, ':', 1)::bigint");
  if (shape_.set_form) {
    // The application's own trigger writes the ledger: one row each time a
    // row is settled, by whichever statement settles it.
    Query(
        "CREATE FUNCTION settle_ledger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO chaos_ledger (uid, item_key, qty) VALUES (NEW.id, NEW.id, NEW.qty); "
        "RETURN NEW; END $$");
    Query(
        "CREATE TRIGGER settle_ledger AFTER UPDATE ON products FOR EACH ROW WHEN "
        "(NEW.settled IS DISTINCT FROM OLD.settled) EXECUTE FUNCTION settle_ledger()");
  }
  Query("ANALYZE products");
}

Child Trial::StartCoexist(const std::vector<std::string>& args, const std::string& log, Role role) {
  std::vector<std::string> argv = {CoexistBinary(), "--database-url", Conninfo(role), "--config",
                                   config_.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Child(argv, dir_ / log);
}

Child Trial::StartBatch(const std::string& log) {
  std::vector<std::string> args = {"batch", "run"};
  if (shape_.batch_role != Role::kSuperuser) args.push_back("--no-install");
  return StartCoexist(args, log, shape_.batch_role);
}

Child Trial::StartDaemon(const std::string& log) {
  std::vector<std::string> args = {"batch", "daemon"};
  if (shape_.batch_role != Role::kSuperuser) args.push_back("--no-install");
  return StartCoexist(args, log, shape_.batch_role);
}

pqxx::result Trial::Query(const std::string& sql) {
  for (int attempt = 0;; ++attempt) {
    try {
      if (!probe_) probe_ = db::Connect(Conninfo(Role::kSuperuser), "chaos-driver");
      pqxx::work tx(*probe_);
      auto result = tx.exec(sql);
      tx.commit();
      return result;
    } catch (const pqxx::broken_connection&) {
      probe_.reset();
      if (attempt > 0) throw;
    } catch (const pqxx::sql_error& e) {
      if (!IsConnectionLoss(e) || attempt > 0) throw;
      probe_.reset();
    }
  }
}

std::string Trial::Value(const std::string& sql) {
  auto result = Query(sql);
  return result.empty() || result[0][0].is_null() ? "" : result[0][0].as<std::string>();
}

long long Trial::TryCount(const std::string& sql) {
  try {
    return Count(sql);
  } catch (const std::exception&) {
    probe_.reset();
    return -1;
  }
}

long long Trial::Pending() {
  if (shape_.range) {
    // The pass's segments not walked yet (one while no run has started it).
    return TryCount(
        "SELECT (SELECT count(*) FROM coexist.items WHERE state IN ('queued', 'deferred'))"
        " + (SELECT CASE WHEN count(*) = 0 THEN 1 ELSE count(*) FILTER (WHERE NOT finished) END"
        "      FROM coexist.range_checkpoints)");
  }
  return TryCount("SELECT count(*) FROM coexist.items WHERE state IN ('queued', 'deferred')");
}

void Trial::WaitForApplied(long long rows, Child& run) {
  auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline && run.Running() && Applied() < rows) {
    std::this_thread::sleep_for(10ms);
  }
}

void Trial::WaitForRandomMoment(Child& run, Rng& rng, bool early) {
  if (early && rng.Chance(0.25)) {
    auto until = Clock::now() + rng.Ms(0, 400);
    while (Clock::now() < until && run.Running()) std::this_thread::sleep_for(5ms);
    return;
  }
  WaitForApplied(static_cast<long long>(rng.Real(0.05, 0.9) * static_cast<double>(items())), run);
}

void Trial::DrainWithCleanRuns(Findings& findings) {
  for (int attempt = 0; attempt < 12; ++attempt) {
    // A range job's run after a walked pass starts the next pass, which
    // settles every marked row again: the final runs only finish this one.
    if (shape_.range && Pending() == 0 &&
        TryCount("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'") == 0) {
      return;
    }
    Child run = StartBatch("clean-" + std::to_string(++clean_runs_) + ".log");
    auto status = run.WaitFor(120s);
    if (!status) {
      findings.Add("final_run", "a clean batch run did not end within 120 s (" +
                                    run.log().string() + "):\n" + run.LogTail());
      run.Kill();
      return;
    }
    if (*status != 0 && *status != 2 && *status != 3 && *status != 4) {
      findings.Add("final_run", "a clean batch run exited " + std::to_string(*status) + " (" +
                                    run.log().string() + "):\n" + run.LogTail());
    }
    // 4: the killed run's session is still going away; 2: items deferred
    // (an edit lock left by an online user expires, a blocker goes).
    if (*status == 4 || *status == 2) std::this_thread::sleep_for(300ms);
    if (Pending() == 0 &&
        TryCount("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'") == 0) {
      return;
    }
  }
}

}  // namespace coexist::chaos

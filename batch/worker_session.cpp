#include "batch/worker_session.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/log.h"
#include "db/backend_priority.h"
#include "schema/queue_store.h"

namespace coexist::batch {

namespace {

std::string SynchronousCommitName(const std::optional<config::SynchronousCommit>& mode) {
  if (!mode) return "";  // the server's setting
  switch (*mode) {
    case config::SynchronousCommit::kOff:
      return "off";
    case config::SynchronousCommit::kLocal:
      return "local";
    case config::SynchronousCommit::kOn:
      return "on";
  }
  return "";
}

// Linux nice values are per thread: this lowers the calling worker thread
// only, not the process's other threads (control loop, pacer, daemon).
// Never raises it (that needs CAP_SYS_NICE; a unit's Nice= may already be
// lower). Returns the thread's nice value afterwards.
int LowerThreadPriority(int nice) {
  pid_t tid = gettid();
  errno = 0;
  int now = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (errno == 0 && now >= nice) return now;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) != 0) return now;
  return nice;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

void SetUpWorkerSession(pqxx::connection_base& conn, const config::Config& config, int worker) {
  // Says "batch" to the guard trigger for this whole session (see
  // docs/database-api.md), and bounds every statement. synchronous_commit
  // only when configured (else the server's): a chunk's apply and its
  // completion commit together, so a commit lost in a crash loses both.
  pqxx::nontransaction(conn).exec_params(
      "SELECT set_config('coexist.actor', 'batch', false), "
      "set_config('statement_timeout', $1, false), "
      "CASE WHEN $2 <> '' THEN set_config('synchronous_commit', $2, false) END",
      std::to_string(config.database.statement_timeout.count()) + "ms",
      SynchronousCommitName(config.pacing.synchronous_commit));
  if (config.pacing.cpu_nice == 0) return;
  int thread_nice = LowerThreadPriority(config.pacing.cpu_nice);
  if (thread_nice < config.pacing.cpu_nice) {
    spdlog::warn("worker thread priority not lowered worker={} nice={} wanted={}", worker,
                 thread_nice, config.pacing.cpu_nice);
  }
  LowerBackendPriority(conn, config, worker);
}

void LowerBackendPriority(pqxx::connection_base& conn, const config::Config& config, int worker) {
  if (config.pacing.cpu_nice == 0) return;
  try {
    db::Prioritize state;
    {
      pqxx::read_transaction tx(conn);
      state = db::ReadPrioritize(tx);
    }
    if (!state.schema) return;
    int nice = db::LowerOwnBackendPriority(conn, *state.schema, config.pacing.cpu_nice);
    if (nice < config.pacing.cpu_nice) {
      spdlog::warn("backend priority not lowered worker={} nice={} wanted={}", worker, nice,
                   config.pacing.cpu_nice);
    } else {
      spdlog::debug("backend priority lowered worker={} nice={}", worker, nice);
    }
  } catch (const pqxx::sql_error& e) {
    // A right missing on the extension's schema or function: the batch
    // works, at the server's priority.
    spdlog::warn("backend priority not lowered worker={} error={}", worker,
                 log::Value(FirstLine(e.what())));
  }
}

void RecordPriorityUnavailable(pqxx::connection_base& conn, db::QueueStore& queue,
                               const config::Config& config, long long run_id) {
  if (config.pacing.cpu_nice == 0) return;
  pqxx::work tx(conn);
  auto state = db::ReadPrioritize(tx);
  if (state.schema) return;
  nlohmann::json details = {{"cpu_priority", config.pacing.cpu_nice},
                            {"available", state.available},
                            {"fix", db::PrioritizeFix(state)}};
  queue.AddEvent(tx, EventKind::kCpuPriorityUnavailable, run_id, details.dump());
  tx.commit();
}

std::string DescribePrioritize(pqxx::connection_base& conn, const config::Config& config) {
  db::Prioritize state;
  {
    pqxx::read_transaction tx(conn);
    state = db::ReadPrioritize(tx);
  }
  if (state.schema) {
    return "prioritize extension: installed in schema " + *state.schema +
           "; the batch's backends run at nice " + std::to_string(config.pacing.cpu_nice) +
           " (pacing.cpu_priority)";
  }
  return std::string("prioritize extension: not installed (") +
         (state.available ? "available" : "not available") +
         " on the server); the batch's backends run at the server's priority: " +
         db::PrioritizeFix(state);
}

}  // namespace coexist::batch

#include "daemon/run_progress.h"

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <pqxx/pqxx>

#include "db/connection.h"
#include "db/queue_store.h"

namespace coexist::daemon {

RunProgress::RunProgress(std::string conninfo, std::string job, std::chrono::milliseconds interval,
                         std::function<void(const RunCounts&)> publish)
    : conninfo_(std::move(conninfo)),
      job_(std::move(job)),
      interval_(interval),
      publish_(std::move(publish)),
      thread_([this](std::stop_token stop) { Watch(stop); }) {}

RunProgress::~RunProgress() = default;  // jthread: request_stop, then join

void RunProgress::Watch(std::stop_token stop) {
  std::unique_ptr<pqxx::connection> conn;
  std::mutex mutex;
  std::condition_variable_any wake;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(mutex);
      if (wake.wait_for(lock, stop, interval_, [] { return false; })) break;
    }
    if (stop.stop_requested()) break;
    try {
      if (!conn) conn = db::Connect(conninfo_, "coexist-daemon-status");
      pqxx::read_transaction tx(*conn);
      // This host's process: the newest running run of the job with our pid.
      if (auto run = db::RunningRunOf(tx, job_, static_cast<int>(getpid()))) {
        publish_({run->run_id, run->done, run->deferred, run->dead});
      }
    } catch (const std::exception&) {
      conn.reset();  // the run reports a lost database; try again next time
    }
  }
}

}  // namespace coexist::daemon

#include "pacing/latency_probe.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "db/connection.h"
#include "db/failure.h"

namespace coexist::pacing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;

// Rows the probe chooses from: enough that it rarely meets the same row
// twice in a window, few enough to sample cheaply.
constexpr int kSampleRows = 512;

}  // namespace

struct LatencyProbe::Impl {
  LatencyProbeOptions options;
  OnSample on_sample;
  OnUnavailable on_unavailable;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::unique_ptr<pqxx::connection> conn;
  std::vector<std::string> keys;  // the sample, as text (the statement types them)
  std::mt19937_64 random{std::random_device{}()};
  std::thread thread;  // last: starts after everything above exists

  Impl(LatencyProbeOptions o, OnSample sample, OnUnavailable unavailable)
      : options(std::move(o)),
        on_sample(std::move(sample)),
        on_unavailable(std::move(unavailable)),
        thread([this] { Loop(); }) {}

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
      // A probe waiting on a row lock ends within its timeout; cancel it
      // sooner. (libpq's cancel is the one call meant for another thread;
      // `conn` only changes under the mutex.)
      if (conn) {
        try {
          conn->cancel_query();
        } catch (const std::exception&) {
        }
      }
    }
    wake.notify_all();
    thread.join();
  }

  bool Stopping() {
    std::lock_guard lock(mutex);
    return stopping;
  }

  void ResetConnection() {
    std::lock_guard lock(mutex);
    conn.reset();
  }

  // Opens the connection, prepares the probe and samples the keys.
  // nullopt: ready; otherwise why the probe cannot run.
  std::optional<ProbeUnavailable> Open() {
    {
      auto opened = db::Connect(options.conninfo, options.application_name);
      std::lock_guard lock(mutex);
      conn = std::move(opened);
    }
    pqxx::nontransaction tx(*conn);
    auto timeout = std::to_string(options.timeout.count());
    tx.exec0("SET lock_timeout = " + timeout);
    tx.exec0("SET statement_timeout = " + timeout);
    std::string table =
        tx.quote_name(options.target.schema) + "." + tx.quote_name(options.target.table);
    std::string key = tx.quote_name(options.target.key_column);
    // A block sample of about kSampleRows x 8 rows (cheap on a large table);
    // a small or never analyzed table is read from its start.
    std::string sample_sql =
        "SELECT " + key + "::text FROM " + table + " TABLESAMPLE SYSTEM (least(100, 100.0 * " +
        std::to_string(kSampleRows * 8) +
        " / greatest((SELECT reltuples FROM pg_class WHERE oid = '" + tx.esc(table) +
        "'::regclass), 1))) LIMIT " + std::to_string(kSampleRows);
    keys.clear();
    for (const auto& row : tx.exec(sample_sql)) keys.push_back(row[0].c_str());
    if (keys.empty()) {
      for (const auto& row : tx.exec("SELECT " + key + "::text FROM " + table + " LIMIT " +
                                     std::to_string(kSampleRows))) {
        keys.push_back(row[0].c_str());
      }
    }
    if (keys.empty()) {
      return ProbeUnavailable{"the target " + options.target.Name() + " has no rows to probe",
                              "fill the table, or set pacing.online_latency.baseline and let "
                              "the batch start."};
    }
    std::string lock = options.kind == config::LatencyProbeKind::kLock ? " FOR NO KEY UPDATE" : "";
    conn->prepare("probe", "SELECT 1 FROM " + table + " WHERE " + key + " = $1" + lock);
    return std::nullopt;
  }

  microseconds ProbeOnce() {
    const std::string& key = keys[random() % keys.size()];
    auto start = Clock::now();
    try {
      pqxx::work tx(*conn);
      tx.exec_prepared("probe", key);
      tx.abort();
    } catch (const pqxx::sql_error& e) {
      // A probe that waited out its timeout waited as long as online would
      // have; anything else is not a latency.
      if (db::Classify(e) != db::FailureKind::kRetryable) throw;
    }
    return duration_cast<microseconds>(Clock::now() - start);
  }

  void Unavailable(const ProbeUnavailable& why) {
    spdlog::warn("latency probe unavailable, pacing by the count signals only reason={} fix={}",
                 log::Value(why.reason), log::Value(why.fix));
    on_unavailable(why);
  }

  void Loop() {
    auto next = Clock::now();
    for (;;) {
      {
        std::unique_lock lock(mutex);
        if (wake.wait_until(lock, next, [this] { return stopping; })) return;
      }
      next += options.interval;
      if (next < Clock::now()) next = Clock::now();  // never catch up in a burst
      try {
        if (!conn) {
          if (auto why = Open()) return Unavailable(*why);
        }
        auto latency = ProbeOnce();
        if (Stopping()) return;  // cancelled by the destructor: not a latency
        on_sample(latency);
      } catch (const pqxx::broken_connection&) {
        ResetConnection();  // reopened by the next probe
      } catch (const pqxx::sql_error& e) {
        if (Stopping()) return;
        if (db::Classify(e) == db::FailureKind::kConfiguration) {
          std::string message = e.what();
          message = message.substr(0, message.find('\n'));  // libpq's LINE/caret lines
          bool privilege = db::SqlStateOf(e) == "42501";
          return Unavailable(
              {"the probe's statement failed: " + message,
               privilege ? "grant the batch's role SELECT and UPDATE on " + options.target.Name() +
                               " (the probe reads one row FOR NO KEY UPDATE), or set "
                               "pacing.online_latency.probe: read (SELECT only)."
                         : "check target: in the configuration (coexist config check)."});
        }
        ResetConnection();
      } catch (const TempFailError&) {
        ResetConnection();  // the server is away; the batch notices on its own
      } catch (const Error& e) {
        return Unavailable({e.what(), e.hint()});
      } catch (const std::exception& e) {
        spdlog::warn("latency probe failed error={}", log::Value(e.what()));
        ResetConnection();
      }
    }
  }
};

LatencyProbe::LatencyProbe(LatencyProbeOptions options, OnSample on_sample,
                           OnUnavailable on_unavailable)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_sample),
                                   std::move(on_unavailable))) {}

LatencyProbe::~LatencyProbe() = default;

}  // namespace coexist::pacing

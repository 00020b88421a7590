#include "pacing/session_sampler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/log.h"
#include "db/connection.h"
#include "db/failure.h"

namespace coexist::pacing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

}  // namespace

struct SessionSampler::Impl {
  SessionSamplerOptions options;
  OnPoll on_poll;
  OnUnavailable on_unavailable;
  std::atomic<long long> censor_after_us{0};
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::unique_ptr<pqxx::connection> conn;
  // Each session's latest statement (query_start in server microseconds):
  // whether it was counted, and its age when last seen active (-1: never).
  struct Tracked {
    long long query_start = 0;
    bool counted = false;
    long long seen_age = -1;
    std::string application_name;
  };
  std::unordered_map<int, Tracked> tracked;
  // now() of the previous read; 0 before the first (which counts nothing:
  // the statements it finds idle ended at any time before).
  long long previous_read_us = 0;
  std::thread thread;  // last: starts after everything above exists

  Impl(SessionSamplerOptions o, OnPoll poll, OnUnavailable unavailable)
      : options(std::move(o)),
        on_poll(std::move(poll)),
        on_unavailable(std::move(unavailable)),
        thread([this] { Loop(); }) {}

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
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
    tracked.clear();
    previous_read_us = 0;
  }

  // Opens the connection, checks that other roles' sessions are visible and
  // prepares the read. nullopt: ready; otherwise why it cannot run.
  std::optional<ProbeUnavailable> Open() {
    {
      auto opened = db::Connect(options.conninfo, options.application_name);
      std::lock_guard lock(mutex);
      conn = std::move(opened);
    }
    pqxx::nontransaction tx(*conn);
    auto role = tx.exec1(
        "SELECT current_user, rolsuper OR pg_has_role(current_user, 'pg_read_all_stats', "
        "'MEMBER') FROM pg_roles WHERE rolname = current_user");
    if (!role[1].as<bool>()) {
      std::string name = role[0].as<std::string>();
      return ProbeUnavailable{
          "the role " + name + " cannot see other roles' statements in pg_stat_activity",
          "GRANT pg_read_all_stats TO " + tx.quote_name(name) +
              "; or set pacing.online_latency.signal: probe."};
    }
    std::string mine;
    for (const auto& prefix : options.exclude_prefixes) {
      mine += " AND left(a.application_name, " + std::to_string(prefix.size()) + ") <> " +
              tx.quote(prefix);
    }
    // One row even when no session is there, for the read's now().
    conn->prepare("sessions",
                  "SELECT a.pid, a.application_name, a.state,"
                  " (extract(epoch FROM a.query_start) * 1000000)::bigint,"
                  " (extract(epoch FROM a.state_change) * 1000000)::bigint, snap.now_us"
                  " FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us) snap"
                  " LEFT JOIN pg_stat_activity a ON a.datname = current_database()"
                  " AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()"
                  " AND a.query_start IS NOT NULL AND a.state_change IS NOT NULL" +
                      mine);
    return std::nullopt;
  }

  std::vector<SessionSample> ReadOnce() {
    pqxx::nontransaction tx(*conn);
    auto rows = tx.exec_prepared("sessions");
    std::vector<SessionSample> samples;
    long long censor_after = censor_after_us.load();
    long long now = rows[0][5].as<long long>();
    bool first = previous_read_us == 0;
    std::unordered_map<int, Tracked> next;  // `tracked` after this read
    // A statement seen active and gone by now ended between two reads:
    // it took at least the age it was last seen at.
    auto ended_unseen = [&](int pid, const Tracked& t) {
      if (!t.counted && t.seen_age >= 0) {
        samples.push_back({pid, t.application_name, microseconds(t.seen_age), true});
      }
    };
    std::unordered_set<int> present;
    for (const auto& row : rows) {
      if (row[0].is_null()) continue;  // no session: the row carries now() only
      int pid = row[0].as<int>();
      std::string name = row[1].as<std::string>();
      std::string state = row[2].is_null() ? "" : row[2].as<std::string>();
      long long query_start = row[3].as<long long>();
      long long state_change = row[4].as<long long>();
      bool active = state == "active";
      bool idle = state.starts_with("idle");
      Tracked t{.query_start = query_start, .application_name = name};
      auto prior = tracked.find(pid);
      if (prior != tracked.end() && prior->second.query_start == query_start) {
        t = prior->second;
      } else {
        if (prior != tracked.end()) ended_unseen(pid, prior->second);
        // Idle at the first read: it may have ended at any time before.
        // Later: it ended since the previous read, its latency is new.
        if (idle && (first || state_change <= previous_read_us)) t.counted = true;
      }
      if (!t.counted && active) {
        // now() is the read's start: a statement that began during the
        // read is younger than that.
        t.seen_age = std::max(0LL, now - query_start);
        if (!first && censor_after > 0 && t.seen_age >= censor_after) {
          samples.push_back({pid, name, microseconds(t.seen_age), true});
          t.counted = true;
        }
      } else if (!t.counted && idle) {
        samples.push_back({pid, name, microseconds(state_change - query_start), false});
        t.counted = true;
      }
      if (active || idle) next[pid] = t;
      present.insert(pid);
    }
    for (const auto& [pid, t] : tracked) {
      if (!present.contains(pid)) ended_unseen(pid, t);  // the session is gone
    }
    tracked = std::move(next);  // sessions that ended are forgotten
    previous_read_us = now;
    return samples;
  }

  void Unavailable(const ProbeUnavailable& why) {
    spdlog::warn("session sampler unavailable reason={} fix={}", log::Value(why.reason),
                 log::Value(why.fix));
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
        auto samples = ReadOnce();
        if (Stopping()) return;
        on_poll(samples);
      } catch (const pqxx::broken_connection&) {
        ResetConnection();  // reopened by the next read
      } catch (const pqxx::sql_error& e) {
        if (Stopping()) return;
        if (db::Classify(e) == db::FailureKind::kConfiguration) {
          std::string message = e.what();
          return Unavailable(
              {"reading pg_stat_activity failed: " + message.substr(0, message.find('\n')),
               "set pacing.online_latency.signal: probe."});
        }
        ResetConnection();
      } catch (const TempFailError&) {
        ResetConnection();  // the server is away; the batch notices on its own
      } catch (const Error& e) {
        return Unavailable({e.what(), e.hint()});
      } catch (const std::exception& e) {
        spdlog::warn("session sampler failed error={}", log::Value(e.what()));
        ResetConnection();
      }
    }
  }
};

SessionSampler::SessionSampler(SessionSamplerOptions options, OnPoll on_poll,
                               OnUnavailable on_unavailable)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_poll),
                                   std::move(on_unavailable))) {}

SessionSampler::~SessionSampler() = default;

void SessionSampler::Stop() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
}

void SessionSampler::SetCensorAfter(microseconds after) {
  impl_->censor_after_us.store(after.count());
}

}  // namespace coexist::pacing

#include "dashboard/server.h"

#include <CivetServer.h>

#include <condition_variable>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>
#include <stop_token>
#include <string_view>
#include <thread>
#include <vector>

#include "common/embedded_file.h"
#include "common/error.h"
#include "dashboard/history.h"
#include "dashboard/state.h"
#include "db/connection.h"
#include "schema/job_pauses.h"

namespace coexist::dashboard {
namespace page_html {
const std::vector<EmbeddedFile>& EmbeddedFiles();
}

namespace {

void Reply(mg_connection* conn, int status, std::string_view type, std::string_view body) {
  const char* reason = status == 200   ? "OK"
                       : status == 400 ? "Bad Request"
                       : status == 403 ? "Forbidden"
                       : status == 404 ? "Not Found"
                                       : "Service Unavailable";
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            "Connection: close\r\n\r\n",
            status, reason, static_cast<int>(type.size()), type.data(), body.size());
  mg_write(conn, body.data(), body.size());
}

void ReplyJson(mg_connection* conn, int status, const nlohmann::json& body) {
  Reply(conn, status, "application/json", body.dump());
}

std::string_view Page() {
  for (const auto& file : page_html::EmbeddedFiles()) {
    if (file.name == "page.html") return file.text;
  }
  return "";
}

// Whether `a` equals `b`, taking as long whatever prefix they share.
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return differ == 0;
}

std::string RequestBody(mg_connection* conn) {
  const auto* info = mg_get_request_info(conn);
  long long length = info->content_length;
  if (length <= 0 || length > 64 * 1024) return "";
  std::string body(static_cast<size_t>(length), '\0');
  size_t got = 0;
  while (got < body.size()) {
    int n = mg_read(conn, body.data() + got, body.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  body.resize(got);
  return body;
}

class PageHandler : public CivetHandler {
 public:
  bool handleGet(CivetServer*, mg_connection* conn) override {
    Reply(conn, 200, "text/html; charset=utf-8", Page());
    return true;
  }
};

class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::function<std::string()> metrics) : metrics_(std::move(metrics)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    Reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_());
    return true;
  }

 private:
  std::function<std::string()> metrics_;
};

// Every kSampleEvery, each job's online latency and rate into the
// history, on a connection of its own (opened again after a failure: a
// sample that cannot be read is skipped, the chart shows the gap).
class HistorySampler {
 public:
  static constexpr std::chrono::seconds kSampleEvery{2};

  HistorySampler(std::string conninfo, History& history)
      : thread_([this, conninfo = std::move(conninfo), &history](std::stop_token stop) {
          Loop(stop, conninfo, history);
        }) {}

 private:
  void Loop(std::stop_token stop, const std::string& conninfo, History& history) {
    std::unique_ptr<pqxx::connection> conn;
    while (!stop.stop_requested()) {
      try {
        if (!conn) {
          conn = db::Connect(conninfo, "coexist-dashboard-history");
          // A stop waits for the sample in flight: bound it.
          pqxx::nontransaction(*conn).exec("SET statement_timeout = '5s'");
        }
        std::vector<History::Sample> samples;
        for (const auto& job : db::ListJobs(*conn)) {
          samples.push_back({job.job, job.online_latency_ratio, job.Rate()});
        }
        history.Add(History::Clock::now(), samples);
      } catch (const std::exception&) {
        conn.reset();  // /api/state reports the database's error to the page
      }
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, stop, kSampleEvery, [] { return false; });
    }
  }

  std::mutex mutex_;
  std::condition_variable_any wake_;
  // Last: its destructor asks the loop to stop (the wait wakes at once) and
  // joins it before the rest goes.
  std::jthread thread_;
};

class StateHandler : public CivetHandler {
 public:
  StateHandler(std::string conninfo, bool controls, const History& history)
      : conninfo_(std::move(conninfo)), controls_(controls), history_(history) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    try {
      auto db = db::Connect(conninfo_, "coexist-dashboard");
      auto state = DashboardState(*db);
      state["controls"] = controls_;
      state["history"] = history_.Json(History::Clock::now());
      ReplyJson(conn, 200, state);
    } catch (const std::exception& e) {
      // libpq's messages name the server, never the password.
      ReplyJson(conn, 503, {{"error", e.what()}});
    }
    return true;
  }

 private:
  std::string conninfo_;
  bool controls_;
  const History& history_;
};

class PauseHandler : public CivetHandler {
 public:
  PauseHandler(std::string conninfo, std::optional<std::string> token, bool pause)
      : conninfo_(std::move(conninfo)), token_(std::move(token)), pause_(pause) {}
  bool handlePost(CivetServer*, mg_connection* conn) override {
    if (!token_) {
      ReplyJson(conn, 404, {{"error", "the dashboard was started without a control token"}});
      return true;
    }
    const char* given = CivetServer::getHeader(conn, "X-Coexist-Token");
    std::string_view offered = given != nullptr ? given : "";
    if (!SameSecret(offered, *token_)) {
      ReplyJson(conn, 403, {{"error", "wrong or missing control token: nothing was changed"}});
      return true;
    }
    auto body = nlohmann::json::parse(RequestBody(conn), nullptr, false);
    if (!body.is_object() || !body["job"].is_string() ||
        (pause_ &&
         (!body["reason"].is_string() ||
          body["reason"].get<std::string>().find_first_not_of(" \t") == std::string::npos))) {
      ReplyJson(conn, 400,
                {{"error", pause_ ? "send {\"job\": ..., \"reason\": ...}: a pause says why"
                                  : "send {\"job\": ...}"}});
      return true;
    }
    std::string job = body["job"];
    std::string actor = std::string("dashboard@") + mg_get_request_info(conn)->remote_addr;
    try {
      auto db = db::Connect(conninfo_, "coexist-dashboard");
      auto change = pause_ ? db::PauseJob(*db, job, actor, body["reason"].get<std::string>())
                           : db::ResumeJob(*db, job, actor);
      if (change == db::PauseChange::kUnknownJob) {
        ReplyJson(conn, 404, {{"error", "job '" + job + "' is unknown here: nothing was changed"}});
      } else {
        ReplyJson(conn, 200, {{"job", job}, {"changed", change == db::PauseChange::kChanged}});
      }
    } catch (const std::exception& e) {
      ReplyJson(conn, 503, {{"error", e.what()}});
    }
    return true;
  }

 private:
  std::string conninfo_;
  std::optional<std::string> token_;
  bool pause_;
};

}  // namespace

struct DashboardServer::Impl {
  History history;
  PageHandler page;
  StateHandler state;
  PauseHandler pause, resume;
  MetricsHandler metrics;
  HistorySampler sampler;
  std::unique_ptr<CivetServer> server;  // last: closed before the handlers go

  explicit Impl(const DashboardOptions& o)
      : state(o.conninfo, o.control_token.has_value(), history),
        pause(o.conninfo, o.control_token, true),
        resume(o.conninfo, o.control_token, false),
        metrics(o.metrics),
        sampler(o.conninfo, history) {}
};

std::string ReadControlToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigurationError("cannot read the dashboard's control token file " + path,
                             "write a long random token into it (e.g. `openssl rand -hex 32 > "
                             "FILE`, mode 0600, readable by coexist's user).");
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.size() < 16) {
    throw ConfigurationError(
        "the control token in " + path + " is shorter than 16 characters",
        "a token guards pause and resume of every job: use a long random one, e.g. "
        "`openssl rand -hex 32 > FILE`.");
  }
  return token;
}

DashboardServer::DashboardServer(const DashboardOptions& options)
    : impl_(std::make_unique<Impl>(options)) {
  try {
    impl_->server = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", options.listen, "num_threads", "4", "request_timeout_ms", "10000"});
  } catch (const std::exception& e) {
    throw UnavailableError("cannot serve the dashboard on " + options.listen + ": " + e.what(),
                           "is the port taken? choose another with --listen.");
  }
  impl_->server->addHandler("/api/state", impl_->state);
  impl_->server->addHandler("/api/pause", impl_->pause);
  impl_->server->addHandler("/api/resume", impl_->resume);
  if (options.metrics) impl_->server->addHandler("/metrics", impl_->metrics);
  impl_->server->addHandler("/", impl_->page);
}

DashboardServer::~DashboardServer() {
  if (impl_->server) impl_->server->close();
}

int DashboardServer::port() const {
  auto ports = impl_->server->getListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace coexist::dashboard

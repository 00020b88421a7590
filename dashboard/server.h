#pragma once

// The live dashboard (docs/operations.md, "The dashboard"): a read-only web
// page of every job's progress and ETA, the recent runs and events, and the
// online latency of the paced runs over time, refreshed every 2 s.
//
//   GET  /            the page (page.html, compiled in)
//   GET  /metrics     DashboardOptions::metrics' text, when it is set
//   GET  /api/state   dashboard::DashboardState as JSON, and "history": the
//                     last ten minutes of each job's online latency and
//                     rate (dashboard/history.h); 503 {"error"} when the
//                     database cannot be read
//   POST /api/pause   {"job", "reason"}  only with a control token: the
//   POST /api/resume  {"job"}            request's X-Coexist-Token header
//                     must equal it (403 otherwise, nothing changed); the
//                     pause is `coexist jobs pause`'s, audited with the
//                     actor "dashboard@ADDRESS". Without a token both
//                     answer 404 and the page shows no buttons.
//
// A custom header is what a cross-site form cannot send, so a page of
// another origin cannot pause a job with an operator's browser. The token is
// never logged or echoed.
//
// Each request opens its own connection (a few a minute per open page);
// a thread of the server samples the history every 2 s on one connection
// of its own, open or not a page, for as long as the server runs.
// Thread safety: CivetWeb serves requests on its own threads; the object
// itself is used by one thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace coexist::dashboard {

struct DashboardOptions {
  std::string listen = "127.0.0.1:9190";     // host:port; port 0: any free one
  std::string conninfo;                      // the database it reads
  std::optional<std::string> control_token;  // the buttons' token; nullopt: read-only
  // When set, GET /metrics answers its text (the daemon's Prometheus
  // exposition), so the daemon serves both on its one port.
  std::function<std::string()> metrics;
};

// The token in `path`, its trailing newline dropped. Throws
// ConfigurationError (78) when the file cannot be read or the token is
// shorter than 16 characters; the message never holds the token.
std::string ReadControlToken(const std::string& path);

class DashboardServer {
 public:
  // Serves until destroyed. Throws coexist::Error (EX_UNAVAILABLE) when the
  // address cannot be bound.
  explicit DashboardServer(const DashboardOptions& options);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::dashboard

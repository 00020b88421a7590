// coexist dashboard (dashboard/server.h) as an operator opens it: the page
// in headless Chromium shows the jobs' figures the database holds, a
// screenshot is kept (tests/artifacts/dashboard.png under the build folder),
// and pause and resume work only with the control token, audited.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "dashboard/history.h"
#include "tests/support/batch_process.h"
#include "tests/support/chromium.h"
#include "tests/support/database_test.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kToken = "a-long-random-token-for-the-test";

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DashboardTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    dir_ = fs::temp_directory_path() / ("coexist-dashboard-" + database_name());
    fs::create_directories(dir_);
    // nightly: 30 queued, 10 deferred, 8 done (5 in the queue, 3 in a done
    // chunk), 2 dead; one run working, 60 items done in 30 s.
    QueryValue(
        "INSERT INTO coexist.queue (job, record_key, state, done_at)"
        " SELECT 'nightly', g, CASE WHEN g <= 30 THEN 'queued' WHEN g <= 40 THEN 'deferred'"
        "  WHEN g <= 45 THEN 'done' ELSE 'dead' END::coexist.item_state,"
        "  CASE WHEN g BETWEEN 41 AND 45 THEN now() END FROM generate_series(1, 47) g");
    QueryValue(
        "INSERT INTO coexist.done_chunks (job, done_at, item_ids, record_keys, item_keys, "
        "attempts, payloads) VALUES ('nightly', now(), '{101,102,103}', '{1,2,3}', "
        "'{NULL,NULL,NULL}', '{1,1,1}', ARRAY['{}','{}','{}']::jsonb[])");
    QueryValue(
        "INSERT INTO coexist.runs (job, policy, host, pid, started_at, done, details) VALUES"
        " ('nightly', 'skip_locked', 'db-host-a', 4242, clock_timestamp() - interval '30 s', 60,"
        "  '{\"online_latency_ratio\": 1.31, \"online_latency_objective\": 1.5,"
        "    \"pacing\": {\"state\": \"throttled\", \"reason\": \"lock_waiters\","
        "      \"chunk_size\": 120, \"chunk_time_ms\": 250, \"adaptive\": true,"
        "      \"online_latency\": {\"state\": \"over\", \"duty\": 0.4,"
        "        \"chunk_scale\": 0.5, \"ratio\": 1.31, \"objective\": 1.5}}}')");
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      EXPECT_EQ(testing::WaitForExitWithin(pid_, 10s), 0) << "SIGTERM ends it cleanly";
    }
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  // Starts `coexist dashboard` on a free port; returns its base URL.
  std::string Start(bool with_token) {
    std::vector<std::string> argv = {COEXIST_BINARY, "--database-url", conninfo(),
                                     "dashboard",    "--listen",       "127.0.0.1:0"};
    if (with_token) {
      std::ofstream(dir_ / "token") << kToken << "\n";
      argv.insert(argv.end(), {"--control-token-file", (dir_ / "token").string()});
    }
    log_ = dir_ / "dashboard.log";
    pid_ = Spawn({.argv = argv, .output_path = log_.string(), .parent_death_signal = SIGKILL});
    std::smatch match;
    std::string text;
    const std::regex started("dashboard: (http://127\\.0\\.0\\.1:[0-9]+/)");
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          text = Read(log_);
          return std::regex_search(text, match, started);
        },
        20s))
        << text;
    return match.size() > 1 ? match[1].str() : "";
  }

  // curl, as a script would call it: the status code, then the body.
  CommandResult Curl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/curl", "-s", "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  static int StatusOf(const CommandResult& r) {
    return std::stoi(r.output.substr(r.output.rfind('\n') + 1));
  }

  std::string DumpDom(const std::string& url) {
    auto argv = testing::ChromiumCommand(dir_);
    argv.insert(argv.end(), {"--virtual-time-budget=4000", "--dump-dom", url});
    auto dom = RunCommand(argv);
    EXPECT_EQ(dom.status, 0) << dom.output;
    return dom.output;
  }

  fs::path dir_, log_;
  pid_t pid_ = -1;
};

TEST_F(DashboardTest, ThePageShowsTheDatabasesFiguresAndAScreenshotIsKept) {
  ASSERT_TRUE(fs::exists(testing::kChromium))
      << "Chromium is missing: run scripts/setup.sh (Debian package chromium)";
  auto url = Start(false);
  ASSERT_FALSE(url.empty());

  auto state = Curl({url + "api/state"});
  ASSERT_EQ(StatusOf(state), 200) << state.output;
  auto json = nlohmann::json::parse(state.output.substr(0, state.output.rfind('\n')));
  EXPECT_EQ(json["controls"], false);
  ASSERT_EQ(json["jobs"].size(), 1u) << json.dump();
  EXPECT_EQ(json["jobs"][0]["done"], 8);
  EXPECT_EQ(json["runs"][0]["host"], "db-host-a");

  // The server samples the history every 2 s, whether a page is open or
  // not: a page opened now gets the seconds before it.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto r = Curl({url + "api/state"});
        json = nlohmann::json::parse(r.output.substr(0, r.output.rfind('\n')));
        return json["history"]["nightly"].size() >= 2;
      },
      20s))
      << json.dump();
  const auto& series = json["history"]["nightly"];
  EXPECT_GT(series[0][0].get<double>(), series[1][0].get<double>()) << "oldest first, as ages";
  EXPECT_GE(series[0][0].get<double>(), 1.5) << series.dump();
  EXPECT_EQ(series[0][1], 1.31) << "the latency ratio its run measured";
  EXPECT_GT(series[0][2].get<double>(), 1.0) << "its rate (60 items in 30 s)";
  EXPECT_LT(series[0][2].get<double>(), 2.5) << series.dump();

  auto page = DumpDom(url);
  // The jobs row as the database has it: 8 done of 50, 2 dead, a rate of
  // about 2 items/s (60 in 30 s), an ETA, online latency 1.31x.
  std::smatch row;
  ASSERT_TRUE(std::regex_search(page, row, std::regex("<tr data-job=\"nightly\">(.*?)</tr>")))
      << page;
  const std::string jobs_row = row[1];
  EXPECT_NE(jobs_row.find("<td class=\"n done\">8</td><td class=\"n all\">50</td>"),
            std::string::npos)
      << jobs_row;
  EXPECT_TRUE(std::regex_search(jobs_row, std::regex("<td class=\"n rate\">[12]\\.[0-9]</td>")))
      << jobs_row;
  EXPECT_TRUE(std::regex_search(jobs_row, std::regex("<td class=\"n eta\">[0-9]+ s</td>")))
      << jobs_row;
  EXPECT_NE(jobs_row.find("<td class=\"n latency\">1.31x of 1.50x</td>"), std::string::npos)
      << jobs_row;
  EXPECT_NE(jobs_row.find("running (1), 1 throttled, duty 0.40"), std::string::npos) << jobs_row;
  EXPECT_EQ(jobs_row.find("<button"), std::string::npos) << "read-only: no buttons";
  EXPECT_NE(page.find("db-host-a:4242"), std::string::npos) << "the runs table";
  EXPECT_NE(page.find("<td class=\"pacing\">throttled: lock_waiters; chunks of 120 (250 ms); "
                      "latency over, duty 0.40, chunks x0.50</td>"),
            std::string::npos)
      << "the run's pacer, as its heartbeat wrote it";
  // Both charts draw the job's line from the server's history.
  // Each with its unit, in which its scale's top value is labelled.
  const std::pair<std::string, std::string> charts[] = {{"latency", "x"}, {"rate", "/s"}};
  for (const auto& [chart, unit] : charts) {
    std::smatch svg;
    ASSERT_TRUE(
        std::regex_search(page, svg, std::regex("<svg id=\"" + chart + "\"[^>]*>(.*?)</svg>")))
        << chart;
    EXPECT_NE(svg[1].str().find("<polyline fill=\"none\" stroke=\"#37a\" data-job=\"nightly\""),
              std::string::npos)
        << chart << ": " << svg[1];
    EXPECT_TRUE(std::regex_search(
        svg[1].str(), std::regex("<text class=\"axis\"[^>]*>[0-9.]+" + unit + "</text>")))
        << chart << ": " << svg[1];
    EXPECT_NE(svg[1].str().find(">10 min ago</text>"), std::string::npos) << chart;
    EXPECT_NE(svg[1].str().find(">now</text>"), std::string::npos) << chart;
  }
  EXPECT_NE(page.find(">objective 1.50x</text>"), std::string::npos) << "the objective, labelled";
  EXPECT_NE(page.find("stroke=\"#c33\""), std::string::npos) << "its objective line";

  // The screenshot, kept for a person to look at.
  fs::create_directories("artifacts");
  auto shot = testing::ChromiumCommand(dir_);
  shot.insert(shot.end(),
              {"--virtual-time-budget=4000", "--window-size=1280,900",
               "--screenshot=" + fs::absolute("artifacts/dashboard.png").string(), url});
  auto taken = RunCommand(shot);
  EXPECT_EQ(taken.status, 0) << taken.output;
  EXPECT_GT(fs::file_size("artifacts/dashboard.png"), 10'000u);
  std::printf("dashboard screenshot: %s\n", fs::absolute("artifacts/dashboard.png").c_str());

  // Read-only: pause and resume are not there.
  auto pause = Curl({"-X", "POST", "-H", std::string("X-Coexist-Token: ") + kToken, "-d",
                     R"({"job": "nightly", "reason": "x"})", url + "api/pause"});
  EXPECT_EQ(StatusOf(pause), 404) << pause.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
}

TEST_F(DashboardTest, PauseAndResumeNeedTheTokenAndAreAudited) {
  auto url = Start(true);
  ASSERT_FALSE(url.empty());
  EXPECT_EQ(Read(log_).find(kToken), std::string::npos) << "the token is never printed";
  const std::string body = R"({"job": "nightly", "reason": "deploy window"})";
  std::string same_length(kToken);
  same_length.back() = 'X';
  for (const std::string& token :
       {std::string(""), std::string("X-Coexist-Token: wrong"),
        std::string("X-Coexist-Token: ") + kToken + "x", "X-Coexist-Token: " + same_length}) {
    std::vector<std::string> args = {"-X", "POST", "-d", body, url + "api/pause"};
    if (!token.empty()) args.insert(args.begin(), {"-H", token});
    auto refused = Curl(args);
    EXPECT_EQ(StatusOf(refused), 403) << token << refused.output;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
  const std::string header = std::string("X-Coexist-Token: ") + kToken;
  auto no_reason =
      Curl({"-X", "POST", "-H", header, "-d", R"({"job": "nightly"})", url + "api/pause"});
  EXPECT_EQ(StatusOf(no_reason), 400) << no_reason.output;
  auto unknown = Curl(
      {"-X", "POST", "-H", header, "-d", R"({"job": "nope", "reason": "x"})", url + "api/pause"});
  EXPECT_EQ(StatusOf(unknown), 404) << unknown.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);

  auto paused = Curl({"-X", "POST", "-H", header, "-d", body, url + "api/pause"});
  EXPECT_EQ(StatusOf(paused), 200) << paused.output;
  EXPECT_EQ(QueryValue("SELECT paused_by || ' ' || reason FROM coexist.job_pauses"),
            "dashboard@127.0.0.1 deploy window");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'job_paused'"
                  " AND actor = 'dashboard@127.0.0.1'"),
            1);
  if (fs::exists(testing::kChromium)) {
    auto page = DumpDom(url);
    EXPECT_NE(page.find("paused by dashboard@127.0.0.1: deploy window"), std::string::npos) << page;
    EXPECT_NE(page.find("<button>resume</button>"), std::string::npos) << page;
  }
  auto resumed =
      Curl({"-X", "POST", "-H", header, "-d", R"({"job": "nightly"})", url + "api/resume"});
  EXPECT_EQ(StatusOf(resumed), 200) << resumed.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
}

// The history itself (dashboard/history.h), its clock given.
TEST(DashboardHistory, KeepsTheLastSpanOfEachJobAndAnswersAges) {
  using Clock = dashboard::History::Clock;
  dashboard::History history(10s);
  const Clock::time_point t0{};
  history.Add(t0, {{"a", 1.2, 50.0}, {"idle", std::nullopt, std::nullopt}});
  history.Add(t0 + 4s, {{"a", std::nullopt, 40.0}, {"b", 1.5, std::nullopt}});
  EXPECT_EQ(history.Json(t0 + 5s).dump(),
            R"({"a":[[5.0,1.2,50.0],[1.0,null,40.0]],"b":[[1.0,1.5,null]]})")
      << "a job with neither figure is not kept";
  // 11 s after t0 the first sample is older than the span; 15 s after t0+4s
  // a and b's last points are, and the jobs go with them.
  history.Add(t0 + 11s, {{"b", 1.1, 3.0}});
  EXPECT_EQ(history.Json(t0 + 11s).dump(),
            R"({"a":[[7.0,null,40.0]],"b":[[7.0,1.5,null],[0.0,1.1,3.0]]})");
  history.Add(t0 + 22s, {});
  EXPECT_EQ(history.Json(t0 + 22s).dump(), "{}");
}

}  // namespace
}  // namespace coexist

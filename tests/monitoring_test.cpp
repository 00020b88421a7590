// deploy/prometheus and deploy/grafana against the metrics coexist exports:
// the alert rules parse (promtool check rules), each alert fires on the
// series that should fire it and stays quiet beside a healthy job (promtool
// test rules, deploy/prometheus/coexist-alerts.test.yml), and every
// coexist_* metric the rules and the dashboard name is one that
// metrics/run_metrics.cpp, metrics/job_metrics.cpp or daemon/daemon_metrics.cpp registers, so a
// renamed metric cannot leave an alert that never fires.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "common/subprocess.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPromtool = "/usr/bin/promtool";

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path Source(const std::string& relative) { return fs::path(COEXIST_SOURCE_DIR) / relative; }

// The coexist_* names in `text` that match `pattern`'s first group.
std::set<std::string> Names(const std::string& text, const std::regex& pattern) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

// What coexist registers: the quoted names in its two exporters.
std::set<std::string> Exported() {
  std::set<std::string> out;
  for (const char* file :
       {"metrics/run_metrics.cpp", "metrics/job_metrics.cpp", "daemon/daemon_metrics.cpp"}) {
    auto names = Names(Read(Source(file)), std::regex("\"(coexist_[a-z_]+)\""));
    out.insert(names.begin(), names.end());
  }
  return out;
}

TEST(Monitoring, TheAlertRulesParseAndFireWhenTheyShould) {
  // scripts/setup.sh installs Debian's prometheus, so its absence is a broken setup.
  ASSERT_TRUE(fs::exists(kPromtool))
      << "promtool is missing: run scripts/setup.sh (Debian package prometheus)";
  auto check =
      RunCommand({kPromtool, "check", "rules", Source("deploy/prometheus/coexist-alerts.yml")});
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find("SUCCESS: 11 rules found"), std::string::npos) << check.output;
  auto test =
      RunCommand({kPromtool, "test", "rules", Source("deploy/prometheus/coexist-alerts.test.yml")});
  EXPECT_EQ(test.status, 0) << test.output;
}

TEST(Monitoring, EveryAlertIsUnitTested) {
  auto alerts = Names(Read(Source("deploy/prometheus/coexist-alerts.yml")),
                      std::regex("- alert: ([A-Za-z]+)"));
  auto tested = Names(Read(Source("deploy/prometheus/coexist-alerts.test.yml")),
                      std::regex("alertname: ([A-Za-z]+)"));
  EXPECT_EQ(alerts.size(), 11u);
  EXPECT_EQ(alerts, tested);
}

TEST(Monitoring, TheRulesAndTheDashboardNameOnlyExportedMetrics) {
  const auto exported = Exported();
  ASSERT_GE(exported.size(), 20u) << "the exporters' names were not found";
  // A whole name: not the "coexist_batch_*" a comment names a family by.
  const std::regex metric("(coexist_[a-z_]*[a-z])(?![a-z_*])");
  auto in_rules = Names(Read(Source("deploy/prometheus/coexist-alerts.yml")), metric);
  EXPECT_GE(in_rules.size(), 7u);
  for (const auto& name : in_rules) EXPECT_TRUE(exported.count(name)) << name;

  auto dashboard = nlohmann::json::parse(Read(Source("deploy/grafana/coexist.json")));
  ASSERT_TRUE(dashboard["panels"].is_array());
  EXPECT_GE(dashboard["panels"].size(), 8u);
  for (const auto& panel : dashboard["panels"]) {
    ASSERT_FALSE(panel["targets"].empty()) << panel["title"];
    for (const auto& target : panel["targets"]) {
      auto names = Names(target["expr"].get<std::string>(), metric);
      EXPECT_FALSE(names.empty()) << target["expr"];
      for (const auto& name : names) EXPECT_TRUE(exported.count(name)) << panel["title"] << name;
    }
  }
}

}  // namespace
}  // namespace coexist

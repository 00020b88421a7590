// The metrics: and daemon: sections: defaults, accepted values, and errors
// that name file:line:column (exact text, one bad file per case).

#include <gtest/gtest.h>

#include "config/config.h"
#include "config/config_error.h"

namespace coexist::config {
namespace {

using namespace std::chrono_literals;

TEST(OpsConfig, DefaultsAreOff) {
  Config config = LoadString("", "empty.yaml");
  EXPECT_EQ(config.metrics.textfile, "");
  EXPECT_EQ(config.metrics.listen, "");
  EXPECT_FALSE(config.metrics.allow_remote);
  EXPECT_EQ(config.daemon.poll_interval, 30s);
  EXPECT_EQ(config.daemon.reconnect_initial, 1s);
  EXPECT_EQ(config.daemon.reconnect_max, 60s);
}

TEST(OpsConfig, ReadsEveryKey) {
  Config config = LoadString(R"(
metrics:
  textfile: /var/lib/prometheus/node-exporter/coexist.prom
  listen: "[::1]:9187"
daemon:
  poll_interval: 5s
  reconnect_initial: 250ms
  reconnect_max: 2m
)",
                             "ops.yaml");
  EXPECT_EQ(config.metrics.textfile, "/var/lib/prometheus/node-exporter/coexist.prom");
  EXPECT_EQ(config.metrics.listen, "[::1]:9187");
  EXPECT_EQ(config.daemon.poll_interval, 5s);
  EXPECT_EQ(config.daemon.reconnect_initial, 250ms);
  EXPECT_EQ(config.daemon.reconnect_max, 2min);
}

TEST(OpsConfig, LoopbackHostsAreAccepted) {
  for (const char* listen : {"127.0.0.1:9187", "127.1.2.3:1", "localhost:9187", "[::1]:0"}) {
    EXPECT_NO_THROW(LoadString(std::string("metrics: {listen: \"") + listen + "\"}\n", "ok.yaml"))
        << listen;
  }
  EXPECT_NO_THROW(
      LoadString("metrics: {listen: \"0.0.0.0:9187\", allow_remote: true}\n", "remote.yaml"));
}

struct BadInput {
  const char* yaml;
  const char* message;  // exact what()
  const char* hint;     // a part of hint()
};

class BadOpsConfig : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadOpsConfig, NamesTheProblemAndWhereItIs) {
  const BadInput& input = GetParam();
  try {
    LoadString(input.yaml, "bad.yaml");
    FAIL() << "accepted: " << input.yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), input.message);
    EXPECT_NE(e.hint().find(input.hint), std::string::npos) << e.hint();
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Cases, BadOpsConfig, ::testing::Values(
  BadInput{"metrics:\n  listen: 0.0.0.0:9187\n",
           "bad.yaml:2:11: metrics.listen: '0.0.0.0' is not a loopback address",
           "metrics.allow_remote: true"},
  BadInput{"metrics:\n  listen: \"192.168.1.5:9187\"\n",
           "bad.yaml:2:11: metrics.listen: '192.168.1.5' is not a loopback address", "127.0.0.1"},
  BadInput{"metrics:\n  listen: metrics.example.com:9187\n",
           "bad.yaml:2:11: metrics.listen: 'metrics.example.com' is not a loopback address", ""},
  BadInput{"metrics:\n  listen: 9187\n",
           "bad.yaml:2:11: metrics.listen: '9187' is not host:port", "127.0.0.1:9187"},
  BadInput{"metrics:\n  listen: \"127.0.0.1:99999\"\n",
           "bad.yaml:2:11: metrics.listen: '127.0.0.1:99999' is not host:port", ""},
  BadInput{"metrics:\n  listen: \"::1:9187\"\n",
           "bad.yaml:2:11: metrics.listen: '::1:9187' is not host:port", "[::1]:9187"},
  BadInput{"metrics:\n  texfile: x.prom\n",
           "bad.yaml:2:3: metrics.texfile: unknown key", "did you mean 'textfile'?"},
  BadInput{"daemon:\n  poll_interval: 10ms\n",
           "bad.yaml:2:18: daemon.poll_interval: '10ms' is out of range", ""},
  BadInput{"daemon:\n  reconnect_initial: 5s\n  reconnect_max: 1s\n",
           "bad.yaml:3:18: daemon.reconnect_max: reconnect_max (1s) is shorter than "
           "reconnect_initial (5s)", "raise reconnect_max"}));
// clang-format on

}  // namespace
}  // namespace coexist::config

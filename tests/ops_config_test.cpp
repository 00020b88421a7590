// The metrics: and daemon: sections: defaults, accepted values, and errors
// that name file:line:column (exact text, one bad file per case).

#include <gtest/gtest.h>

#include "config/config.h"
#include "config_core/config_error.h"

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

}  // namespace
}  // namespace coexist::config

// The textfile metrics parse as Prometheus exposition and carry the run.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "metrics/run_metrics.h"
#include "tests/support/exposition.h"

namespace coexist::metrics {
namespace {

RunMetrics SampleRun(bool succeeded, double finished) {
  RunMetrics run;
  run.job = "nightly";
  run.policy = "skip_locked";
  run.succeeded = succeeded;
  run.finished_at =
      std::chrono::system_clock::time_point(std::chrono::seconds(static_cast<long>(finished)));
  run.seconds = 12.5;
  run.counts.done = 90;
  run.counts.deferred = 8;
  run.counts.dead = 2;
  run.counts.revoked = 1;
  run.counts.deferrals_by_reason = {{"edit_locked", 5}, {"row_locked", 3}};
  return run;
}

TEST(Metrics, ExpositionParsesAndCarriesTheRun) {
  auto samples = testing::ParseExposition(Exposition(
      SampleRun(true, 1000), std::chrono::system_clock::time_point(std::chrono::seconds(1000))));
  EXPECT_EQ(
      samples.at(
          R"(coexist_batch_last_run_items{job="nightly",outcome="done",policy="skip_locked"})"),
      90);
  EXPECT_EQ(
      samples.at(
          R"(coexist_batch_last_run_deferrals{job="nightly",policy="skip_locked",reason="edit_locked"})"),
      5);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_success_timestamp_seconds{job="nightly"})"), 1000);
  EXPECT_EQ(
      samples.at(R"(coexist_batch_last_run_duration_seconds{job="nightly",policy="skip_locked"})"),
      12.5);
}

// A budget that ran out before the queue did is what CoexistRunOverBudget
// looks for: the reason as a label, on a run that has one.
TEST(Metrics, TheStopReasonIsALabelOfARunThatHasOne) {
  auto time = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  auto run = SampleRun(true, 1000);
  auto without = testing::ParseExposition(Exposition(run, time));
  for (const auto& [series, value] : without) {
    EXPECT_FALSE(series.starts_with("coexist_batch_last_run_stop_reason")) << series;
  }
  run.stop_reason = StopReason::kMaxDuration;
  auto with = testing::ParseExposition(Exposition(run, time));
  EXPECT_EQ(with.at(R"(coexist_batch_last_run_stop_reason{job="nightly",reason="max_duration"})"),
            1);
}

TEST(Metrics, TheLatencyObjectiveShowsOnlyWhenConfigured) {
  auto time = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  auto run = SampleRun(true, 1000);
  auto without = testing::ParseExposition(Exposition(run, time));
  EXPECT_FALSE(without.contains(
      R"(coexist_batch_last_run_latency_slowdowns{job="nightly",policy="skip_locked"})"));

  run.latency =
      pacing::LatencySummary{.on = true, .baseline_ms = 4, .slowdowns = 3, .seconds_over = 1.5};
  auto with = testing::ParseExposition(Exposition(run, time));
  EXPECT_EQ(
      with.at(R"(coexist_batch_last_run_latency_objective_on{job="nightly",policy="skip_locked"})"),
      1);
  EXPECT_EQ(
      with.at(R"(coexist_batch_last_run_latency_slowdowns{job="nightly",policy="skip_locked"})"),
      3);
  EXPECT_EQ(
      with.at(R"(coexist_batch_last_run_latency_over_seconds{job="nightly",policy="skip_locked"})"),
      1.5);
  EXPECT_EQ(
      with.at(
          R"(coexist_batch_last_run_latency_baseline_seconds{job="nightly",policy="skip_locked"})"),
      0.004);
}

TEST(Metrics, AFailedRunKeepsThePreviousSuccessTime) {
  auto path =
      std::filesystem::temp_directory_path() / ("coexist-" + std::to_string(getpid()) + ".prom");
  WriteTextfile(path, SampleRun(true, 1000));
  WriteTextfile(path, SampleRun(false, 2000));
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  auto samples = testing::ParseExposition(text.str());
  EXPECT_EQ(samples.at(R"(coexist_batch_last_success_timestamp_seconds{job="nightly"})"), 1000);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_run_timestamp_seconds{job="nightly"})"), 2000);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_run_success{job="nightly",policy="skip_locked"})"), 0);
  std::filesystem::remove(path);
}

// The old temporary name was path + ".tmp." + pid: anyone who may write the
// folder could plant a symlink there and have the run write through it.
TEST(Metrics, ASymlinkAtThePredictableTemporaryNameIsNotFollowed) {
  auto dir =
      std::filesystem::temp_directory_path() / ("coexist-metrics-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "coexist.prom";
  auto victim = dir / "victim.txt";
  std::ofstream(victim) << "precious\n";
  auto planted = path;
  planted += ".tmp." + std::to_string(getpid());
  std::filesystem::create_symlink(victim, planted);

  WriteTextfile(path, SampleRun(true, 1000));

  std::stringstream victim_text;
  victim_text << std::ifstream(victim).rdbuf();
  EXPECT_EQ(victim_text.str(), "precious\n");
  EXPECT_TRUE(std::filesystem::is_symlink(planted));
  ASSERT_FALSE(std::filesystem::is_symlink(path));
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(testing::ParseExposition(text.str())
                .at(R"(coexist_batch_last_success_timestamp_seconds{job="nightly"})"),
            1000);
  // Readable by node_exporter's user; no temporary file left behind.
  auto perms = std::filesystem::status(path).permissions();
  EXPECT_NE(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 3);  // coexist.prom, victim.txt, the planted link
  std::filesystem::remove_all(dir);
}

TEST(Metrics, TheRunsTogetherShowOnlyWhenRead) {
  auto time = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  auto run = SampleRun(true, 1000);
  EXPECT_FALSE(testing::ParseExposition(Exposition(run, time))
                   .contains(R"(coexist_batch_last_runs_together{job="nightly"})"));

  run.together = db::RunsTogether{
      .runs = 3, .running = 1, .failed = 1, .done = 250, .deferred = 7, .dead = 1, .seconds = 40};
  auto samples = testing::ParseExposition(Exposition(run, time));
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together{job="nightly"})"), 3);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_running{job="nightly"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_failed{job="nightly"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_items{job="nightly",outcome="done"})"),
            250);
  EXPECT_EQ(
      samples.at(R"(coexist_batch_last_runs_together_items{job="nightly",outcome="deferred"})"), 7);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_items{job="nightly",outcome="dead"})"),
            1);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_duration_seconds{job="nightly"})"), 40);
  // The run's own series keep the run's own figures.
  EXPECT_EQ(
      samples.at(
          R"(coexist_batch_last_run_items{job="nightly",outcome="done",policy="skip_locked"})"),
      90);
}

// Shared runs of a job on one host write one file: a run that ends after
// a sibling but writes before it must not be replaced by the older view.
TEST(Metrics, AFileOfARunThatEndedLaterIsLeftAlone) {
  auto path = std::filesystem::temp_directory_path() /
              ("coexist-later-" + std::to_string(getpid()) + ".prom");
  auto later = SampleRun(true, 2000);
  later.counts.done = 70;
  EXPECT_TRUE(WriteTextfile(path, later));
  EXPECT_FALSE(WriteTextfile(path, SampleRun(true, 1500)));
  auto read = [&] {
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    return testing::ParseExposition(text.str());
  };
  EXPECT_EQ(read().at(R"(coexist_batch_last_run_timestamp_seconds{job="nightly"})"), 2000);
  EXPECT_EQ(
      read().at(
          R"(coexist_batch_last_run_items{job="nightly",outcome="done",policy="skip_locked"})"),
      70);
  EXPECT_TRUE(WriteTextfile(path, SampleRun(true, 2500)));
  EXPECT_EQ(read().at(R"(coexist_batch_last_run_timestamp_seconds{job="nightly"})"), 2500);
  std::filesystem::remove(path);
}

TEST(Metrics, AnUnwritableFolderIsAClearError) {
  EXPECT_THROW(WriteTextfile("/nonexistent-dir/coexist.prom", SampleRun(true, 1)), Error);
}

}  // namespace
}  // namespace coexist::metrics

// deploy/: the systemd units parse cleanly (systemd-analyze verify), and the
// crontab example names the documented exit statuses.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/subprocess.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Copies a unit template to `dir` as an instance, pointing ExecStart at the
// built binary (verify checks that the program exists).
void Instantiate(const std::string& name, const fs::path& dir) {
  std::string text = Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/systemd" / name);
  text = std::regex_replace(text, std::regex("/usr/local/bin/coexist"), COEXIST_BINARY);
  std::string instance = std::regex_replace(name, std::regex("@\\."), "@nightly.");
  std::ofstream(dir / instance) << text;
}

// Runs verify on the units in `dir`; returns its status and output.
CommandResult Verify(const fs::path& dir) {
  std::vector<std::string> argv = {"/usr/bin/systemd-analyze", "verify"};
  for (const auto& entry : fs::directory_iterator(dir)) argv.push_back(entry.path().string());
  return RunCommand(argv);
}

class Units : public ::testing::Test {
 protected:
  void SetUp() override {
    // scripts/setup.sh installs systemd, so its absence is a broken setup.
    ASSERT_TRUE(fs::exists("/usr/bin/systemd-analyze"))
        << "systemd-analyze is missing: run scripts/setup.sh (Debian package systemd)";
    dir_ = fs::temp_directory_path() / ("coexist-units-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    for (const char* unit :
         {"coexist-batch@.service", "coexist-batch@.timer", "coexist-daemon@.service"}) {
      Instantiate(unit, dir_);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Units, VerifyWithoutWarnings) {
  auto result = Verify(dir_);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(result.output.find("Failed to parse"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("Unknown"), std::string::npos) << result.output;
}

TEST_F(Units, ABrokenUnitIsCaught) {
  auto timer = dir_ / "coexist-batch@nightly.timer";
  std::string text =
      std::regex_replace(Read(timer), std::regex("OnCalendar=.*"), "OnCalendar=someday");
  std::ofstream(timer) << text;
  auto result = Verify(dir_);
  EXPECT_NE(result.output.find("Failed to parse calendar specification"), std::string::npos)
      << result.output;
}

TEST(Crontab, DocumentsTheExitStatuses) {
  std::string text = Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/cron/coexist.crontab");
  for (const char* needle : {"batch run", "2 items deferred", "3 items dead",
                             "75 database unreachable", "78 bad config"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace coexist

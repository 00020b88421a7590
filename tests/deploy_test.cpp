// deploy/: the systemd units parse cleanly (systemd-analyze verify, which
// must print nothing), every path a unit may not find on a bare host has the
// '-' prefix, the units take the password file as a credential, the
// sysusers.d file creates the user they run as, and the crontab enqueues,
// then runs, naming the documented exit statuses. The installation and the
// crontab's commands run end to end in tests/getting_started_test.cpp.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
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

// Runs verify on the units in `dir` (and their drop-ins in UNIT.d/);
// returns its status and output.
CommandResult Verify(const fs::path& dir) {
  std::vector<std::string> argv = {"/usr/bin/systemd-analyze", "verify"};
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) argv.push_back(entry.path().string());
  }
  return RunCommand(argv);
}

const char* kUnits[] = {"coexist-batch@.service",      "coexist-batch@.timer",
                        "coexist-daemon@.service",     "coexist-jobs-metrics@.service",
                        "coexist-jobs-metrics@.timer", "enqueue.conf"};

// Settings of a unit file (or drop-in): name -> every value, in order.
std::multimap<std::string, std::string> Settings(const std::string& name) {
  std::istringstream text(Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/systemd" / name));
  std::multimap<std::string, std::string> settings;
  for (std::string line; std::getline(text, line);) {
    auto equals = line.find('=');
    if (line.empty() || line[0] == '#' || line[0] == '[' || equals == std::string::npos) continue;
    settings.emplace(line.substr(0, equals), line.substr(equals + 1));
  }
  return settings;
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
         {"coexist-batch@.service", "coexist-batch@.timer", "coexist-daemon@.service",
          "coexist-jobs-metrics@.service", "coexist-jobs-metrics@.timer"}) {
      Instantiate(unit, dir_);
    }
    // The drop-in of docs/getting-started.md, beside its instance.
    fs::create_directories(dir_ / "coexist-batch@nightly.service.d");
    std::string dropin =
        std::regex_replace(Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/systemd/enqueue.conf"),
                           std::regex("/usr/local/bin/coexist"), COEXIST_BINARY);
    std::ofstream(dir_ / "coexist-batch@nightly.service.d/enqueue.conf") << dropin;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Units, VerifyWithoutWarnings) {
  auto result = Verify(dir_);
  EXPECT_EQ(result.status, 0) << result.output;
  // verify exits 0 on a line it ignores ("Invalid syntax, ignoring"): any
  // output is a finding.
  EXPECT_EQ(result.output, "");
}

TEST_F(Units, AnIgnoredLineIsCaught) {
  auto dropin = dir_ / "coexist-batch@nightly.service.d/enqueue.conf";
  std::ofstream(dropin, std::ios::app) << "SetCredential=pgpass:\n";
  auto result = Verify(dir_);
  EXPECT_NE(result.output.find("Invalid syntax"), std::string::npos) << result.output;
}

// A path that the host may lack fails the unit before coexist starts
// (226/NAMESPACE for ReadWritePaths=, 243 for a missing EnvironmentFile=)
// unless it has the '-' prefix. verify does not look at them, so they are
// read here: no unit needs any of them to exist.
TEST(UnitFiles, EveryPathTheHostMayLackHasTheDashPrefix) {
  int paths = 0;
  for (const char* unit : kUnits) {
    for (const auto& [name, value] : Settings(unit)) {
      if (!std::regex_match(name, std::regex("ReadWritePaths|ReadOnlyPaths|InaccessiblePaths|"
                                             "ExecPaths|NoExecPaths|BindPaths|"
                                             "BindReadOnlyPaths|EnvironmentFile"))) {
        continue;
      }
      std::istringstream entries(value);
      for (std::string entry; entries >> entry; ++paths) {
        EXPECT_TRUE(std::regex_search(entry, std::regex("^\\+?-")))
            << unit << ": " << name << "=" << entry;
      }
    }
  }
  EXPECT_GE(paths, 4);  // node-exporter and the .env, in both services
}

// ProtectHome=yes hides ~/.pgpass: a unit that sets it hands libpq the
// password file as a credential (an empty one when the file is absent).
TEST(UnitFiles, ThePasswordFileIsACredential) {
  for (const char* unit :
       {"coexist-batch@.service", "coexist-daemon@.service", "coexist-jobs-metrics@.service"}) {
    auto settings = Settings(unit);
    auto has = [&](const std::string& name, const std::string& value) {
      auto [first, last] = settings.equal_range(name);
      for (auto it = first; it != last; ++it) {
        if (it->second == value) return true;
      }
      return false;
    };
    EXPECT_TRUE(has("ProtectHome", "yes")) << unit;
    EXPECT_TRUE(has("LoadCredential", "pgpass:/etc/coexist/%i.pgpass")) << unit;
    EXPECT_TRUE(has("SetCredential", "pgpass:\\n")) << unit;
    EXPECT_TRUE(has("Environment", "PGPASSFILE=%d/pgpass")) << unit;
    EXPECT_TRUE(has("EnvironmentFile", "-/etc/coexist/%i.env")) << unit;
    EXPECT_TRUE(has("User", "coexist")) << unit;
    EXPECT_TRUE(has("Group", "coexist")) << unit;
  }
}

// The units run and serve with --no-install: the least-privilege batch role
// of docs/operations.md may not install, and a nightly start is no time for
// DDL on a live table (the owner runs `db install`).
TEST(UnitFiles, InstallNothing) {
  for (const char* unit : {"coexist-batch@.service", "coexist-daemon@.service"}) {
    auto settings = Settings(unit);
    ASSERT_EQ(settings.count("ExecStart"), 1u) << unit;
    EXPECT_TRUE(settings.find("ExecStart")->second.ends_with(" --no-install")) << unit;
  }
  std::string crontab = Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/cron/coexist.crontab");
  EXPECT_NE(crontab.find("batch run --no-install;"), std::string::npos) << crontab;
}

// Online users first: coexist's own process yields the CPU and the disk
// (docs/pacing.md, "Giving online the machine first"); verify above checks
// that systemd accepts the values.
TEST(UnitFiles, CoexistYieldsTheMachineToOnlineWork) {
  for (const char* unit : {"coexist-batch@.service", "coexist-daemon@.service"}) {
    auto settings = Settings(unit);
    ASSERT_EQ(settings.count("Nice"), 1u) << unit;
    EXPECT_GT(std::stoi(settings.find("Nice")->second), 0) << unit;
    for (const char* weight : {"CPUWeight", "IOWeight"}) {
      ASSERT_EQ(settings.count(weight), 1u) << unit << " " << weight;
      EXPECT_LT(std::stoi(settings.find(weight)->second), 100) << unit << " " << weight;
    }
  }
}

// deploy/sysusers.d/coexist.conf creates the user and group the units run
// as, in a scratch root as on a bare host: a system account without a login.
TEST(Sysusers, CreatesTheUserTheUnitsRunAs) {
  auto root = fs::temp_directory_path() / ("coexist-sysusers-" + std::to_string(getpid()));
  fs::create_directories(root / "etc/sysusers.d");
  fs::copy_file(fs::path(COEXIST_SOURCE_DIR) / "deploy/sysusers.d/coexist.conf",
                root / "etc/sysusers.d/coexist.conf");
  auto result =
      RunCommand({"/usr/bin/systemd-sysusers", "--root=" + root.string(), "coexist.conf"});
  EXPECT_EQ(result.status, 0) << result.output;
  std::smatch m;
  std::string passwd = Read(root / "etc/passwd");
  ASSERT_TRUE(std::regex_search(
      passwd, m,
      std::regex("^coexist:x:([0-9]+):([0-9]+):[^:]*:/:/usr/sbin/nologin$", std::regex::multiline)))
      << passwd;
  EXPECT_LT(std::stoi(m[1]), 1000) << "a system user";
  EXPECT_TRUE(std::regex_search(
      Read(root / "etc/group"),
      std::regex("^coexist:x:" + std::string(m[2]) + ":", std::regex::multiline)));
  EXPECT_NE(Read(root / "etc/shadow").find("coexist:!"), std::string::npos) << "no password";
  fs::remove_all(root);
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

// A job that never enqueues never has work: the run line enqueues first,
// and runs only if that worked.
TEST(Crontab, EnqueuesThenRuns) {
  std::string text = Read(fs::path(COEXIST_SOURCE_DIR) / "deploy/cron/coexist.crontab");
  EXPECT_TRUE(std::regex_search(text, std::regex("\\n[0-9*].* enqueue && .* batch run"))) << text;
}

}  // namespace
}  // namespace coexist

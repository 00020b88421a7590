// docs/getting-started.md, executed as written against a real PostgreSQL:
// ```sql blocks run in the test's database (a statement ending in
// `-- VALUE` must return VALUE), the ```yaml block becomes job.yaml, and
// each `$ command` of a ```console block runs in that folder through the
// shell, with `coexist` on the PATH and COEXIST_DATABASE_URL naming the
// database; the lines under it must appear in its output (`[exit N]`: its
// exit status). ```sh blocks (the installation of section 5) run line by
// line in that folder too (deploy/ and build/coexist there are the source's
// and the build's), as root would run them on a bare host, but inside a
// scratch root (no systemd runs in CI, and the test must not add a user to
// the machine): paths under /etc/, /usr/local/ and /var/ move under it,
// `systemd-sysusers` gets `--root` (the sysusers file creates the user
// there), `-o coexist` and `-g coexist` become the ids it got there, and
// `systemctl enable --now UNIT` / `systemctl start UNIT` run
// `systemd-analyze verify --root` on the installed unit (with its timer's
// service, drop-ins and the installed binary), which must print nothing.
// Then the installed crontab's enqueue-and-run line runs against the
// database with the crontab's own variables (COEXIST_DATABASE_URL replaced
// by the test's, as the least-privilege batch role of docs/operations.md),
// and must enqueue and settle new orders.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>

#include "common/subprocess.h"
#include "db/connection.h"
#include "tests/support/database_test.h"
#include "tests/support/documented_grants.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;

struct Block {
  std::string lang;
  std::vector<std::string> lines;
  int first_line = 0;  // of the doc, for messages
};

std::vector<Block> Blocks(const fs::path& doc) {
  std::ifstream in(doc);
  std::vector<Block> blocks;
  bool inside = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.starts_with("```")) {
      if (!inside) blocks.push_back({line.substr(3), {}, number + 1});
      inside = !inside;
      continue;
    }
    if (inside) blocks.back().lines.push_back(line);
  }
  return blocks;
}

std::string Trim(const std::string& text) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class GettingStartedTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    dir_ = fs::temp_directory_path() / ("cx-getting-started-" + database_name());
    root_ = dir_ / "root";
    fs::create_directories(dir_ / "build");
    // The source tree the installation runs from.
    fs::create_directory_symlink(fs::path(COEXIST_SOURCE_DIR) / "deploy", dir_ / "deploy");
    fs::create_symlink(COEXIST_BINARY, dir_ / "build" / "coexist");
    // What a Debian 12 host has before coexist: systemd's own units (verify
    // needs sysinit.target and friends) and no coexist user.
    fs::create_directories(root_ / "usr/lib/systemd");
    fs::copy("/usr/lib/systemd/system", root_ / "usr/lib/systemd/system",
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  void RunConsole(const Block& block) {
    for (size_t i = 0; i < block.lines.size();) {
      const auto& line = block.lines[i];
      ASSERT_TRUE(line.starts_with("$ ")) << "line " << block.first_line + i << ": " << line;
      std::string command = line.substr(2);
      std::vector<std::string> expected;
      for (++i; i < block.lines.size() && !block.lines[i].starts_with("$ "); ++i) {
        expected.push_back(Trim(block.lines[i]));
      }
      auto result =
          RunCommand({"/bin/sh", "-c",
                      "cd " + Quoted(dir_.string()) +
                          " && PATH=" + Quoted(fs::path(COEXIST_BINARY).parent_path().string()) +
                          ":\"$PATH\" COEXIST_DATABASE_URL=" + Quoted(conninfo()) + " " + command});
      std::istringstream output(result.output);
      std::vector<std::string> printed;
      for (std::string out; std::getline(output, out);) printed.push_back(Trim(out));
      for (const auto& want : expected) {
        if (want.starts_with("[exit ")) {
          EXPECT_EQ("[exit " + std::to_string(result.status) + "]", want) << "$ " << command << "\n"
                                                                          << result.output;
        } else {
          EXPECT_NE(std::find(printed.begin(), printed.end(), want), printed.end())
              << "$ " << command << " did not print: " << want << "\n"
              << result.output;
        }
      }
    }
  }

  // The uid and gid that systemd-sysusers gave `name` in the scratch root.
  std::pair<std::string, std::string> Ids(const std::string& name) {
    std::istringstream passwd(Read(root_ / "etc/passwd"));
    for (std::string line; std::getline(passwd, line);) {
      if (!line.starts_with(name + ":")) continue;
      std::smatch m;
      if (std::regex_search(line, m, std::regex("^[^:]*:[^:]*:([0-9]+):([0-9]+):"))) {
        return {m[1], m[2]};
      }
    }
    return {};
  }

  void RunInstall(const Block& block) {
    for (size_t i = 0; i < block.lines.size(); ++i) {
      std::string line = block.lines[i];
      SCOPED_TRACE("docs/getting-started.md:" + std::to_string(block.first_line + i) + ": " + line);
      if (Trim(line).empty() || line.starts_with("#")) continue;
      std::smatch m;
      if (std::regex_match(line, std::regex("systemctl daemon-reload"))) continue;
      if (std::regex_match(
              line, m, std::regex("systemctl (?:enable --now|start) ([^ ]+\\.(timer|service))"))) {
        std::vector<std::string> argv = {"/usr/bin/systemd-analyze", "verify",
                                         "--root=" + root_.string(), m[1]};
        if (m[2] == "timer") {  // and the service it starts
          argv.push_back(
              std::regex_replace(std::string(m[1]), std::regex("\\.timer$"), ".service"));
        }
        auto result = RunCommand(argv);
        EXPECT_EQ(result.status, 0) << result.output;
        EXPECT_EQ(result.output, "") << "systemd-analyze verify is not silent";
        ++verified_;
        continue;
      }
      ASSERT_FALSE(line.starts_with("systemctl")) << "a systemctl line this test cannot run";
      line = std::regex_replace(line, std::regex("(^|[ =>'\"])(/etc/|/usr/local/|/var/)"),
                                "$1" + root_.string() + "$2");
      line = std::regex_replace(line, std::regex("^systemd-sysusers "),
                                "systemd-sysusers --root=" + root_.string() + " ");
      if (line.find(" coexist ") != std::string::npos || line.ends_with(" coexist")) {
        auto [uid, gid] = Ids("coexist");
        ASSERT_FALSE(uid.empty()) << "no user coexist in " << root_ / "etc/passwd";
        if (geteuid() != 0) {  // only root gives files away: keep them ours
          uid = std::to_string(geteuid());
          gid = std::to_string(getegid());
        }
        line = std::regex_replace(line, std::regex("-o coexist\\b"), "-o " + uid);
        line = std::regex_replace(line, std::regex("-g coexist\\b"), "-g " + gid);
      }
      auto result = RunCommand({"/bin/sh", "-c", "cd " + Quoted(dir_.string()) + " && " + line});
      ASSERT_EQ(result.status, 0) << line << "\n" << result.output;
    }
  }

  // The installed crontab's line for `words` (e.g. "batch run"), as cron
  // would run it: its variables, its command, paths moved into the root.
  CommandResult RunCronLine(const std::string& words, const std::string& database_url) {
    std::string text = Read(root_ / "etc/cron.d/coexist");
    std::map<std::string, std::string> env;
    std::string command;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (line.starts_with("#") || Trim(line).empty()) continue;
      if (std::regex_match(line, m, std::regex("([A-Z_]+)=(.*)"))) {
        env[m[1]] = m[2];
      } else if (std::regex_match(line, m, std::regex("(?:\\S+\\s+){5}coexist\\s+(.*)")) &&
                 std::string(m[1]).find(words) != std::string::npos) {
        command = m[1];
      }
    }
    EXPECT_FALSE(command.empty()) << "no line for " << words << " in the crontab:\n" << text;
    EXPECT_TRUE(env.contains("COEXIST_DATABASE_URL")) << text;
    EXPECT_TRUE(env.contains("PGPASSFILE")) << text;
    EXPECT_EQ(command.find('%'), std::string::npos) << "cron turns % into a newline";
    env["COEXIST_DATABASE_URL"] = database_url;
    auto in_root = [&](const std::string& s) {
      return std::regex_replace(s, std::regex("(^|[ =>'\"])(/etc/|/usr/local/|/var/)"),
                                "$1" + root_.string() + "$2");
    };
    std::vector<std::string> argv = {"/usr/bin/env", "-i", "HOME=/"};
    // PATH's /usr/local/bin is the root's, where the doc installed coexist.
    for (const auto& [name, value] : env) argv.push_back(name + "=" + in_root(value));
    argv.insert(argv.end(), {env.contains("SHELL") ? env["SHELL"] : "/bin/sh", "-c",
                             "cd / && " + in_root(command)});
    return RunCommand(argv);
  }

  fs::path dir_;
  fs::path root_;
  int verified_ = 0;
};

TEST_F(GettingStartedTest, EveryStepRunsAsWritten) {
  auto blocks = Blocks(fs::path(COEXIST_SOURCE_DIR) / "docs" / "getting-started.md");
  int consoles = 0;
  for (const auto& block : blocks) {
    SCOPED_TRACE("the block at docs/getting-started.md:" + std::to_string(block.first_line));
    if (block.lang == "sql") {
      std::string sql;
      for (const auto& line : block.lines) sql += line + "\n";
      auto comment = sql.rfind("-- ");
      if (comment != std::string::npos && sql.find(';') < comment) {
        EXPECT_EQ(QueryValue(sql.substr(0, comment)), Trim(sql.substr(comment + 3)));
      } else {
        QueryValue(sql);
      }
    } else if (block.lang == "yaml") {
      std::ofstream job(dir_ / "job.yaml");
      for (const auto& line : block.lines) job << line << "\n";
    } else if (block.lang == "console") {
      ++consoles;
      ASSERT_NO_FATAL_FAILURE(RunConsole(block));
    } else if (block.lang == "sh") {
      ASSERT_NO_FATAL_FAILURE(RunInstall(block));
    } else {
      ADD_FAILURE() << "a ```" << block.lang << " block this test does not know how to run";
    }
  }
  EXPECT_EQ(consoles, 4);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status = 'settled'"), 100);
  EXPECT_EQ(verified_, 2) << "the timer and the service, verified where the doc starts them";

  // What the installation left: the user, files with the modes the doc
  // says, the URL without a password.
  auto [uid, gid] = Ids("coexist");
  EXPECT_NE(Read(root_ / "etc/passwd").find(":/:/usr/sbin/nologin"), std::string::npos);
  auto owner = [&](const char* path) {
    struct stat st {};
    EXPECT_EQ(stat((root_ / path).c_str(), &st), 0) << path;
    return std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid);
  };
  if (geteuid() == 0) {
    // The units run as coexist: it reads the YAML through its group, and
    // the crontab's PGPASSFILE as its owner.
    EXPECT_EQ(owner("etc/coexist/settle-orders.yaml"), "0:" + gid);
    EXPECT_EQ(owner("etc/coexist/settle-orders.pgpass"), uid + ":" + gid);
    EXPECT_EQ(owner("var/log/coexist"), uid + ":" + gid);
  }
  EXPECT_EQ(fs::status(root_ / "etc/coexist/settle-orders.yaml").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(fs::status(root_ / "etc/coexist/settle-orders.env").permissions(),
            fs::perms::owner_read | fs::perms::owner_write)
      << "the environment file is systemd's (root's) to read";
  auto pgpass = fs::status(root_ / "etc/coexist/settle-orders.pgpass").permissions();
  EXPECT_EQ(pgpass, fs::perms::owner_read | fs::perms::owner_write)
      << "libpq ignores a passfile others can read";
  std::string env = Read(root_ / "etc/coexist/settle-orders.env");
  EXPECT_TRUE(std::regex_search(
      env, std::regex("^COEXIST_DATABASE_URL='postgresql://[^:@/]+@", std::regex::multiline)))
      << env;

  // The crontab's line, as cron runs it at 01:00, with the least-privilege
  // batch role of docs/operations.md in its URL (the owner installed in
  // section 3): tonight's new orders are enqueued, then settled.
  std::string batch_role = "batch_" + database_name();
  QueryValue(
      testing::DocumentedGrants(COEXIST_SOURCE_DIR, "online_" + database_name(), batch_role) +
      "GRANT USAGE ON SCHEMA shop TO " + batch_role + ";" +
      "GRANT SELECT, UPDATE ON shop.orders TO " + batch_role + ";");
  std::string batch_url = conninfo() + " user=" + batch_role;
  QueryValue(
      "INSERT INTO shop.orders (order_id, total) "
      "SELECT md5('night 2 ' || g)::uuid, g FROM generate_series(1, 7) g");
  auto night = RunCronLine("batch run", batch_url);
  EXPECT_EQ(night.status, 0) << night.output;
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status = 'settled'"), 107);
  std::string log = Read(root_ / "var/log/coexist/settle-orders.log");
  EXPECT_NE(log.find("7 added"), std::string::npos) << log;
  // The exit statuses its comments promise: an order an online user holds
  // is deferred to the next night (2), the others settled;
  QueryValue(
      "INSERT INTO shop.orders (order_id, total) "
      "SELECT md5('night 3 ' || g)::uuid, g FROM generate_series(1, 3) g");
  {
    auto online = db::Connect(conninfo(), "getting-started-online");
    pqxx::work held(*online);
    held.exec("SELECT 1 FROM shop.orders WHERE order_id = md5('night 3 1')::uuid FOR UPDATE");
    auto deferred = RunCronLine("batch run", batch_url);
    EXPECT_EQ(deferred.status, 2) << deferred.output;
    EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status = 'open'"), 1);
  }
  // a database that does not answer stops the line at the enqueue (75), a
  // bad file too (78), with no run either time.
  auto runs = Count("SELECT count(*) FROM coexist.runs");
  auto unreachable =
      RunCronLine("batch run", "postgresql://coexist@127.0.0.1:1/shop?connect_timeout=5");
  EXPECT_EQ(unreachable.status, 75) << unreachable.output;
  auto yaml = root_ / "etc/coexist/settle-orders.yaml";
  std::string good = Read(yaml);
  std::ofstream(yaml) << good << "batch: {chunk_size: many}\n";
  auto bad = RunCronLine("batch run", batch_url);
  EXPECT_EQ(bad.status, 78) << bad.output;
  std::ofstream(yaml) << good;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), runs);
  auto purge = RunCronLine("queue purge", batch_url);
  EXPECT_EQ(purge.status, 0) << purge.output;
}

}  // namespace
}  // namespace coexist

// docs/getting-started.md, executed as written against a real PostgreSQL:
// ```sql blocks run in the test's database (a statement ending in
// `-- VALUE` must return VALUE), the ```yaml block becomes job.yaml, and
// each `$ command` of a ```console block runs in that folder through the
// shell, with `coexist` on the PATH and COEXIST_DATABASE_URL naming the
// database; the lines under it must appear in its output (`[exit N]`: its
// exit status). ```sh blocks (the systemd installation) are not run.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/subprocess.h"
#include "tests/support/database_test.h"

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
    fs::create_directories(dir_);
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

  fs::path dir_;
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
    } else {
      EXPECT_EQ(block.lang, "sh") << "a block this test does not know how to run";
    }
  }
  EXPECT_EQ(consoles, 4);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status = 'settled'"), 100);
}

}  // namespace
}  // namespace coexist

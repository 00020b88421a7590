// The docs keep up with the tree: every migration listed in
// docs/database-api.md, every page of docs/ in the README, every library
// folder in docs/design.md's map, every source file a page names, and no
// comment or page citing an issue number (the reason belongs in the text,
// not in a tracker that moves).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/stop_reason.h"
#include "schema/event_kind.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = COEXIST_SOURCE_DIR;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Names of the files in `dir` ending in `extension`, without it, sorted.
std::vector<std::string> Stems(const fs::path& dir, const std::string& extension) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == extension) out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Docs, DatabaseApiListsEveryMigrationInOrder) {
  auto migrations = Stems(kSource / "schema/migrations", ".sql");
  ASSERT_FALSE(migrations.empty());
  std::string doc = Read(kSource / "docs/database-api.md");
  std::vector<std::string> rows;
  std::regex row(R"(\n\| `(\d{4}_[a-z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it) {
    rows.push_back((*it)[1]);
  }
  EXPECT_EQ(rows, migrations) << "docs/database-api.md, \"The migrations\": one row per file of "
                                 "schema/migrations/, in order";
  std::string range = "`0001`-`" + migrations.back().substr(0, 4) + "`";
  EXPECT_NE(doc.find(range), std::string::npos) << "the introduction names " << range;
}

// The run's JSON summary as docs/batch.md lists it: every stop reason the
// code has, each in backquotes in the paragraph that lists them.
TEST(Docs, BatchPageListsEveryStopReason) {
  std::string page = Read(kSource / "docs" / "batch.md");
  auto start = page.find("`stop_reason` is\n");
  ASSERT_NE(start, std::string::npos) << "docs/batch.md lists the stop reasons";
  std::string paragraph = page.substr(start, page.find("\n\n", start) - start);
  for (StopReason reason : kEveryStopReason) {
    EXPECT_NE(paragraph.find("`" + std::string(ToString(reason)) + "`"), std::string::npos)
        << ToString(reason) << " is missing from docs/batch.md's stop reasons";
    EXPECT_EQ(ParseStopReason(ToString(reason)), reason);
  }
}

// docs/schema.md's list of the audit trail's kinds is exactly the code's:
// the kinds are the backquoted names outside parentheses (the parentheses
// hold their details).
TEST(Docs, SchemaPageListsExactlyTheEventKinds) {
  std::string page = Read(kSource / "docs" / "schema.md");
  auto start = page.find("The kinds:\n");
  ASSERT_NE(start, std::string::npos) << "docs/schema.md lists the event kinds";
  auto end = page.find("\n\n", page.find("\n\n", start) + 2);
  std::string list = page.substr(start, end - start);
  static const std::regex parenthesised(R"(\([^()]*\))");
  for (std::string before; before != list;) {
    before = list;
    list = std::regex_replace(list, parenthesised, "");
  }
  std::set<std::string> documented;
  static const std::regex name("`([a-z_]+)`");
  for (std::sregex_iterator m(list.begin(), list.end(), name), e; m != e; ++m) {
    documented.insert((*m)[1].str());
  }
  std::set<std::string> code;
  for (EventKind kind : kEveryEventKind) {
    code.insert(std::string(ToString(kind)));
    EXPECT_EQ(ParseEventKind(ToString(kind)), kind);
  }
  EXPECT_EQ(documented, code) << "docs/schema.md, \"coexist.events\", against schema/event_kind.h";
}

TEST(Docs, ReadmeListsEveryPage) {
  std::string readme = Read(kSource / "README.md");
  for (const auto& page : Stems(kSource / "docs", ".md")) {
    std::string link = "](docs/" + page + ".md)";
    EXPECT_NE(readme.find(link), std::string::npos) << "README.md does not link docs/" << page;
  }
}

// Every folder that builds a library of the product has its row in
// design.md's "Parts" (tests/ builds only its support library).
TEST(Docs, DesignMapsEveryLibraryFolder) {
  std::string design = Read(kSource / "docs/design.md");
  for (const auto& entry : fs::directory_iterator(kSource)) {
    fs::path cmake = entry.path() / "CMakeLists.txt";
    if (!entry.is_directory() || !fs::exists(cmake) || entry.path().filename() == "tests") continue;
    if (Read(cmake).find("add_library(coexist_") == std::string::npos) continue;
    std::string row = "| `" + entry.path().filename().string() + "/` |";
    EXPECT_NE(design.find(row), std::string::npos) << "docs/design.md has no row " << row;
  }
}

TEST(Docs, NoSourceCommentCitesAnIssueNumber) {
  std::regex citation(R"((\b[Ii]ssue\s*#?\s*[0-9]+)|((^|[\s(])#[0-9]+\b))");
  std::set<std::string> skip = {"build", ".git"};
  for (auto it = fs::recursive_directory_iterator(kSource);
       it != fs::recursive_directory_iterator(); ++it) {
    std::string name = it->path().filename().string();
    if (it->is_directory() &&
        (skip.count(name) > 0 || name.rfind("build", 0) == 0 || name.rfind('.', 0) == 0)) {
      it.disable_recursion_pending();
      continue;
    }
    auto ext = it->path().extension();
    if (ext != ".h" && ext != ".cpp" && ext != ".sql") continue;
    std::istringstream lines(Read(it->path()));
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      auto comment = line.find(ext == ".sql" ? "--" : "//");
      if (comment == std::string::npos) continue;
      std::string text = line.substr(comment);
      EXPECT_FALSE(std::regex_search(text, citation))
          << fs::relative(it->path(), kSource).string() << ":" << number << ": " << text;
    }
  }
}

// The pages, README.md and CONTRIBUTING.md.
std::vector<fs::path> Pages() {
  std::vector<fs::path> out = {kSource / "README.md", kSource / "CONTRIBUTING.md"};
  for (const auto& stem : Stems(kSource / "docs", ".md"))
    out.push_back(kSource / "docs" / (stem + ".md"));
  return out;
}

// A page keeps what an issue said, not its number.
TEST(Docs, NoPageCitesAnIssueNumber) {
  std::regex citation(R"(\b[Ii]ssues?\s*#?\s*[0-9]+)");
  for (const auto& page : Pages()) {
    std::istringstream lines(Read(page));
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      EXPECT_FALSE(std::regex_search(line, citation))
          << fs::relative(page, kSource).string() << ":" << number << ": " << line;
    }
  }
}

// Every source file a page names (`cli/failure.cpp`, tests/x_test.cpp)
// exists, from the tree's root or the page's folder: a file moved or
// renamed takes its pages along. NNNN stands for a migration's number.
TEST(Docs, EveryFileAPageNamesExists) {
  std::regex path(
      R"((^|[^\w/.~:-])((?:[a-z0-9_-]+/)+[A-Za-z0-9_-]+\.(?:h|cpp|sql|md|yaml|sh|cmake|py))\b)");
  for (const auto& page : Pages()) {
    std::istringstream lines(Read(page));
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      for (std::sregex_iterator it(line.begin(), line.end(), path), end; it != end; ++it) {
        std::string named = (*it)[2];
        if (named.find("NNNN") != std::string::npos) continue;
        EXPECT_TRUE(fs::exists(kSource / named) || fs::exists(page.parent_path() / named))
            << fs::relative(page, kSource).string() << ":" << number << ": " << named;
      }
    }
  }
}

}  // namespace
}  // namespace coexist

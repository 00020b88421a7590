// The fence around the coexist schema: SQL that names one of its tables
// (coexist.queue, coexist.runs, coexist.events, coexist.edit_locks, ...: every
// table and view the migrations create) lives in schema/, so the rules of
// the schema's data are read and changed in one place; other folders call
// schema/'s functions. Tests and benchmarks may name them. Only string
// literals that read as SQL count: comments and prose (a command's help
// text naming the table it reads) do not. And one writer of the audit
// trail: only schema/events.cpp spells the INSERT into coexist.events.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "schema/event_kind.h"

namespace fs = std::filesystem;
using coexist::EventKind;
using coexist::kEveryEventKind;
using coexist::ParseEventKind;

namespace {

const fs::path kSource = COEXIST_SOURCE_DIR;

// Files outside schema/ that may name the schema's tables in SQL, each with
// the reason. Keep it empty unless a statement cannot move to schema/.
const std::map<std::string, std::string> kExceptions = {};

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A string literal of C++ source: adjacent literals ("a" "b") are one.
struct Literal {
  int line = 0;  // where it starts
  std::string text;
};

// The string literals of C++ source `code`, raw ones included; comments and
// character literals are skipped.
std::vector<Literal> StringLiterals(const std::string& code) {
  std::vector<Literal> out;
  int line = 1;
  bool adjacent = false;  // only blanks and comments since the last literal
  for (size_t i = 0; i < code.size();) {
    char c = code[i];
    if (c == '\n') ++line;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (code.compare(i, 2, "//") == 0) {
      i = code.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (code.compare(i, 2, "/*") == 0) {
      size_t end = code.find("*/", i + 2);
      end = end == std::string::npos ? code.size() : end + 2;
      for (size_t j = i; j < end; ++j) line += code[j] == '\n';
      i = end;
      continue;
    }
    bool raw = c == 'R' && i + 1 < code.size() && code[i + 1] == '"' &&
               (i == 0 || !IsNameChar(code[i - 1]) || code[i - 1] == '8' || code[i - 1] == 'L' ||
                code[i - 1] == 'u' || code[i - 1] == 'U');
    if (raw || c == '"') {
      std::string text;
      int start_line = line;
      size_t end;
      if (raw) {
        size_t open = code.find('(', i + 2);
        std::string close = ")" + code.substr(i + 2, open - i - 2) + "\"";
        end = code.find(close, open);
        end = end == std::string::npos ? code.size() : end;
        text = code.substr(open + 1, end - open - 1);
        end += close.size();
      } else {
        for (end = i + 1; end < code.size() && code[end] != '"'; ++end) {
          if (code[end] == '\\') ++end;
          if (end < code.size()) text += code[end];
        }
        ++end;
      }
      for (size_t j = i; j < end && j < code.size(); ++j) line += code[j] == '\n';
      if (adjacent && !out.empty()) {
        out.back().text += text;
      } else {
        out.push_back({start_line, text});
      }
      adjacent = true;
      i = end;
      continue;
    }
    adjacent = false;
    if (c == '\'') {
      // A character literal; a digit separator (1'000) is not one.
      if (i > 0 && std::isxdigit(static_cast<unsigned char>(code[i - 1])) && i + 1 < code.size() &&
          std::isxdigit(static_cast<unsigned char>(code[i + 1]))) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < code.size() && code[end] != '\'') end += code[end] == '\\' ? 2 : 1;
      i = end + 1;
      continue;
    }
    ++i;
  }
  return out;
}

// The tables and views of the coexist schema, from the migrations (and
// coexist.schema_migrations, which schema/migrations.cpp creates).
std::set<std::string> SchemaTables() {
  std::set<std::string> tables = {"schema_migrations"};
  std::regex create(
      R"(CREATE\s+(UNLOGGED\s+)?(TABLE|VIEW)\s+(IF\s+NOT\s+EXISTS\s+)?coexist\.(\w+))",
      std::regex::icase);
  for (const auto& entry : fs::directory_iterator(kSource / "schema/migrations")) {
    std::string sql = Read(entry.path());
    for (std::sregex_iterator m(sql.begin(), sql.end(), create), end; m != end; ++m) {
      tables.insert((*m)[4].str());
    }
  }
  return tables;
}

// Where `literal` names one of `tables` as SQL does: after FROM, JOIN,
// INTO, UPDATE, TABLE, TRUNCATE, ON (a list of names between), or quoted
// ('coexist.x', as to_regclass takes it). Returns the first, or "".
std::string SqlNamedTable(const std::string& literal, const std::set<std::string>& tables) {
  static const std::regex name(R"(coexist\.(\w+))");
  static const std::regex before(
      R"((\b(FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE|ON|ONLY)\s+([\w.]+\s*,\s*)*|')$)",
      std::regex::icase);
  for (std::sregex_iterator m(literal.begin(), literal.end(), name), end; m != end; ++m) {
    if (!tables.count((*m)[1].str())) continue;
    std::string prefix = literal.substr(0, m->position(0));
    if (std::regex_search(prefix, before)) return "coexist." + (*m)[1].str();
  }
  return "";
}

// The product's C++ sources (not tests, benchmarks, builds or hidden
// folders), relative to the source tree.
std::vector<std::string> ProductSources() {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(kSource); it != fs::end(it); ++it) {
    std::string rel = fs::relative(it->path(), kSource).string();
    if (it->is_directory()) {
      std::string top = rel.substr(0, rel.find('/'));
      if (top == "tests" || top == "bench" || top.rfind("build", 0) == 0 || top[0] == '.') {
        it.disable_recursion_pending();
      }
      continue;
    }
    std::string ext = it->path().extension().string();
    if (ext == ".h" || ext == ".cpp") out.push_back(rel);
  }
  return out;
}

TEST(SchemaFence, OnlySchemaNamesTheSchemasTablesInSql) {
  auto tables = SchemaTables();
  ASSERT_TRUE(tables.count("queue") && tables.count("events") && tables.count("windows"))
      << "the migrations' tables were not found";
  auto sources = ProductSources();
  ASSERT_GT(sources.size(), 50u);
  std::vector<std::string> offenders;
  for (const auto& path : sources) {
    if (path.rfind("schema/", 0) == 0 || kExceptions.count(path)) continue;
    for (const auto& literal : StringLiterals(Read(kSource / path))) {
      std::string table = SqlNamedTable(literal.text, tables);
      if (!table.empty()) {
        offenders.push_back(path + ":" + std::to_string(literal.line) + ": " + table);
      }
    }
  }
  std::string listed;
  for (const auto& o : offenders) listed += "\n  " + o;
  EXPECT_TRUE(offenders.empty())
      << "SQL naming the coexist schema's tables outside schema/:" << listed
      << "\nAdd a function to schema/ (the queue store, events.h, edit_locks.h, guard_rows.h, "
         "...) and call it instead.";
}

TEST(SchemaFence, OnlySchemaEventsWritesTheAuditTrail) {
  std::regex insert(R"(INSERT\s+INTO\s+coexist\.events\b)", std::regex::icase);
  for (const auto& path : ProductSources()) {
    if (path == "schema/events.cpp") continue;
    for (const auto& literal : StringLiterals(Read(kSource / path))) {
      EXPECT_FALSE(std::regex_search(literal.text, insert))
          << path << ":" << literal.line
          << ": inserts into coexist.events; record events through schema/events.h "
             "(RecordEvent, or InsertEventsSql in a statement that records its change)";
    }
  }
}

// The kinds are written through schema/event_kind.h: C++ SQL quotes them
// with SqlLiteral, never by hand, and the SQL functions insert only kinds
// the enum has.
TEST(SchemaFence, EventKindsComeFromTheEnum) {
  for (const auto& path : ProductSources()) {
    for (const auto& literal : StringLiterals(Read(kSource / path))) {
      for (EventKind kind : kEveryEventKind) {
        std::string quoted = "'" + std::string(ToString(kind)) + "'";
        EXPECT_EQ(literal.text.find(quoted), std::string::npos)
            << path << ":" << literal.line << ": " << quoted
            << " by hand; write SqlLiteral(EventKind::...) (schema/event_kind.h)";
      }
    }
  }
  std::regex insert(R"(INSERT\s+INTO\s+coexist\.events\b)", std::regex::icase);
  std::regex kind_of(
      R"(INSERT\s+INTO\s+coexist\.events\s*\([^)]*\)\s*(VALUES\s*\(\s*|SELECT\s+)'([a-z_]+)')",
      std::regex::icase);
  int inserts = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "schema/functions")) {
    std::string sql = Read(entry.path());
    int here = static_cast<int>(std::distance(std::sregex_iterator(sql.begin(), sql.end(), insert),
                                              std::sregex_iterator()));
    int named = 0;
    for (std::sregex_iterator m(sql.begin(), sql.end(), kind_of), e; m != e; ++m, ++named) {
      EXPECT_TRUE(ParseEventKind((*m)[2].str()))
          << entry.path().filename() << ": inserts kind " << (*m)[2]
          << ", which schema/event_kind.h does not have";
    }
    EXPECT_EQ(named, here) << entry.path().filename()
                           << ": an insert into coexist.events whose kind is not a literal";
    inserts += here;
  }
  EXPECT_GE(inserts, 6) << "the functions' inserts were not found";
}

TEST(SchemaFence, ReadsSqlInStringsNotComments) {
  std::set<std::string> tables = {"queue", "events", "windows", "targets"};
  auto literals = StringLiterals(
      "// SELECT * FROM coexist.queue in a comment\n"
      "/* DELETE FROM coexist.windows */\n"
      "auto help = \"The audit trail (coexist.events): newest first\";\n"
      "auto sql = \"SELECT 1 FROM \"\n"
      "           \"coexist.queue WHERE x = '\\\"'\";\n"
      "auto raw = R\"sql(\n  GRANT SELECT ON coexist.windows, coexist.targets TO x)sql\";\n"
      "char quote = '\"'; int n = 1'000;\n"
      "auto check = \"SELECT to_regclass('coexist.targets')\";\n");
  ASSERT_EQ(literals.size(), 4u);
  EXPECT_EQ(SqlNamedTable(literals[0].text, tables), "");
  EXPECT_EQ(SqlNamedTable(literals[1].text, tables), "coexist.queue");
  EXPECT_EQ(literals[1].line, 4);
  EXPECT_EQ(SqlNamedTable(literals[2].text, tables), "coexist.windows");
  EXPECT_EQ(SqlNamedTable(literals[3].text, tables), "coexist.targets");
  EXPECT_EQ(SqlNamedTable("UPDATE coexist.queue_stats SET", tables), "");
  EXPECT_EQ(SqlNamedTable("TRUNCATE coexist.queue, coexist.events", tables), "coexist.queue");
  EXPECT_EQ(SqlNamedTable("is recorded in coexist.events with who did it", tables), "");
}

}  // namespace

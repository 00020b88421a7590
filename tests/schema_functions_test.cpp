// One current definition per SQL function: schema/functions/<name>.sql holds
// the current text of each form of coexist.<name>; the migrations keep the
// frozen copies that databases installed. These tests fail when a current
// file and the newest copy in the migrations differ (comments aside), when a
// function the migrations define has no current file, or when a file holds
// a form the migrations do not define (CONTRIBUTING.md, "Changing a SQL
// function"). Both sides come through the embed step: the migrations as the
// binary installs them, the current files embedded into this test.

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/embedded_file.h"
#include "common/sql_text.h"
#include "schema/migrations.h"

namespace coexist::testing::functions_sql {
const std::vector<EmbeddedFile>& EmbeddedFiles();
}

namespace {

using coexist::sql_text::NotCode;
using coexist::sql_text::Skip;

// The statements of `sql`, each from its first character of code (comments
// before it are left out) to its semicolon included.
std::vector<std::string> Statements(const std::string& sql) {
  std::vector<std::string> out;
  std::optional<size_t> start;
  for (size_t i = 0; i < sql.size();) {
    size_t end = i;
    NotCode what = Skip(sql, i, end);
    if (what == NotCode::kComment ||
        (what == NotCode::kNone && std::isspace(static_cast<unsigned char>(sql[i])))) {
      i = what == NotCode::kComment ? end : i + 1;
      continue;
    }
    if (!start) start = i;
    if (what == NotCode::kQuoted) {
      i = end;
    } else if (sql[i++] == ';') {
      out.push_back(sql.substr(*start, i - *start));
      start.reset();
    }
  }
  return out;
}

// The dollar-quote tag ("$$", "$body$") opening at `i`, or "".
std::string DollarTag(const std::string& sql, size_t i) {
  if (sql[i] != '$') return "";
  size_t close = sql.find('$', i + 1);
  return close == std::string::npos ? "" : sql.substr(i, close - i + 1);
}

// `sql` without its comments, at the statement's level and inside a
// function's dollar-quoted body (`in_body`): a comment there is stored in
// pg_proc but does nothing. Quoted text inside a body (a trigger body built
// with format($b$ ... $b$), a message) is data and stays as it is.
std::string WithoutComments(const std::string& sql, bool in_body = false) {
  std::string out;
  for (size_t i = 0; i < sql.size();) {
    size_t end = i;
    switch (Skip(sql, i, end)) {
      case NotCode::kComment:
        i = end;
        break;
      case NotCode::kQuoted: {
        std::string tag = in_body ? "" : DollarTag(sql, i);
        if (tag.empty()) {
          out += sql.substr(i, end - i);
        } else {
          std::string inner = sql.substr(i + tag.size(), end - i - 2 * tag.size());
          out += tag + WithoutComments(inner, true) + tag;
        }
        i = end;
        break;
      }
      case NotCode::kNone:
        out += sql[i++];
        break;
    }
  }
  return out;
}

// What the check compares: the text without comments, trailing blanks and
// the lines that held only a comment.
std::string Normalized(const std::string& sql) {
  std::string out, line;
  std::string text = WithoutComments(sql) + "\n";
  for (char c : text) {
    if (c != '\n') {
      line += c;
      continue;
    }
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) out += line + "\n";
    line.clear();
  }
  return out;
}

// A CREATE or DROP FUNCTION statement on a coexist function.
struct FunctionStatement {
  bool create = false;
  std::string name;       // "abandon_stale_runs"
  std::string signature;  // "abandon_stale_runs(text)": the name and input types
};

// The parameter list's top-level parts, split at commas.
std::vector<std::string> Parameters(const std::string& list) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : list) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (out.size() == 1 && out[0].find_first_not_of(" \t\n") == std::string::npos) out.clear();
  return out;
}

std::optional<FunctionStatement> ParseFunctionStatement(const std::string& statement) {
  static const std::regex head(
      R"(^(CREATE(\s+OR\s+REPLACE)?|DROP)\s+FUNCTION(\s+IF\s+EXISTS)?\s+coexist\.(\w+)\s*\()",
      std::regex::icase);
  std::smatch m;
  if (!std::regex_search(statement, m, head)) return std::nullopt;
  FunctionStatement out;
  out.create = std::toupper(m[1].str()[0]) == 'C';
  out.name = m[4].str();
  size_t open = m.position(0) + m.length(0);
  size_t close = open;
  for (int depth = 1; close < statement.size(); ++close) {
    size_t end = close;
    if (Skip(statement, close, end) != NotCode::kNone) {
      close = end - 1;
    } else if (statement[close] == '(') {
      ++depth;
    } else if (statement[close] == ')' && --depth == 0) {
      break;
    }
  }
  static const std::regex default_value(R"(\s+DEFAULT\s[\s\S]*|\s*=[\s\S]*)", std::regex::icase);
  static const std::regex mode(R"(^(IN|OUT|INOUT|VARIADIC)\s+)", std::regex::icase);
  std::vector<std::string> types;
  for (std::string p : Parameters(statement.substr(open, close - open))) {
    p = std::regex_replace(p, default_value, "");
    p = std::regex_replace(p, std::regex(R"(^\s+|\s+$)"), "");
    std::smatch pm;
    if (std::regex_search(p, pm, mode)) {
      if (std::toupper(pm[1].str()[0]) == 'O') continue;  // OUT: not part of the identity
      p = pm.suffix();
    }
    // CREATE names every parameter (the files of this tree do): the type
    // follows the name. DROP gives types only.
    if (out.create) p = p.substr(p.find_first_of(" \t\n") + 1);
    p = std::regex_replace(p, std::regex(R"(\s+)"), " ");
    for (auto& c : p) c = static_cast<char>(std::tolower(c));
    types.push_back(p);
  }
  out.signature = out.name + "(";
  for (size_t i = 0; i < types.size(); ++i) out.signature += (i ? "," : "") + types[i];
  out.signature += ")";
  return out;
}

// The newest definition of each form the migrations leave installed.
struct Definition {
  std::string migration;  // "0029_done_items_leave_the_queue"
  std::string text;
};

std::map<std::string, Definition> NewestDefinitions() {
  std::map<std::string, Definition> newest;
  for (const auto& migration : coexist::db::AllMigrations()) {
    for (const auto& statement : Statements(std::string(migration.sql))) {
      auto function = ParseFunctionStatement(statement);
      if (!function) continue;
      if (function->create) {
        newest[function->signature] = {migration.name, statement};
      } else {
        newest.erase(function->signature);
      }
    }
  }
  return newest;
}

// The first line where `a` and `b` differ (1-based), for the message.
int FirstDifferentLine(const std::string& a, const std::string& b) {
  int line = 1;
  for (size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i) line += a[i] == '\n';
  return line;
}

TEST(SchemaFunctions, EachCurrentFileEqualsTheNewestCopyInTheMigrations) {
  auto newest = NewestDefinitions();
  ASSERT_GT(newest.size(), 40u) << "the migrations' functions were not found";
  std::map<std::string, std::string> seen;  // signature -> file
  for (const auto& file : coexist::testing::functions_sql::EmbeddedFiles()) {
    std::string name(file.name.substr(0, file.name.rfind(".sql")));
    std::string path = "schema/functions/" + std::string(file.name);
    auto statements = Statements(std::string(file.text));
    EXPECT_FALSE(statements.empty()) << path << " holds no statement";
    for (const auto& statement : statements) {
      auto function = ParseFunctionStatement(statement);
      if (!function || !function->create || function->name != name) {
        ADD_FAILURE() << path << " holds a statement other than CREATE FUNCTION coexist." << name
                      << ": " << statement.substr(0, 80);
        continue;
      }
      auto found = newest.find(function->signature);
      if (found == newest.end()) {
        ADD_FAILURE() << path << ": no migration leaves coexist." << function->signature
                      << " installed. Add a migration that creates it, copying its text from "
                      << path << ", or remove it from the file.";
        continue;
      }
      EXPECT_TRUE(seen.emplace(function->signature, path).second)
          << path << " defines coexist." << function->signature << " twice";
      std::string current = Normalized(statement);
      std::string frozen = Normalized(found->second.text);
      EXPECT_EQ(current, frozen)
          << path << ": coexist." << function->signature << " differs from its newest copy in "
          << "schema/migrations/" << found->second.migration << ".sql (comments aside), from "
          << "line " << FirstDifferentLine(current, frozen) << " of the comment-free text. "
          << "Installed databases run the migration's copy: add a migration that replaces the "
          << "function with this file's text (CONTRIBUTING.md, \"Changing a SQL function\"), "
          << "or undo the edit.";
    }
  }
  for (const auto& [signature, definition] : newest) {
    std::string name = signature.substr(0, signature.find('('));
    EXPECT_TRUE(seen.count(signature))
        << "coexist." << signature << " (newest in schema/migrations/" << definition.migration
        << ".sql) has no current text: add its CREATE statement, as that migration has it, to "
        << "schema/functions/" << name << ".sql";
  }
}

// The comparison itself: comments go, everything else counts.
TEST(SchemaFunctions, CommentsAsideMeansOnlyComments) {
  std::string frozen =
      "CREATE FUNCTION coexist.f(job text) RETURNS int LANGUAGE plpgsql AS $$\n"
      "BEGIN\n"
      "  RETURN 1;\n"
      "END\n"
      "$$;";
  std::string commented =
      "CREATE FUNCTION coexist.f(job text) RETURNS int LANGUAGE plpgsql AS $$\n"
      "BEGIN\n"
      "  -- why it returns 1\n"
      "  RETURN 1;  /* still 1 */\n"
      "END\n"
      "$$;";
  EXPECT_EQ(Normalized(frozen), Normalized(commented));
  EXPECT_NE(Normalized(frozen), Normalized(std::string(frozen).replace(frozen.find("1;"), 1, "2")));
  // A comment inside quoted text is data (a trigger body format()ed from it,
  // a message), never skipped.
  std::string body =
      "CREATE FUNCTION coexist.g() RETURNS text LANGUAGE sql AS $$\n"
      "  SELECT $b$ -- in the generated body\n x $b$ || '-- in a string'\n"
      "$$;";
  std::string body_without =
      "CREATE FUNCTION coexist.g() RETURNS text LANGUAGE sql AS $$\n"
      "  SELECT $b$\n x $b$ || ''\n"
      "$$;";
  EXPECT_NE(Normalized(body), Normalized(body_without));
  EXPECT_NE(Normalized(body).find("-- in the generated body"), std::string::npos);
}

TEST(SchemaFunctions, FormsAreToldApartByTheirInputTypes) {
  auto create = ParseFunctionStatement(
      "CREATE OR REPLACE FUNCTION coexist.revoke_edit_lock(target regclass, record_key text,\n"
      "  actor text, job text DEFAULT NULL, run_id bigint DEFAULT NULL, OUT n bigint)\n"
      "RETURNS bigint LANGUAGE sql AS 'SELECT 1';");
  ASSERT_TRUE(create);
  EXPECT_TRUE(create->create);
  EXPECT_EQ(create->signature, "revoke_edit_lock(regclass,text,text,text,bigint)");
  auto drop = ParseFunctionStatement("DROP FUNCTION coexist.takeover_orphaned(regclass, bigint);");
  ASSERT_TRUE(drop);
  EXPECT_FALSE(drop->create);
  EXPECT_EQ(drop->signature, "takeover_orphaned(regclass,bigint)");
  EXPECT_FALSE(ParseFunctionStatement("CREATE FUNCTION pg_temp.copy_grants(o oid) ..."));
}

TEST(SchemaFunctions, StatementsSplitOutsideQuotesAndComments) {
  auto statements = Statements(
      "-- a comment; with a semicolon\nSELECT ';';\nCREATE FUNCTION coexist.f() RETURNS void "
      "LANGUAGE plpgsql AS $$ BEGIN PERFORM 1; END $$;\n");
  ASSERT_EQ(statements.size(), 2u);
  EXPECT_EQ(statements[0], "SELECT ';';");
  EXPECT_EQ(statements[1].substr(0, 15), "CREATE FUNCTION");
}

}  // namespace

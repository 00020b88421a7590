#include "common/sql_text.h"

#include <strings.h>

#include <cctype>

namespace coexist::sql_text {

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

namespace {

// Just past the closing quote of the quoted part opening at `i`. A doubled
// quote stands for itself; `backslash` (E'...') escapes one character.
size_t EndOfQuoted(const std::string& sql, size_t i, char quote, bool backslash) {
  for (++i; i < sql.size(); ++i) {
    if (backslash && sql[i] == '\\') {
      ++i;
    } else if (sql[i] == quote) {
      if (i + 1 < sql.size() && sql[i + 1] == quote) {
        ++i;
      } else {
        return i + 1;
      }
    }
  }
  return sql.size();
}

}  // namespace

NotCode Skip(const std::string& sql, size_t i, size_t& end) {
  if (sql.compare(i, 2, "--") == 0) {
    end = sql.find('\n', i);
    if (end == std::string::npos) end = sql.size();
    return NotCode::kComment;
  }
  if (sql.compare(i, 2, "/*") == 0) {
    int depth = 0;
    for (end = i; end < sql.size(); ++end) {
      if (sql.compare(end, 2, "/*") == 0) {
        ++depth;
        ++end;
      } else if (sql.compare(end, 2, "*/") == 0) {
        ++end;
        if (--depth == 0) {
          ++end;
          return NotCode::kComment;
        }
      }
    }
    end = sql.size();
    return NotCode::kComment;
  }
  char c = sql[i];
  if (c == '\'' || c == '"') {
    // E'...' (not the E ending a name such as SOME'...').
    bool escapes = c == '\'' && i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                   (i == 1 || !IsNameChar(sql[i - 2]));
    end = EndOfQuoted(sql, i, c, escapes);
    return NotCode::kQuoted;
  }
  if (c == '$') {
    size_t close = i + 1;
    while (close < sql.size() && IsNameChar(sql[close]) &&
           (close > i + 1 || IsNameStart(sql[close]))) {
      ++close;
    }
    if (close < sql.size() && sql[close] == '$') {
      std::string tag = sql.substr(i, close - i + 1);
      size_t found = sql.find(tag, close + 1);
      end = found == std::string::npos ? sql.size() : found + tag.size();
      return NotCode::kQuoted;
    }
  }
  end = i;
  return NotCode::kNone;
}

std::string TopLevelClause(const std::string& sql, std::initializer_list<const char*> words) {
  int depth = 0;
  for (size_t i = 0; i < sql.size();) {
    size_t end = i;
    if (Skip(sql, i, end) != NotCode::kNone) {
      i = end;
      continue;
    }
    char c = sql[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && c == ';') return ";";
    if (!IsNameStart(c)) {
      ++i;
      continue;
    }
    size_t word_end = i;
    while (word_end < sql.size() && IsNameChar(sql[word_end])) ++word_end;
    if (depth == 0 && (i == 0 || !IsNameChar(sql[i - 1]))) {
      std::string word = sql.substr(i, word_end - i);
      for (const char* w : words) {
        if (strcasecmp(word.c_str(), w) == 0) return word;
      }
    }
    i = word_end;
  }
  return "";
}

std::string DollarQuoteTag(const std::string& sql, const std::string& name) {
  std::string tag = "$" + name + "$";
  for (int i = 0; sql.find(tag) != std::string::npos; ++i) {
    tag = "$" + name + std::to_string(i) + "$";
  }
  return tag;
}

}  // namespace coexist::sql_text

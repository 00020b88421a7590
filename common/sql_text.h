#pragma once

// Reading SQL text as the server's lexer would, for the few places that
// must tell code from what is not code: counting an operation's statements
// (batch/operation.cpp) and finding a script's :name placeholders
// (config/custom_kinds.cpp). Neither rewrites what it skips.
//
// Thread safety: pure functions.

#include <cstddef>
#include <string>

namespace coexist::sql_text {

// What starts at a position of SQL text and is not code.
enum class NotCode {
  kNone,     // code starts there
  kQuoted,   // '...', E'...' (backslash escapes), "..." or a $tag$...$tag$ string
  kComment,  // -- to the end of the line, or /* ... */ (nested)
};

// Whether a quoted string, quoted identifier, dollar-quoted string or
// comment starts at `i`; if so, `end` is just past it (the end of the text
// when it is not closed). `$1` is a parameter, not a dollar quote.
NotCode Skip(const std::string& sql, size_t i, size_t& end);

// Letters, digits and _, not starting with a digit: identifiers, dollar
// quote tags, placeholder names.
bool IsNameStart(char c);
bool IsNameChar(char c);

}  // namespace coexist::sql_text

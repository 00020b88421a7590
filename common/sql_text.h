#pragma once

// Reading SQL text as the server's lexer would, for the few places that
// must tell code from what is not code: counting an operation's statements
// (batch/operation.cpp) and finding a script's :name placeholders
// (config/custom_kinds.cpp). Neither rewrites what it skips.
//
// Thread safety: pure functions.

#include <cstddef>
#include <initializer_list>
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

// The first of `words` (whole words, any case) or `;` that stands at the
// top level of `sql`: outside quotes, comments and parentheses; empty when
// none does. For a fragment spliced into a statement coexist writes
// (operation.set): `x = 1 WHERE false` would change the statement's shape.
std::string TopLevelClause(const std::string& sql, std::initializer_list<const char*> words);

// A dollar-quote tag ($name$, $name0$, ...) that does not occur in `sql`:
// the body of a function coexist creates around it.
std::string DollarQuoteTag(const std::string& sql, const std::string& name);

// Letters, digits and _, not starting with a digit: identifiers, dollar
// quote tags, placeholder names.
bool IsNameStart(char c);
bool IsNameChar(char c);

}  // namespace coexist::sql_text

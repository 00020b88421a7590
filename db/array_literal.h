#pragma once

// PostgreSQL array literals for binding a list as one parameter
// (`= ANY ($1::bigint[])`, `unnest($1::text[], ...)`): libpqxx 6.4 binds
// no arrays of its own.
//
// Thread safety: pure functions.

#include <optional>
#include <string>
#include <vector>

namespace coexist::db {

// {1,2,3}
std::string ArrayLiteral(const std::vector<long long>& values);
// {"a","b\"c"}: every element quoted (record keys as text).
std::string ArrayLiteral(const std::vector<std::string>& values);
// {"a","b\"c",NULL}: every element quoted, nullopt as NULL.
std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values);

// The elements of a one-dimensional array's text form as PostgreSQL prints
// it (`{a,"b c","d\\"e"}`), as written; NULL elements are not expected (an
// item's keys) and come back as the text NULL.
std::vector<std::string> ParseArrayLiteral(const std::string& literal);

}  // namespace coexist::db

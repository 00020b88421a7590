#pragma once

// Small conversions between C++ values and what a statement takes or
// returns, shared by the queue store and the batch's SQL on the target.
//
// Thread safety: pure functions.

#include <chrono>
#include <string>
#include <vector>

namespace pqxx {
class result;
}

namespace coexist::db {

// The first column of every row, as bigints (ids a statement returned).
std::vector<long long> BigintColumn(const pqxx::result& result);
// The first column of every row, as text (record keys a statement returned).
std::vector<std::string> TextColumn(const pqxx::result& result);

// "250ms": a duration as a setting's value (lock_timeout, an interval).
std::string SettingMilliseconds(std::chrono::milliseconds value);

}  // namespace coexist::db

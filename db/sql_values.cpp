#include "db/sql_values.h"

#include <pqxx/pqxx>

namespace coexist::db {

std::vector<long long> BigintColumn(const pqxx::result& result) {
  std::vector<long long> out;
  out.reserve(result.size());
  for (const auto& row : result) out.push_back(row[0].as<long long>());
  return out;
}

std::vector<std::string> TextColumn(const pqxx::result& result) {
  std::vector<std::string> out;
  out.reserve(result.size());
  for (const auto& row : result) out.push_back(row[0].as<std::string>());
  return out;
}

std::string SettingMilliseconds(std::chrono::milliseconds value) {
  return std::to_string(value.count()) + "ms";
}

}  // namespace coexist::db

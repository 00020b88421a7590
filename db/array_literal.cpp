#include "db/array_literal.h"

namespace coexist::db {

std::string ArrayLiteral(const std::vector<long long>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "}";
}

namespace {

void AppendQuoted(std::string& out, const std::string& value) {
  out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string ArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    AppendQuoted(out, values[i]);
  }
  return out + "}";
}

std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    AppendQuoted(out, *values[i]);
  }
  return out + "}";
}

std::vector<std::string> ParseArrayLiteral(const std::string& literal) {
  std::vector<std::string> out;
  if (literal.size() < 2 || literal.front() != '{' || literal.back() != '}') return out;
  size_t i = 1;
  size_t end = literal.size() - 1;
  while (i < end) {
    std::string element;
    if (literal[i] == '"') {
      for (++i; i < end && literal[i] != '"'; ++i) {
        if (literal[i] == '\\' && i + 1 < end) ++i;
        element += literal[i];
      }
      ++i;  // the closing quote
    } else {
      for (; i < end && literal[i] != ','; ++i) element += literal[i];
    }
    out.push_back(std::move(element));
    if (i < end && literal[i] == ',') ++i;
  }
  return out;
}

}  // namespace coexist::db

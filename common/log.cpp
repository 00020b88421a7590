#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace coexist::log {
namespace {

// Splits "event phrase k1=v1 k2=\"v 2\"" into the phrase and its pairs,
// appended to `out` after its "event" key.
void SplitEvent(std::string_view text, nlohmann::ordered_json& out) {
  nlohmann::ordered_json pairs = nlohmann::ordered_json::object();
  std::string event;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    std::string_view word = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (!event.empty()) event += ' ';
      event += word;
      pos = end == std::string_view::npos ? text.size() : end + 1;
      continue;
    }
    std::string key(word.substr(0, eq));
    size_t value_start = pos + eq + 1;
    std::string value;
    if (value_start < text.size() && text[value_start] == '"') {
      size_t i = value_start + 1;
      for (; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        value += text[i];
      }
      pos = i + 2;
    } else {
      size_t value_end = text.find(' ', value_start);
      value = std::string(text.substr(value_start, value_end == std::string_view::npos
                                                       ? std::string_view::npos
                                                       : value_end - value_start));
      pos = value_end == std::string_view::npos ? text.size() : value_end + 1;
    }
    pairs[key] = value;
  }
  out["event"] = event;
  for (auto& [key, value] : pairs.items()) out[key] = value;
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    auto since_epoch = msg.time.time_since_epoch();
    line["ts_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count();
    auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    SplitEvent(std::string_view(msg.payload.data(), msg.payload.size()), line);
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::optional<Format> ParseFormat(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

void Setup(const std::string& level, Format format) {
  auto parsed = spdlog::level::from_str(level);
  // from_str maps anything unknown to "off"; only "off" itself may mean that.
  if (parsed == spdlog::level::off && level != "off") {
    throw UsageError("unknown log level '" + level + "'",
                     "use one of trace, debug, info, warn, error, critical, off.");
  }
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("coexist", sink);
  if (format == Format::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

std::string Value(std::string_view value) {
  bool needs_quotes = value.empty() || value.find_first_of(" \"=\n\r\t") != std::string_view::npos;
  if (!needs_quotes) return std::string(value);
  std::string out = "\"";
  // One record, one line: a server message's DETAIL and CONTEXT lines are
  // escaped, so grep and journald see them with their record.
  for (char c : value) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace coexist::log

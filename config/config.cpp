#include "config/config.h"

#include <fstream>
#include <sstream>

#include "config/yaml_reader.h"

namespace coexist::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

void ReadDatabase(Section& s, DatabaseConfig& out) {
  s.OptionalString("url", out.url);
  s.String("application_name", out.application_name);
  s.Duration("statement_timeout", out.statement_timeout, milliseconds(1), hours(24));
  s.Finish();
}

void ReadLog(Section& s, LogConfig& out) {
  s.Enum("level", out.level, {"trace", "debug", "info", "warn", "error", "critical", "off"});
  s.Enum("format", out.format, {"text", "json"});
  s.Finish();
}

void ReadTarget(Section& s, db::TargetTable& out) {
  s.QualifiedName("table", out.schema, out.table);
  s.Identifier("key_column", out.key_column);
  s.Identifier("version_column", out.version_column);
  s.OptionalIdentifier("owner_column", out.owner_column);
  s.Finish();
}

void ReadBatch(Section& s, BatchConfig& out) {
  s.String("job", out.job);
  s.Int("chunk_size", out.chunk_size, 1, 100000);
  s.Int("workers", out.workers, 1, 64);
  s.Int("max_attempts", out.max_attempts, 1, 1000);
  s.Finish();
}

Config Read(const YAML::Node& root, const std::string& name) {
  Config config;
  config.source = name;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    Section top(YAML::Node(YAML::NodeType::Map), "", name);
    top.Fail(root, "", "the file must be a map of sections (database:, target:, batch:, ...)");
  }
  Section top(root, "", name);
  if (auto s = top.Map("database")) ReadDatabase(*s, config.database);
  if (auto s = top.Map("log")) ReadLog(*s, config.log);
  if (auto s = top.Map("target")) ReadTarget(*s, config.target);
  if (auto s = top.Map("batch")) ReadBatch(*s, config.batch);
  top.Finish();
  return config;
}

}  // namespace

Config LoadString(const std::string& yaml, const std::string& name) {
  return Read(ParseYaml(yaml, name), name);
}

Config LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError({path, 0, 0}, "", "cannot read the file",
                      "check the path and its permissions.");
  }
  std::stringstream text;
  text << in.rdbuf();
  return LoadString(text.str(), path);
}

}  // namespace coexist::config

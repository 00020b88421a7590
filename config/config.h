#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "db/target_table.h"

namespace coexist::config {

using std::chrono::milliseconds;

// `database:` — where the data is. Without a url (and without --database-url,
// COEXIST_DATABASE_URL or PG* variables) coexist uses the `db up` cluster or
// starts a throwaway one; see db/server.h.
struct DatabaseConfig {
  // libpq URL or key=value string; "${VAR}" substitution keeps secrets out of
  // the file. Never logged.
  std::optional<std::string> url;
  // application_name of the batch's connections.
  std::string application_name = "coexist-batch";
  // How long one statement of the batch may run before it is cancelled.
  milliseconds statement_timeout = std::chrono::minutes(5);
};

// `log:` — defaults for --log-level and --log-format (the flags win).
struct LogConfig {
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  std::string format = "text";  // text or json
};

// `batch:` — how the batch claims and applies items.
struct BatchConfig {
  // The job's name: its queue items, runs and advisory lock are keyed by it.
  std::string job = "default";
  // Items claimed and applied in one transaction. 1..100000.
  int chunk_size = 500;
  // Worker threads in one process, each with its own connection. 1..64.
  int workers = 1;
  // Attempts before a failing item is marked dead. 1..1000.
  int max_attempts = 5;
};

// A validated configuration. Load* functions return it whole or throw
// ConfigError; nothing downstream re-validates.
struct Config {
  std::string source;  // the file it came from, for messages
  DatabaseConfig database;
  LogConfig log;
  db::TargetTable target;
  BatchConfig batch;
};

// Reads and validates a YAML file. Throws ConfigError (with file:line:column)
// for every problem: unreadable file, YAML syntax, unknown keys, wrong types,
// out-of-range values, bad durations and names, missing ${VARIABLES}.
Config LoadFile(const std::string& path);
// The same for YAML text; `name` stands for the file in messages.
Config LoadString(const std::string& yaml, const std::string& name);

}  // namespace coexist::config

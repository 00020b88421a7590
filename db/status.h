#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/migrations.h"
#include "db/target_table.h"

namespace pqxx {
class connection_base;
}

namespace coexist::db {

// What `coexist db status` reports: the schema, the target, the queue.
struct Status {
  std::string server_version;
  int installed_version = 0;  // 0: coexist not installed
  int latest_version = 0;     // what this binary carries
  std::vector<AppliedMigration> migrations;
  std::string target;
  std::optional<long long> target_rows;  // nullopt: the table does not exist
  bool version_trigger = false;
  std::map<std::string, long long> queue_by_state;  // queued, deferred, done, dead
  long long live_edit_locks = 0;
  long long expired_edit_locks = 0;
  long long runs = 0;
};

Status ReadStatus(pqxx::connection_base& conn, const TargetTable& target);

}  // namespace coexist::db

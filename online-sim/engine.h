#pragma once

// Private to online-sim/: the state one simulation run shares between its
// virtual users, and the transaction kinds that run on it. Everything here
// lives on one io_context thread, so nothing needs a lock.

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/target_table.h"
#include "online-sim/distributions.h"
#include "online-sim/pool.h"
#include "online-sim/stats.h"

namespace coexist::online_sim {

using Clock = std::chrono::steady_clock;

// Ids of the prepared statements (see Statements() in transactions.cpp).
struct StatementIds {
  int begin, commit, rollback;
  int read_record, lock_record, lock_record_nowait;
  int write_checked, write_blind, decrement_floor, save_checked;
  int acquire_edit_lock, renew_edit_lock, check_edit_lock, release_edit_lock;
  int set_lock_timeout;
};

// Fills the catalog with the statements for this target and value column.
StatementIds AddStatements(Catalog& catalog, const config::TargetTable& target,
                           const std::string& value_column);

// "a"."b" quoting for validated identifiers.
std::string QuoteIdentifier(const std::string& name);

struct Engine {
  Engine(const config::OnlineConfig& online_config, const config::TargetTable& target_table)
      : config(online_config), target(target_table) {}

  const config::OnlineConfig& config;
  const config::TargetTable& target;
  std::string target_regclass;  // "public.products", quoted, for ::regclass
  // One thread runs it: the hint lets Asio skip waking other threads.
  asio::io_context io{1};
  Catalog catalog;
  StatementIds sql{};
  Stats stats;
  std::unique_ptr<Pool> pool;
  std::vector<long long> keys;            // the records users pick from
  std::vector<long long> expected_delta;  // per key index: what saved edits added
  std::vector<char> in_doubt;             // per key index: a write's outcome unknown
  bool stopping = false;
};

// One virtual user's state that transactions need.
struct User {
  int id;
  std::string owner;  // edit-lock owner: "online-user-<id>"
  Random random;
  // The human edit time of the transaction in flight (offline edits): it
  // is not system latency, so RunTransaction leaves it out.
  std::chrono::microseconds human_time{0};
};

// Runs one transaction of `kind` on record index `key`, counts its outcome
// and its latency from `start` (the scheduled start in the open model).
Awaitable<> RunTransaction(Engine& engine, User& user, Kind kind, size_t key,
                           Clock::time_point start);

}  // namespace coexist::online_sim

#pragma once

// Private to online-sim/: the state one simulation run shares between its
// virtual users, and the transaction kinds that run on it. Everything here
// lives on one io_context thread, so nothing needs a lock.

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "config_core/target.h"
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
  int read_records, lock_records, lock_records_nowait, write_records;  // multi_edit
};

// Fills the catalog with the statements for this target, value column and
// key type (format_type of the key column, for the casts of key arrays).
StatementIds AddStatements(Catalog& catalog, const config::TargetTable& target,
                           const std::string& value_column, const std::string& key_type);

// Adds every SQL line of the custom kinds to the catalog: per kind, per
// script line, its statement id (-1 for \set and \sleep lines).
std::vector<std::vector<int>> AddCustomStatements(Catalog& catalog,
                                                  const std::vector<config::CustomKind>& kinds);

// "a"."b" quoting for validated identifiers.
std::string QuoteIdentifier(const std::string& name);

// A PostgreSQL array literal of text elements, each double-quoted with `"`
// and `\` escaped: {"1","2"}; cast to the element type in the statement.
std::string ArrayLiteral(std::span<const std::string> elements);

struct Engine {
  Engine(const config::OnlineConfig& online_config, const config::TargetTable& target_table)
      : config(online_config),
        target(target_table),
        stats(kKindCount + online_config.custom_kinds.size()) {}

  const config::OnlineConfig& config;
  const config::TargetTable& target;
  std::string target_regclass;  // "public.products", quoted, for ::regclass
  // One thread runs it: the hint lets Asio skip waking other threads.
  asio::io_context io{1};
  Catalog catalog;
  StatementIds sql{};
  std::vector<std::vector<int>> custom_sql;  // AddCustomStatements
  Stats stats;
  std::unique_ptr<Pool> pool;
  // The records users pick from, in the key column's order (ORDER BY key):
  // each key as PostgreSQL's text output of the column's type, bound as a
  // text parameter whose type the server infers (or that a statement casts
  // to key_type), so any supported key type works alike.
  std::vector<std::string> keys;
  std::string key_type;                   // format_type of the key column: "bigint", "uuid"
  std::unique_ptr<KeyChooser> chooser;    // draws key indexes by online.key_distribution
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

// Runs one transaction of kind index `kind` (a Kind, or kKindCount + i for
// the i-th custom kind) on record index `key` (multi_edit's first record;
// custom kinds draw their own), counts its outcome and its latency from
// `start` (the scheduled start in the open model).
Awaitable<> RunTransaction(Engine& engine, User& user, size_t kind, size_t key,
                           Clock::time_point start);

}  // namespace coexist::online_sim

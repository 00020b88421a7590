#pragma once

// The PostgreSQL cluster the chaos suite runs against (a throwaway one of
// its own, with few connection slots), its roles, and the template database
// every iteration's database is cloned from.
//
// Roles, as docs/operations.md ("Database roles") grants them: the batch
// (chaos_batch: no superuser, pg_signal_backend and pg_read_all_stats, the
// tables' rights; runs with --no-install) and the online application
// (chaos_online). chaos_hog only connects: it takes connection slots.
// The template holds the coexist schema, the demo table public.products
// (kRecords rows, the batch moves its `settled` column), the guard trigger,
// and two ledgers: chaos_ledger (one row per item the operation applied,
// written in the operation's statement) and online_ledger (one row per
// online write that committed, written in that write's transaction).

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "db/cluster.h"

namespace coexist::chaos {

enum class Role { kSuperuser, kBatch, kOnline, kHog };

class Lab {
 public:
  // Slots: a few faults fill them; 3 of them stay reserved for superusers
  // (the driver's own probes).
  static constexpr int kMaxConnections = 40;
  static constexpr long long kRecords = 200;
  static constexpr const char* kTemplate = "chaos_template";

  // Starts the cluster and builds the template. `work_dir` receives the
  // iterations' configurations and logs.
  explicit Lab(std::filesystem::path work_dir);

  std::string Conninfo(const std::string& dbname, Role role = Role::kSuperuser) const;
  const std::filesystem::path& work_dir() const { return work_dir_; }
  // Keep every iteration's folder, not only those of iterations that
  // violated an invariant.
  bool keep_logs() const { return keep_logs_; }
  void set_keep_logs(bool keep) { keep_logs_ = keep; }

  // A fresh database cloned from the template; its name.
  std::string CreateDatabase();
  void DropDatabase(const std::string& name);

  // Stops the server (fast or immediate), keeps it down for `down`, starts it.
  void RestartServer(db::TempCluster::StopMode mode, std::chrono::milliseconds down);

 private:
  void BuildTemplate();

  std::filesystem::path work_dir_;
  std::unique_ptr<db::TempCluster> cluster_;
  int databases_ = 0;
  bool keep_logs_ = false;
};

// The coexist executable the suite drives.
std::string CoexistBinary();

}  // namespace coexist::chaos

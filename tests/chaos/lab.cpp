#include "tests/chaos/lab.h"

#include <fstream>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>

#include "common/subprocess.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/install.h"
#include "tests/support/documented_grants.h"

namespace coexist::chaos {
namespace {

// What the operation and the online writers need beyond the documented
// grants (docs/operations.md, "Database roles", run as written): the two
// ledgers.
constexpr const char* kLedgerGrants = R"sql(
  GRANT SELECT, INSERT ON public.online_ledger TO chaos_online;
  GRANT INSERT ON public.chaos_ledger TO chaos_batch;
)sql";

const char* RoleName(Role role) {
  switch (role) {
    case Role::kBatch:
      return "chaos_batch";
    case Role::kOnline:
      return "chaos_online";
    case Role::kHog:
      return "chaos_hog";
    case Role::kSuperuser:
      break;
  }
  return nullptr;
}

}  // namespace

std::string CoexistBinary() { return COEXIST_BINARY; }

Lab::Lab(std::filesystem::path work_dir) : work_dir_(std::move(work_dir)) {
  std::filesystem::create_directories(work_dir_);
  db::ClusterOptions options;
  options.max_connections = kMaxConnections;
  cluster_ = db::TempCluster::Start(options);
  BuildTemplate();
}

std::string Lab::Conninfo(const std::string& dbname, Role role) const {
  std::string conninfo = cluster_->ConnectionString(dbname);
  // libpq takes the last value of a repeated keyword.
  if (const char* name = RoleName(role)) conninfo += std::string(" user=") + name;
  return conninfo;
}

void Lab::BuildTemplate() {
  {
    auto admin = db::Connect(Conninfo("postgres"), "chaos-driver");
    pqxx::nontransaction tx(*admin);
    // chaos_batch and chaos_online are created by the documented grants.
    tx.exec(std::string("CREATE ROLE ") + RoleName(Role::kHog) + " LOGIN");
    tx.exec(std::string("CREATE DATABASE ") + kTemplate);
  }
  {
    auto conn = db::Connect(Conninfo(kTemplate), "chaos-driver");
    db::SeedDemoTable(*conn, kRecords);
    pqxx::work tx(*conn);
    tx.exec(
        "CREATE TABLE public.chaos_ledger (uid bigint NOT NULL, item_key bigint NOT NULL,"
        " qty bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())");
    tx.exec(
        "CREATE TABLE public.online_ledger (key bigint NOT NULL, delta bigint NOT NULL,"
        " at timestamptz NOT NULL DEFAULT clock_timestamp())");
    tx.commit();
  }
  // The owner installs the guard trigger (`coexist db install`); the batch
  // role then runs with --no-install.
  auto config = work_dir_ / "install.yaml";
  std::ofstream(config) << "batch: {job: chaos}\n";
  auto install = RunCommand({CoexistBinary(), "--database-url", Conninfo(kTemplate), "--config",
                             config.string(), "db", "install"});
  if (install.status != 0) {
    throw std::runtime_error("coexist db install failed (" + std::to_string(install.status) +
                             "): " + install.output);
  }
  auto conn = db::Connect(Conninfo(kTemplate), "chaos-driver");
  pqxx::work tx(*conn);
  tx.exec(testing::DocumentedGrants(COEXIST_SOURCE_DIR, "chaos_online", "chaos_batch"));
  tx.exec(kLedgerGrants);
  tx.commit();
}

std::string Lab::CreateDatabase() {
  std::string name = "chaos_" + std::to_string(++databases_);
  auto admin = db::Connect(Conninfo("postgres"), "chaos-driver");
  pqxx::nontransaction(*admin).exec("CREATE DATABASE " + name + " TEMPLATE " + kTemplate);
  return name;
}

void Lab::DropDatabase(const std::string& name) {
  auto admin = db::Connect(Conninfo("postgres"), "chaos-driver");
  pqxx::nontransaction(*admin).exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
}

void Lab::RestartServer(db::TempCluster::StopMode mode, std::chrono::milliseconds down) {
  cluster_->StopServer(mode);
  std::this_thread::sleep_for(down);
  cluster_->StartServer();
}

}  // namespace coexist::chaos

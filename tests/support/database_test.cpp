#include "tests/support/database_test.h"

#include <fmt/format.h>

#include <atomic>

#include "db/connection.h"
#include "db/failure.h"
#include "db/target_table.h"
#include "schema/install.h"

namespace coexist::testing {
namespace {

ClusterEnvironment* g_environment = nullptr;
constexpr const char* kTemplate = "coexist_template";

}  // namespace

ClusterEnvironment& ClusterEnvironment::Get() { return *g_environment; }

void ClusterEnvironment::SetUp() {
  g_environment = this;
  cluster_ = db::TempCluster::Start();
  {
    auto admin = db::Connect(cluster_->ConnectionString("postgres"));
    pqxx::nontransaction(*admin).exec(std::string("CREATE DATABASE ") + kTemplate);
  }
  auto conn = db::Connect(cluster_->ConnectionString(kTemplate));
  db::SeedDemoTable(*conn, kTemplateRecords);
}

void ClusterEnvironment::TearDown() { cluster_.reset(); }

void DatabaseTest::SetUp() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  database_ = fmt::format("t{}_{}", ++counter, getpid());
  auto& env = ClusterEnvironment::Get();
  auto admin = db::Connect(env.ConnectionString("postgres"));
  pqxx::nontransaction(*admin).exec("CREATE DATABASE " + database_ + " TEMPLATE " + kTemplate);
  conninfo_ = env.ConnectionString(database_);
  RecordProperty("database", database_ + " for " + info->name());
}

void DatabaseTest::TearDown() {
  auto admin = db::Connect(ClusterEnvironment::Get().ConnectionString("postgres"));
  pqxx::nontransaction(*admin).exec("DROP DATABASE IF EXISTS " + database_ + " WITH (FORCE)");
}

std::unique_ptr<pqxx::connection> DatabaseTest::Connect(const std::string& application_name) {
  return db::Connect(conninfo_, application_name);
}

std::unique_ptr<pqxx::connection> DatabaseTest::ConnectOnline(const std::string& application_name) {
  QueryValue(
      "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'coexist_web') THEN "
      "CREATE ROLE coexist_web LOGIN; END IF; END$$");
  QueryValue("GRANT SELECT, UPDATE ON products TO coexist_web");
  return db::Connect(conninfo_ + " user=coexist_web", application_name);
}

std::string DatabaseTest::QueryValue(const std::string& sql) {
  auto conn = Connect();
  pqxx::work tx(*conn);
  auto result = tx.exec(sql);
  tx.commit();
  return result.empty() || result[0][0].is_null() ? "" : result[0][0].as<std::string>();
}

std::string SqlStateOf(pqxx::connection_base& conn, const std::string& sql) {
  try {
    pqxx::work tx(conn);
    tx.exec(sql);
    tx.commit();
    return "";
  } catch (const pqxx::sql_error& e) {
    // libpqxx 6.4 leaves sqlstate() empty on some errors (42501): never
    // report a failure as "" (success).
    std::string state = db::SqlStateOf(e);
    return state.empty() ? std::string("(no SQLSTATE) ") + e.what() : state;
  }
}

}  // namespace coexist::testing

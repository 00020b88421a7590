#pragma once

// Test support: one throwaway PostgreSQL cluster per test binary, and a fresh
// database per test cloned from a prepared template. Include only from test
// .cpp files (it brings in libpqxx).

#include <gtest/gtest.h>

#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "db/cluster.h"

namespace coexist::testing {

// Started once by the test binary's main (tests/support/main.cpp). The
// template database "coexist_template" holds the installed coexist schema and
// the demo table public.products with kTemplateRecords rows (stock 1000),
// version trigger included. A test that cannot reach the cluster fails.
class ClusterEnvironment : public ::testing::Environment {
 public:
  static constexpr long long kTemplateRecords = 100;

  void SetUp() override;
  void TearDown() override;

  static ClusterEnvironment& Get();
  db::TempCluster& cluster() { return *cluster_; }
  std::string ConnectionString(const std::string& dbname) const {
    return cluster_->ConnectionString(dbname);
  }

 private:
  std::unique_ptr<db::TempCluster> cluster_;
};

// A test with its own database, a copy of coexist_template, dropped after.
class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  const std::string& conninfo() const { return conninfo_; }
  const std::string& database_name() const { return database_; }
  std::unique_ptr<pqxx::connection> Connect(const std::string& application_name = "coexist-test");
  // An online user's session as coexist_web, a role that is not a superuser
  // (the test cluster's own user is one, and batch_priority never signals
  // those), with SELECT and UPDATE on products: the rights it had before
  // coexist.
  std::unique_ptr<pqxx::connection> ConnectOnline(const std::string& application_name);
  // Runs one statement in its own transaction and returns the first field.
  std::string QueryValue(const std::string& sql);
  // QueryValue for a count (or any integer).
  long long Count(const std::string& sql) { return std::stoll(QueryValue(sql)); }
  // The test cluster runs with synchronous_commit off (fast, and a fast or
  // clean stop loses nothing), so an immediate stop drops the last ~200 ms
  // of commits. A test that counts on a commit surviving a crash (a run's
  // row, say) turns it on for its database, as a production server has it.
  void MakeCommitsDurable() {
    QueryValue("ALTER DATABASE " + database_name() + " SET synchronous_commit = on");
  }

 private:
  std::string database_;
  std::string conninfo_;
};

// Runs `sql` and returns the SQLSTATE it fails with, or "" when it succeeds.
std::string SqlStateOf(pqxx::connection_base& conn, const std::string& sql);

}  // namespace coexist::testing

// main() of every test binary that needs PostgreSQL: one throwaway cluster
// for the whole binary (see database_test.h).

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "tests/support/database_test.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  ::testing::AddGlobalTestEnvironment(new coexist::testing::ClusterEnvironment);
  return RUN_ALL_TESTS();
}

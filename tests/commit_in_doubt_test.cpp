// A chunk's COMMIT whose outcome is unknown (db::FailureKind::kInDoubt):
// the worker reads back what committed and never applies a chunk again
// blindly. Every "applied once" is read from a ledger the operation writes.

#include <gtest/gtest.h>

#include <stdexcept>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "batch/worker.h"
#include "config/config.h"
#include "schema/queue_store.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

class CommitInDoubtTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  }

  config::Config Config() {
    return config::LoadString(
        "batch: {job: j, chunk_size: 10, workers: 1, max_attempts: 2}\n"
        "policy:\n  name: skip_locked\n"
        "operation:\n"
        "  chunk_sql: |\n"
        "    WITH u AS (UPDATE products SET stock = stock + 1\n"
        "               WHERE id = ANY ($1::bigint[]) RETURNING id)\n"
        "    INSERT INTO ledger (key) SELECT unnest($1::bigint[])\n",
        "test.yaml");
  }

  // Items for keys from..to; every other one with an idempotency key, so
  // that done items are kept both ways (in the queue, in done chunks).
  void Enqueue(long long from, long long to) {
    std::vector<EnqueueItem> items;
    for (long long k = from; k <= to; ++k) {
      std::optional<std::string> idempotency_key;
      if (k % 2 == 0) idempotency_key = "k" + std::to_string(k);
      items.push_back({std::to_string(k), "{}", idempotency_key});
    }
    EnqueueItems(conninfo(), "j", items);
  }

  std::vector<long long> ItemIds(const std::string& where) {
    std::vector<long long> ids;
    auto conn = Connect();
    pqxx::read_transaction tx(*conn);
    for (const auto& row :
         tx.exec("SELECT item_id FROM coexist.items WHERE " + where + " ORDER BY item_id")) {
      ids.push_back(row[0].as<long long>());
    }
    return ids;
  }
};

TEST_F(CommitInDoubtTest, TheQueueTellsWhetherARunsChunkCommitted) {
  Enqueue(1, 6);
  auto run = batch::Run(conninfo(), Config());
  ASSERT_EQ(run.counts.done, 6);
  Enqueue(7, 8);
  auto done = ItemIds("state = 'done'");
  auto queued = ItemIds("state = 'queued'");
  ASSERT_EQ(done.size(), 6u);
  ASSERT_EQ(queued.size(), 2u);

  auto conn = Connect();
  db::QueueStore queue(*conn, {.job = "j"});
  pqxx::read_transaction tx(*conn);
  EXPECT_EQ(queue.DoneByRun(tx, run.run_id, done), done);
  EXPECT_EQ(ReadChunkCommit(queue, tx, run.run_id, done), ChunkCommit::kCommitted);
  EXPECT_EQ(ReadChunkCommit(queue, tx, run.run_id, queued), ChunkCommit::kRolledBack);
  // Done, but by another run: not this chunk's commit.
  EXPECT_EQ(ReadChunkCommit(queue, tx, run.run_id + 1, done), ChunkCommit::kRolledBack);
  EXPECT_EQ(ReadChunkCommit(queue, tx, run.run_id, {}), ChunkCommit::kUnknown);
  EXPECT_THROW(ReadChunkCommit(queue, tx, run.run_id, {done[0], queued[0]}), std::logic_error);
}

// The first chunk's COMMIT fails with 40003 from a deferred trigger, which
// libpqxx reports as in_doubt_error (the connection stays open); the server
// rolled it back. The worker reads that back, claims the items again and
// the run ends as if nothing had happened: each key applied once.
TEST_F(CommitInDoubtTest, AChunkWhoseCommitIsInDoubtIsAppliedAgainOnlyWhenItRolledBack) {
  QueryValue(R"sql(
    CREATE SEQUENCE commits;
    CREATE FUNCTION unknown_once() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('commits') = 1 THEN
        RAISE EXCEPTION 'completion unknown' USING ERRCODE = '40003';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER unknown_once AFTER INSERT ON ledger
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION unknown_once();
    SELECT 1)sql");
  Enqueue(1, 25);
  auto run = batch::Run(conninfo(), Config());
  EXPECT_GT(Count("SELECT last_value FROM commits"), 1);  // the trigger did fire
  EXPECT_EQ(run.outcome, "succeeded");
  EXPECT_EQ(run.counts.done, 25);
  EXPECT_EQ(run.counts.claimed, 25);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 25);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), 25);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 25);
}

}  // namespace
}  // namespace coexist::batch

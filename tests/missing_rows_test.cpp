// Keys exactly: enqueue takes a key only when it is a value of the key
// column's type (cast there and back unchanged; text must parse), refusing
// the whole enqueue otherwise, and a key with no row in the target is
// counted by enqueue and by the run, which applies, skips or fails the item
// as batch.missing_rows says, with an items_missing event naming the keys.
// The target is shaped like a film-rental application's: an integer key
// and a numeric column a typo can select instead of the key.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "common/error.h"
#include "config/config.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

class MissingRowsTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue(
        "CREATE SCHEMA app;"
        "CREATE TABLE app.film (film_id integer PRIMARY KEY, rental_rate numeric(4,2) NOT NULL,"
        "  rentals integer NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 0);"
        "INSERT INTO app.film (film_id, rental_rate) VALUES (1, 3.05), (2, 7.64), (3, 5.23);"
        "CREATE TABLE app.orders (id uuid PRIMARY KEY, version bigint NOT NULL DEFAULT 0)");
    film_.schema = "app";
    film_.table = "film";
    film_.key_column = "film_id";
  }

  // The message and exit status of `enqueue`, which must refuse.
  Error Refusal(const std::function<void()>& enqueue) {
    try {
      enqueue();
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "the enqueue was not refused";
    return Error(ExitCode::kOk, "");
  }

  EnqueueResult Select(const std::string& sql, bool refuse_missing = false) {
    return EnqueueSelect(conninfo(), "films", sql, "integer",
                         {.table = &film_, .refuse_missing = refuse_missing});
  }

  // A job over app.film whose operation creates the rows it lacks.
  config::Config JobConfig(const std::string& missing_rows) {
    return config::LoadString(
        "target: {table: app.film, key_column: film_id}\n"
        "batch: {job: films, chunk_size: 10" +
            (missing_rows.empty() ? "" : ", missing_rows: " + missing_rows) +
            "}\n"
            "policy: {name: skip_locked}\n"
            "operation:\n"
            "  chunk_sql: |\n"
            "    INSERT INTO app.film (film_id, rental_rate, rentals)\n"
            "    SELECT k, 0, 1 FROM unnest($1::integer[]) AS k\n"
            "    ON CONFLICT (film_id) DO UPDATE SET rentals = app.film.rentals + 1\n",
        "films.yaml");
  }

  // The keys, and the item ids, the run's items_missing events name, in
  // order (one event per chunk that met some).
  std::string EventKeys() {
    return QueryValue(
        "SELECT string_agg(k, ' ' ORDER BY k) FROM coexist.events, "
        "jsonb_array_elements_text(details->'keys') AS k WHERE kind = 'items_missing'");
  }
  std::string EventItemIds() {
    return QueryValue(
        "SELECT string_agg(i, ' ' ORDER BY i::bigint) FROM coexist.events, "
        "jsonb_array_elements_text(details->'item_ids') AS i WHERE kind = 'items_missing'");
  }

  config::TargetTable film_;
};

// The typo of the report: rental_rate instead of film_id. 3.05 would be
// film 3, 7.64 film 8; nothing is enqueued instead, and the message names
// the column, both types and the values.
TEST_F(MissingRowsTest, ALossyNumericKeyIsRefusedAndNothingIsEnqueued) {
  auto e = Refusal([&] { Select("SELECT rental_rate FROM app.film WHERE film_id <= 3"); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "3 of the query's keys (numeric) are not a value of the key column "
               "app.film.film_id (integer): 3.05, 7.64, 5.23");
  EXPECT_EQ(e.hint(),
            "nothing was enqueued; a key is taken when it casts to integer and back to numeric "
            "unchanged (3.00 is 3; 3.05 is refused, never rounded). Return the column's own "
            "values (SELECT film_id FROM ...), or cast in the query where that is what you mean "
            "(round(x)::integer).");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
  // One lossy key among exact ones refuses them all.
  e = Refusal([&] { Select("SELECT x FROM unnest(ARRAY[1.00, 2.5, 3]) AS x"); });
  EXPECT_STREQ(e.what(),
               "1 of the query's keys (numeric) is not a value of the key column "
               "app.film.film_id (integer): 2.5");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

TEST_F(MissingRowsTest, AnExactNumericOrTextKeyIsTaken) {
  auto result = Select("SELECT x FROM unnest(ARRAY[3.00, 2.0]) AS x");
  EXPECT_EQ(result.added, 2);
  result = Select("SELECT '1'::text UNION ALL SELECT '01'::text");
  EXPECT_EQ(result.added, 2);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key, ' ' ORDER BY item_id) FROM coexist.items"),
            "3 2 1 1");
  EXPECT_EQ(result.missing, 0);
  EXPECT_TRUE(result.missing_counted);
}

TEST_F(MissingRowsTest, TextThatIsNoIntegerIsRefusedWithExit65) {
  auto e = Refusal([&] { Select("SELECT x FROM unnest(ARRAY['2', 'x3', '3.5']) AS x"); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "2 of the query's keys (text) are not a value of the key column app.film.film_id "
               "(integer): x3, 3.5");
  EXPECT_NE(e.hint().find("a key given as text is taken when it parses as integer"),
            std::string::npos)
      << e.hint();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

TEST_F(MissingRowsTest, AnOutOfRangeKeyIsRefusedWithExit65) {
  auto e = Refusal([&] { Select("SELECT x FROM unnest(ARRAY[1, 3000000000]) AS x"); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "1 of the query's keys (bigint) is not a value of the key column app.film.film_id "
               "(integer): 3000000000");
  // From a file: text that is out of the key type's range.
  std::vector<EnqueueItem> items = {{"1", "{}", {}, {}, "", 1},
                                    {"3000000000", "{}", {}, {}, "", 2}};
  e = Refusal([&] { EnqueueItems(conninfo(), "films", items, "integer", {.table = &film_}); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "1 key (text) is not a value of the key column app.film.film_id (integer): "
               "'3000000000' (line 2)");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

TEST_F(MissingRowsTest, AGarbageUuidIsRefusedFromAFileAndFromAQuery) {
  config::TargetTable orders{.schema = "app", .table = "orders"};
  std::vector<EnqueueItem> items = {{QueryValue("SELECT gen_random_uuid()::text"), "{}", {}},
                                    {"not-a-uuid", "{}", {}, {}, "", 2},
                                    {"{1,2}", "{}", {}, {}, "", 3}};
  auto e = Refusal([&] { EnqueueItems(conninfo(), "o", items, "uuid", {.table = &orders}); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "2 keys (text) are not a value of the key column app.orders.id (uuid): "
               "'not-a-uuid' (line 2), '{1,2}' (line 3)");
  e = Refusal([&] { EnqueueSelect(conninfo(), "o", "SELECT 'nope'", "uuid", {.table = &orders}); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(),
               "1 of the query's keys (text) is not a value of the key column app.orders.id "
               "(uuid): nope");
  // A type with no cast to the key's at all.
  e = Refusal([&] { EnqueueSelect(conninfo(), "o", "SELECT 42", "uuid", {.table = &orders}); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_NE(std::string(e.what()).find("the query's keys (integer) do not cast to the key column "
                                       "app.orders.id (uuid)"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

TEST_F(MissingRowsTest, EnqueueCountsKeysWithNoRowAndMayRefuseThem) {
  auto result = Select("SELECT g FROM generate_series(1, 5) g");
  EXPECT_EQ(result.added, 5);
  EXPECT_EQ(result.missing, 2);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"4", "5"}));
  // Duplicates are not counted again: only added items are.
  std::vector<EnqueueItem> items = {{"2", "{}", "a"}, {"9", "{}", "b"}, {"9", "{}", "b"}};
  result = EnqueueItems(conninfo(), "films", items, "integer", {.table = &film_});
  EXPECT_EQ(result.added, 2);
  EXPECT_EQ(result.duplicates, 1);
  EXPECT_EQ(result.missing, 1);
  // --refuse-missing: nothing is added.
  auto e = Refusal([&] { Select("SELECT g FROM generate_series(3, 6) g", true); });
  EXPECT_EQ(e.code(), ExitCode::kDataError);
  EXPECT_STREQ(e.what(), "3 items name a key with no row in app.film: 4, 5, 6");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 7);
}

// apply (the default): the operation runs for them too (here it creates
// the rows), and the run counts them.
TEST_F(MissingRowsTest, ApplyRunsTheOperationAndCountsThem) {
  Select("SELECT g FROM generate_series(1, 5) g");
  auto summary = batch::Run(conninfo(), JobConfig(""));
  EXPECT_EQ(summary.counts.done, 5);
  EXPECT_EQ(summary.counts.missing, 2);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kOk);
  EXPECT_EQ(Count("SELECT count(*) FROM app.film WHERE rentals = 1"), 5);
  EXPECT_EQ(nlohmann::json::parse(SummaryJson(summary))["missing"], 2);
  EXPECT_EQ(EventKeys(), "4 5");
  EXPECT_EQ(Count("SELECT sum((details->>'items')::int) FROM coexist.events "
                  "WHERE kind = 'items_missing' AND details->>'missing_rows' = 'apply' "
                  "AND details->>'target' = 'app.film'"),
            2);
}

// skip: done without the operation, counted.
TEST_F(MissingRowsTest, SkipCompletesThemWithoutTheOperation) {
  std::vector<EnqueueItem> items;
  for (int k = 1; k <= 5; ++k) items.push_back({std::to_string(k), "{}", "k" + std::to_string(k)});
  EnqueueItems(conninfo(), "films", items, "integer");
  auto summary = batch::Run(conninfo(), JobConfig("skip"));
  EXPECT_EQ(summary.counts.done, 5);
  EXPECT_EQ(summary.counts.missing, 2);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kOk);
  EXPECT_EQ(Count("SELECT count(*) FROM app.film"), 3) << "no row was created";
  EXPECT_EQ(Count("SELECT count(*) FROM app.film WHERE rentals = 1"), 3);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 5);
  EXPECT_EQ(EventKeys(), "4 5");
  EXPECT_EQ(EventItemIds(), QueryValue("SELECT string_agg(item_id::text, ' ' ORDER BY item_id) "
                                       "FROM coexist.items WHERE record_key IN ('4', '5')"));
}

// fail: dead at once, with the reason, whatever attempts are left.
TEST_F(MissingRowsTest, FailKillsThemAtOnce) {
  Select("SELECT g FROM generate_series(1, 5) g");
  auto summary = batch::Run(conninfo(), JobConfig("fail"));
  EXPECT_EQ(summary.counts.done, 3);
  EXPECT_EQ(summary.counts.dead, 2);
  EXPECT_EQ(summary.counts.missing, 2);
  EXPECT_EQ(summary.counts.claimed, 5);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDead);
  EXPECT_EQ(Count("SELECT count(*) FROM app.film"), 3);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ': ' || last_error, '; ' ORDER BY "
                       "record_key) FROM coexist.items WHERE state = 'dead'"),
            "4: no row: app.film has no row for key 4 (batch.missing_rows: fail); "
            "5: no row: app.film has no row for key 5 (batch.missing_rows: fail)");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_dead'"), 2);
  EXPECT_EQ(EventKeys(), "4 5");
}

}  // namespace
}  // namespace coexist::batch

// Rolling coexist onto a live application (batch/install.h;
// docs/configuration.md, "Installing on a live database"). The schema is
// shaped like a real application's that nobody here wrote: its own schema,
// BEFORE UPDATE last-modified triggers on its tables, numeric columns, a
// table partitioned by date, one partitioned by its key, a composite key, a
// view; and the application's own role with only SELECT and UPDATE, the
// rights it had before coexist. An install, runs under every policy and an
// uninstall must be something that role never notices: the only errors it
// may meet are the policies' CX codes while a run works, and afterwards the
// schema is as it was.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>

#include "batch/check.h"
#include "batch/install.h"
#include "batch/runner.h"
#include "common/subprocess.h"
#include "config/config.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/failure.h"
#include "tests/support/database_test.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kApplication = R"sql(
  CREATE SCHEMA shop;
  CREATE FUNCTION shop.last_updated() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN NEW.last_update := now(); RETURN NEW; END$$;
  CREATE TABLE shop.film (
    film_id     integer PRIMARY KEY,
    title       text NOT NULL,
    rental_rate numeric(6,2) NOT NULL,
    rentals     integer NOT NULL DEFAULT 0,
    last_update timestamptz NOT NULL DEFAULT now());
  CREATE TRIGGER last_updated BEFORE UPDATE ON shop.film
    FOR EACH ROW EXECUTE FUNCTION shop.last_updated();
  INSERT INTO shop.film (film_id, title, rental_rate)
    SELECT g, 'film ' || g, 0.99 + (g % 3) * 2 FROM generate_series(1, 100) g;
  CREATE TABLE shop.film_actor (
    actor_id    integer NOT NULL,
    film_id     integer NOT NULL REFERENCES shop.film,
    last_update timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (actor_id, film_id));
  CREATE TRIGGER last_updated BEFORE UPDATE ON shop.film_actor
    FOR EACH ROW EXECUTE FUNCTION shop.last_updated();
  INSERT INTO shop.film_actor SELECT a, f FROM generate_series(1, 5) a, generate_series(1, 10) f;
  CREATE TABLE shop.payment (
    payment_id   integer NOT NULL,
    payment_date timestamptz NOT NULL,
    amount       numeric(5,2) NOT NULL,
    PRIMARY KEY (payment_date, payment_id)) PARTITION BY RANGE (payment_date);
  CREATE TABLE shop.payment_2026_h1 PARTITION OF shop.payment
    FOR VALUES FROM ('2026-01-01') TO ('2026-07-01');
  CREATE TABLE shop.payment_2026_h2 PARTITION OF shop.payment
    FOR VALUES FROM ('2026-07-01') TO ('2027-01-01');
  INSERT INTO shop.payment
    SELECT g, timestamptz '2026-01-01' + g * interval '1 day', 1.50 FROM generate_series(1, 300) g;
  CREATE TABLE shop.rental (
    rental_id   bigint NOT NULL,
    returned    integer NOT NULL DEFAULT 0,
    last_update timestamptz NOT NULL DEFAULT now()) PARTITION BY RANGE (rental_id);
  CREATE TABLE shop.rental_1 PARTITION OF shop.rental FOR VALUES FROM (1) TO (1000);
  CREATE TABLE shop.rental_2 PARTITION OF shop.rental FOR VALUES FROM (1000) TO (2000);
  ALTER TABLE shop.rental ADD PRIMARY KEY (rental_id);
  CREATE TRIGGER last_updated BEFORE UPDATE ON shop.rental
    FOR EACH ROW EXECUTE FUNCTION shop.last_updated();
  INSERT INTO shop.rental (rental_id) SELECT g FROM generate_series(1, 1500) g;
  CREATE VIEW shop.film_list AS SELECT film_id, title, rental_rate FROM shop.film;
  SELECT 1)sql";

// The film job under `policy_yaml`; every item adds 0.01 to its film's rate.
std::string FilmConfig(const std::string& policy_yaml) {
  return "target:\n"
         "  table: shop.film\n"
         "  key_column: film_id\n"
         "  owner_column: owner\n"
         "  known_triggers: [last_updated]\n"
         "batch: {job: films, chunk_size: 10, workers: 2, max_attempts: 3}\n"
         "policy:\n" +
         policy_yaml +
         "operation:\n"
         "  chunk_sql: UPDATE shop.film SET rental_rate = rental_rate + 0.01"
         " WHERE film_id = ANY ($1::integer[])\n";
}

// Five policies, each as an operator would write it (docs/policies.md); the
// window is open all day, so the test meets it whenever it runs.
const std::vector<std::pair<std::string, std::string>>& Policies() {
  static const std::vector<std::pair<std::string, std::string>> policies = {
      {"time_window",
       "  name: time_window\n  drain_margin: 0s\n  max_wait: 5s\n"
       "  windows: [{time_zone: UTC, start: \"00:00\", end: \"00:00\"}]\n"},
      {"status_partition", "  name: status_partition\n"},
      {"online_priority", "  name: online_priority\n  max_wait: 5s\n"},
      {"batch_priority",
       "  name: batch_priority\n  cancel_after: 1s\n  terminate_after: 3s\n"
       "  online_application_name: nobody-online%\n"},
      {"skip_locked", "  name: skip_locked\n  max_deferrals: 50\n  on_exhausted: report\n"},
  };
  return policies;
}

// The application's own traffic, as its role, while `running`: each
// statement's SQLSTATE counted ("" for success) and its longest wait.
struct AppTraffic;

// Stops the application's writers when a test leaves early (a failed
// ASSERT), so their threads can be joined.
struct StopWriters {
  AppTraffic& traffic;
  ~StopWriters();
};

struct AppTraffic {
  std::mutex mutex;
  std::map<std::string, long long> states;
  std::map<std::string, std::string> first_message;  // per SQLSTATE
  std::atomic<long long> film_updates{0};
  std::atomic<long long> longest_ms{0};
  std::atomic<bool> running{true};

  long long NotOurs() {
    std::lock_guard lock(mutex);
    long long n = 0;
    for (const auto& [state, count] : states) {
      if (!state.empty() && !state.starts_with("CX")) n += count;
    }
    return n;
  }
  std::string Summary() {
    std::lock_guard lock(mutex);
    std::string text;
    for (const auto& [state, count] : states) {
      text += (state.empty() ? std::string("ok") : state) + "=" + std::to_string(count) + " ";
      if (first_message.contains(state)) text += "(" + first_message[state] + ") ";
    }
    return text;
  }
};

StopWriters::~StopWriters() { traffic.running = false; }

class RolloutTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    // The template's coexist schema and demo table go: this database is the
    // application's, before coexist.
    QueryValue("DROP SCHEMA coexist CASCADE; DROP TABLE public.products; SELECT 1");
    QueryValue(kApplication);
    app_role_ = "app_" + database_name();
    QueryValue("CREATE ROLE " + app_role_ + " LOGIN; GRANT USAGE ON SCHEMA shop TO " + app_role_ +
               "; GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA shop TO " + app_role_ +
               "; SELECT 1");
    dir_ = fs::temp_directory_path() /
           ("coexist-rollout-" + std::to_string(getpid()) + "-" + database_name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  std::string Write(const std::string& yaml, const std::string& name = "job.yaml") {
    auto path = (dir_ / name).string();
    std::ofstream(path) << yaml;
    return path;
  }

  CommandResult Coexist(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {COEXIST_BINARY, "--log-level", "warn", "--database-url",
                                     conninfo()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::unique_ptr<pqxx::connection> ConnectApp(const std::string& application_name) {
    return db::Connect(conninfo() + " user=" + app_role_, application_name);
  }

  // The application's writers: film's rentals (+1 per success, so none may
  // be lost) and the partitioned rental table, each statement under a
  // lock_timeout an application would set.
  void RunApp(AppTraffic& traffic, int writer) {
    try {
      RunAppWrites(traffic, writer);
    } catch (const std::exception& e) {
      std::lock_guard lock(traffic.mutex);
      ++traffic.states[std::string("writer died: ") + e.what()];
    }
  }
  void RunAppWrites(AppTraffic& traffic, int writer) {
    auto conn = ConnectApp("app-online-" + std::to_string(writer));
    pqxx::nontransaction(*conn).exec("SET lock_timeout = '10s'");
    unsigned seed = 7 + writer;
    while (traffic.running) {
      bool film = rand_r(&seed) % 2 == 0;
      std::string sql = film ? "UPDATE shop.film SET rentals = rentals + 1 WHERE film_id = " +
                                   std::to_string(1 + rand_r(&seed) % 100)
                             : "UPDATE shop.rental SET returned = returned + 1 WHERE rental_id = " +
                                   std::to_string(1 + rand_r(&seed) % 1500);
      auto start = Clock::now();
      std::string state, message;
      try {
        pqxx::nontransaction(*conn).exec(sql);
        if (film) ++traffic.film_updates;
      } catch (const pqxx::sql_error& e) {
        state = db::SqlStateOf(e);  // libpqxx 6.4 leaves 42501's empty
        if (state.empty()) state = "unknown";
        message = e.what();  // whole, with its CONTEXT: where an unexpected error came from
      } catch (const std::exception& e) {
        // Anything else (a broken connection, ...) is counted too, never
        // thrown out of the thread; the writer goes on with a new session.
        state = std::string("exception: ") + e.what();
        message = e.what();
        try {
          conn = ConnectApp("app-online-" + std::to_string(writer));
          pqxx::nontransaction(*conn).exec("SET lock_timeout = '10s'");
        } catch (const std::exception&) {
          std::this_thread::sleep_for(100ms);
        }
      }
      long long ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      for (long long seen = traffic.longest_ms; ms > seen;) {
        if (traffic.longest_ms.compare_exchange_weak(seen, ms)) break;
      }
      std::lock_guard lock(traffic.mutex);
      ++traffic.states[state];
      if (!state.empty() && !traffic.first_message.contains(state)) {
        traffic.first_message[state] = message;
      }
      std::this_thread::sleep_for(2ms);
    }
  }

  std::string SchemaDump() {
    auto bin = db::FindServerBinDir();
    auto out = dir_ / "dump.sql";
    auto result = RunCommand({(bin / "pg_dump").string(), "--schema-only", "--no-owner", "--schema",
                              "shop", "--file", out.string(), "--dbname", conninfo()});
    EXPECT_EQ(result.status, 0) << result.output;
    // pg_dump's \restrict lines carry a new random key each time.
    std::ifstream in(out);
    std::string text;
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("\\restrict") && !line.starts_with("\\unrestrict")) {
        text += line + "\n";
      }
    }
    return text;
  }

  bool CoexistSchemaExists() {
    return QueryValue("SELECT to_regnamespace('coexist') IS NOT NULL") == "t";
  }

  std::string app_role_;
  fs::path dir_;
};

TEST_F(RolloutTest, InstallRunsUnderEveryPolicyAndUninstallTheApplicationNeverNotices) {
  std::string before = SchemaDump();
  AppTraffic traffic;
  std::vector<std::jthread> app;
  for (int w = 0; w < 3; ++w) app.emplace_back([&, w] { RunApp(traffic, w); });
  StopWriters stop_writers{traffic};

  double rates = std::stod(QueryValue("SELECT sum(rental_rate) FROM shop.film"));
  auto film = Write(FilmConfig(Policies()[0].second), "film-time_window.yaml");
  auto install =
      Coexist({"--config", film, "db", "install", "--add-version-column", "--add-owner-column"});
  ASSERT_EQ(install.status, 0) << install.output;
  EXPECT_NE(install.output.find("column version added to shop.film\n"), std::string::npos)
      << install.output;
  EXPECT_NE(install.output.find("column owner added to shop.film\n"), std::string::npos)
      << install.output;
  // Acknowledged in the YAML: no warning about the application's trigger.
  EXPECT_EQ(install.output.find("last_updated"), std::string::npos) << install.output;
  // The table partitioned by its key, installed beside it.
  auto rental = Write(
      "target: {table: shop.rental, key_column: rental_id, known_triggers: [last_updated]}\n"
      "batch: {job: rentals, chunk_size: 50}\n"
      "policy: {name: skip_locked, max_deferrals: 50, on_exhausted: report}\n"
      "operation:\n"
      "  chunk_sql: UPDATE shop.rental SET returned = returned + 1000"
      " WHERE rental_id = ANY ($1::bigint[])\n",
      "rental.yaml");
  auto install_rental = Coexist({"--config", rental, "db", "install", "--add-version-column"});
  ASSERT_EQ(install_rental.status, 0) << install_rental.output;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(traffic.NotOurs(), 0) << "after the install: " << traffic.Summary();

  for (const auto& [name, policy] : Policies()) {
    SCOPED_TRACE(name);
    auto path = Write(FilmConfig(policy), "film-" + name + ".yaml");
    auto enqueue =
        Coexist({"--config", path, "enqueue", "--select", "SELECT film_id FROM shop.film"});
    ASSERT_EQ(enqueue.status, 0) << enqueue.output;
    int left = 1;
    for (int round = 0; round < 10 && left > 0; ++round) {
      auto run = Coexist({"--config", path, "batch", "run"});
      ASSERT_TRUE(run.status == 0 || run.status == 2) << run.status << "\n" << run.output;
      left = static_cast<int>(
          Count("SELECT count(*) FROM coexist.items WHERE job = 'films' AND state <> 'done'"));
    }
    EXPECT_EQ(left, 0);
    // No run works now: the application writes again at once, whatever the
    // policy left (a read_only window's clock runs on).
    auto conn = ConnectApp("app-probe");
    EXPECT_EQ(
        testing::SqlStateOf(*conn, "UPDATE shop.film SET rentals = rentals WHERE film_id = 1"), "");
  }
  auto enqueue_rental =
      Coexist({"--config", rental, "enqueue", "--select", "SELECT rental_id FROM shop.rental"});
  ASSERT_EQ(enqueue_rental.status, 0) << enqueue_rental.output;
  for (int round = 0; round < 10; ++round) {
    if (Coexist({"--config", rental, "batch", "run"}).status == 0) break;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'rentals' AND state = 'done'"),
            1500);

  auto uninstall_rental = Coexist({"--config", rental, "db", "uninstall", "--drop-version-column"});
  ASSERT_EQ(uninstall_rental.status, 0) << uninstall_rental.output;
  auto uninstall = Coexist({"--config", film, "db", "uninstall", "--schema",
                            "--drop-version-column", "--drop-owner-column"});
  ASSERT_EQ(uninstall.status, 0) << uninstall.output;
  std::this_thread::sleep_for(200ms);
  traffic.running = false;
  app.clear();

  // Every item applied once under each of the five policies, no online
  // update lost, and nothing but the policies' own refusals.
  EXPECT_NEAR(std::stod(QueryValue("SELECT sum(rental_rate) FROM shop.film")),
              rates + 100 * 5 * 0.01, 1e-6);
  EXPECT_EQ(Count("SELECT sum(rentals) FROM shop.film"), traffic.film_updates.load());
  EXPECT_EQ(Count("SELECT count(*) FROM shop.rental WHERE returned < 1000"), 0);
  EXPECT_GT(traffic.film_updates.load(), 0);
  EXPECT_EQ(traffic.NotOurs(), 0) << traffic.Summary();
  std::printf("application traffic during the rollout: %s longest %lld ms\n",
              traffic.Summary().c_str(), traffic.longest_ms.load());
  EXPECT_FALSE(CoexistSchemaExists());
  EXPECT_EQ(SchemaDump(), before);
}

// A long transaction on the table while db install creates its triggers:
// the install waits for the table's lock at most --lock-timeout at a time,
// so the writes queued behind its waiting lock wait about that long, not
// until the long transaction ends.
TEST_F(RolloutTest, OnlineWritesWaitAtMostAboutTheLockTimeoutBehindAnInstall) {
  auto config = config::LoadString(FilmConfig(Policies()[2].second), "job.yaml");
  AppTraffic traffic;
  auto blocker = ConnectApp("app-long-transaction");
  pqxx::work held(*blocker);
  // What an UPDATE takes on the table (no row lock, so the application's own
  // writes never wait for it).
  held.exec("LOCK TABLE shop.film IN ROW EXCLUSIVE MODE");
  std::vector<std::jthread> app;
  for (int w = 0; w < 2; ++w) app.emplace_back([&, w] { RunApp(traffic, w); });
  StopWriters stop_writers{traffic};
  std::jthread release([&] {
    std::this_thread::sleep_for(2s);
    try {
      held.commit();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the long transaction failed: " << e.what();
    }
  });
  auto conn = Connect("coexist-install");
  db::LockAttempts locks{.lock_timeout = 100ms, .attempts = 12, .first_backoff = 100ms};
  auto started = Clock::now();
  batch::Install(*conn, config,
                 {.add_version_column = true, .add_owner_column = true, .locks = locks});
  auto took = Clock::now() - started;
  release.join();
  traffic.running = false;
  app.clear();
  std::printf(
      "install took %lld ms beside a 2 s transaction; longest online write %lld ms "
      "(lock_timeout 100 ms)\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
      traffic.longest_ms.load());
  EXPECT_GE(took, 1500ms) << "the install should have waited for the long transaction";
  // Without the bounded waits, writes queue behind the ALTER for the rest of
  // the 2 s transaction.
  EXPECT_LT(traffic.longest_ms.load(), 1000) << traffic.Summary();
  EXPECT_EQ(traffic.NotOurs(), 0) << traffic.Summary();
  EXPECT_EQ(QueryValue("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.film'::regclass"
                       " AND tgname LIKE 'coexist%'"),
            "2");
}

// An UPDATE of a partitioned table locks the parent, then the partition it
// plans for. Each DDL step of an install and an uninstall must take its
// locks in that order too: DROP TRIGGER alone locked the partitions first,
// and an online write arriving between its two locks deadlocked with it.
// Here the application holds the parent (as an UPDATE does before it
// plans) while the step waits, then writes a partition: no deadlock, so
// the step gets its lock at the first attempt once the write commits.
TEST_F(RolloutTest, InstallAndUninstallTakeAPartitionedTablesLocksInTheApplicationsOrder) {
  auto rental = Write(
      "target: {table: shop.rental, key_column: rental_id, known_triggers: [last_updated]}\n"
      "batch: {job: rentals}\n"
      "policy: {name: skip_locked}\n"
      "operation:\n"
      "  chunk_sql: UPDATE shop.rental SET returned = returned + 1000"
      " WHERE rental_id = ANY ($1::bigint[])\n",
      "rental.yaml");
  auto step_beside_a_write = [&](const std::vector<std::string>& args) {
    auto app = ConnectApp("app-online");
    pqxx::work tx(*app);
    tx.exec("SET LOCAL lock_timeout = '20s'");
    tx.exec("LOCK TABLE ONLY shop.rental IN ROW EXCLUSIVE MODE");
    CommandResult step;
    std::jthread ddl([&] { step = Coexist(args); });
    // Until the step waits for the parent (holding what it took before).
    bool waiting = false;
    for (int i = 0; i < 200 && !waiting; ++i) {
      waiting = QueryValue(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation ="
                    " 'shop.rental'::regclass") != "0";
      if (!waiting) std::this_thread::sleep_for(25ms);
    }
    EXPECT_TRUE(waiting) << "the step never waited for the table";
    try {
      tx.exec("UPDATE shop.rental SET returned = returned + 1 WHERE rental_id = 5");
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      ADD_FAILURE() << "the online write failed: " << e.what();
    }
    ddl.join();
    return step;
  };
  auto install = step_beside_a_write({"--config", rental, "db", "install", "--add-version-column"});
  EXPECT_EQ(install.status, 0) << install.output;
  EXPECT_EQ(install.output.find("trying again"), std::string::npos) << install.output;
  auto uninstall =
      step_beside_a_write({"--config", rental, "db", "uninstall", "--drop-version-column"});
  EXPECT_EQ(uninstall.status, 0) << uninstall.output;
  EXPECT_EQ(uninstall.output.find("trying again"), std::string::npos) << uninstall.output;
  EXPECT_EQ(QueryValue("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'coexist%'"), "0");
  EXPECT_EQ(QueryValue("SELECT returned FROM shop.rental WHERE rental_id = 5"), "2");
}

// The application's shapes coexist cannot key, and a view: refused with
// exit 78 at the key before any DDL, nothing changed; `--plan` of a fit one
// lists the statements and the locks, and changes nothing either.
TEST_F(RolloutTest, EveryCheckComesBeforeAnyDdl) {
  struct Case {
    std::string target;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"{table: shop.payment, key_column: payment_id}",
       "target.key_column: column \"payment_id\" of shop.payment is not unique by itself, and "
       "cannot be: shop.payment is partitioned by (payment_date), and a unique index of a "
       "partitioned table must include its partition key"},
      {"{table: shop.film_actor, key_column: film_id}",
       "target.key_column: column \"film_id\" of shop.film_actor is one column of a composite "
       "key (a unique index of several columns), not unique by itself"},
      {"{table: shop.film_list, key_column: film_id}",
       "target.table: shop.film_list is a view, not a table"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.target);
    auto path = Write("target: " + c.target + "\nbatch: {job: j}\n");
    auto install = Coexist({"--config", path, "db", "install", "--add-version-column"});
    EXPECT_EQ(install.status, 78) << install.output;
    EXPECT_NE(install.output.find(c.expect), std::string::npos) << install.output;
  }
  EXPECT_FALSE(CoexistSchemaExists());
  EXPECT_EQ(Count("SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                  " WHERE c.relnamespace = 'shop'::regnamespace AND a.attname = 'version'"),
            0);

  auto film = Write(FilmConfig(Policies()[1].second));
  auto plan = Coexist({"--config", film, "db", "install", "--add-version-column",
                       "--add-owner-column", "--plan", "--lock-timeout", "500ms"});
  ASSERT_EQ(plan.status, 0) << plan.output;
  for (const char* line :
       {"would run, in order (nothing changed):\n",
        "ALTER TABLE shop.film ADD COLUMN version bigint NOT NULL DEFAULT 0\n"
        "     locks: ACCESS EXCLUSIVE on shop.film, waiting at most 500ms at a time, 4 attempts\n",
        "ALTER TABLE shop.film ADD COLUMN \"owner\" text NOT NULL DEFAULT 'online'\n",
        "-- CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON shop.film\n"
        "     locks: SHARE ROW EXCLUSIVE on shop.film, waiting at most 500ms at a time, 4 "
        "attempts\n",
        "-- the schema's migrations 0001_core .. ",
        "schema/migrations/)\n     locks: objects of schema coexist only\n"}) {
    EXPECT_NE(plan.output.find(line), std::string::npos) << line << "\n---\n" << plan.output;
  }
  EXPECT_FALSE(CoexistSchemaExists());
  EXPECT_EQ(Count("SELECT count(*) FROM pg_attribute WHERE attrelid = 'shop.film'::regclass"
                  " AND attname IN ('version', 'owner')"),
            0);
}

// Every hint that proposes DDL, run on the shape it addresses: afterwards
// the check passes.
TEST_F(RolloutTest, EveryHintThatProposesDdlWorksOnTheShapeItAddresses) {
  QueryValue(
      "CREATE TABLE shop.customer (customer_id integer PRIMARY KEY, email text NOT NULL);"
      "INSERT INTO shop.customer SELECT g, 'c' || g || '@example.com' FROM generate_series(1, 20) "
      "g;"
      "CREATE TABLE shop.staff (staff_code text NOT NULL, name text);"
      "INSERT INTO shop.staff SELECT 's' || g, 'n' FROM generate_series(1, 5) g;"
      "CREATE TABLE shop.inventory (inventory_id bigint NOT NULL, qty integer)"
      " PARTITION BY RANGE (inventory_id);"
      "CREATE TABLE shop.inventory_1 PARTITION OF shop.inventory FOR VALUES FROM (1) TO (100);"
      "INSERT INTO shop.inventory SELECT g, 1 FROM generate_series(1, 50) g; SELECT 1");
  struct Case {
    std::string target;
    std::string fixed_target;  // the configuration after the fix (the surrogate key)
  };
  std::vector<Case> cases = {
      {"{table: shop.customer, key_column: email}", ""},
      {"{table: shop.staff, key_column: staff_code}", ""},
      {"{table: shop.inventory, key_column: inventory_id}", ""},
      {"{table: shop.film_actor, key_column: film_id}",
       "{table: shop.film_actor, key_column: coexist_id}"},
  };
  auto conn = Connect();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.target);
    auto config = config::LoadString("target: " + c.target + "\n", "job.yaml");
    auto report = batch::CheckDatabase(
        *conn, config, {.operation = batch::CheckScope::Operation::kSkip, .privileges = false});
    ASSERT_FALSE(report.problems.empty());
    int ran = 0;
    for (const auto& problem : report.problems) {
      const std::string& hint = problem.hint();
      size_t at = std::string::npos;
      for (const char* verb : {"ALTER TABLE ", "CREATE UNIQUE INDEX "}) {
        at = std::min(at, hint.find(verb));
      }
      ASSERT_NE(at, std::string::npos) << "a hint without DDL: " << hint;
      std::string ddl = hint.substr(at, hint.find(';', at) - at);
      // CONCURRENTLY may not run inside a transaction block.
      pqxx::nontransaction(*conn).exec(ddl);
      ++ran;
    }
    EXPECT_GT(ran, 0);
    auto fixed = config::LoadString(
        "target: " + (c.fixed_target.empty() ? c.target : c.fixed_target) + "\n", "job.yaml");
    auto again = batch::CheckDatabase(
        *conn, fixed, {.operation = batch::CheckScope::Operation::kSkip, .privileges = false});
    EXPECT_TRUE(again.problems.empty()) << again.problems.front().what() << "\n"
                                        << again.problems.front().hint();
  }
  // A table partitioned by another column: no DDL can help, and none is proposed.
  auto payment = batch::CheckDatabase(
      *conn,
      config::LoadString("target: {table: shop.payment, key_column: payment_id}\n", "j.yaml"),
      {.operation = batch::CheckScope::Operation::kSkip, .privileges = false});
  ASSERT_FALSE(payment.problems.empty());
  EXPECT_EQ(payment.problems.front().hint().find("ALTER TABLE"), std::string::npos);
  EXPECT_EQ(payment.problems.front().hint().find("CREATE "), std::string::npos);
}

// A read_only window refuses the application's writes only while a run of
// its job is alive (its heartbeat fresh), and says so; not after the run
// stopped, nor while a killed run's row still reads 'running'. An operator
// can make the whole window read-only (read_only_between_runs).
TEST_F(RolloutTest, AReadOnlyWindowRefusesOnlineWritesOnlyWhileARunWorks) {
  auto path = Write(FilmConfig(Policies()[0].second));
  ASSERT_EQ(
      Coexist({"--config", path, "db", "install", "--add-version-column", "--add-owner-column"})
          .status,
      0);
  auto app = ConnectApp("app-online");
  const std::string write = "UPDATE shop.film SET rentals = rentals + 1 WHERE film_id = 1";
  EXPECT_EQ(testing::SqlStateOf(*app, write), "") << "refused with no run";

  // A run at work (its row and heartbeat, as the runner keeps them).
  auto run_id = QueryValue(
      "INSERT INTO coexist.runs (job, policy, host, pid) VALUES ('films', 'time_window', 'h', 1)"
      " RETURNING run_id");
  try {
    pqxx::nontransaction(*app).exec(write);
    ADD_FAILURE() << "a write passed while a run works";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(db::SqlStateOf(e), "CX003");
    EXPECT_NE(std::string(e.what()).find("writes to shop.film are refused while batch job films "
                                         "runs (run " +
                                         run_id + ")"),
              std::string::npos)
        << e.what();
  }
  // Killed: its row still says running, but its heartbeat stopped.
  QueryValue("UPDATE coexist.runs SET heartbeat_at = now() - interval '1 minute'; SELECT 1");
  EXPECT_EQ(testing::SqlStateOf(*app, write), "");
  QueryValue("UPDATE coexist.runs SET outcome = 'incomplete', ended_at = now(); SELECT 1");

  // A real run stopped half-way (SIGTERM, Ctrl-C): the writes pass at once.
  auto enqueue =
      Coexist({"--config", path, "enqueue", "--select", "SELECT film_id FROM shop.film"});
  ASSERT_EQ(enqueue.status, 0) << enqueue.output;
  auto config = config::LoadString(FilmConfig(Policies()[0].second), "job.yaml");
  config.operation.chunk_sql =
      "WITH s AS (SELECT pg_sleep(0.4)) UPDATE shop.film SET rental_rate = rental_rate + 0.01"
      " WHERE film_id = ANY ($1::integer[]) AND (SELECT true FROM s)";
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::jthread probe([&] {
    try {
      auto conn = ConnectApp("app-probe");
      while (!stop) {
        if (testing::SqlStateOf(*conn, write) == "CX003") ++refused;
        std::this_thread::sleep_for(20ms);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the probe died: " << e.what();
    }
  });
  std::jthread stopper([&] {
    std::this_thread::sleep_for(1s);
    stop = true;
  });
  auto summary = batch::Run(conninfo(), config, {.stop = &stop});
  stopper.join();
  probe.join();
  EXPECT_LT(summary.counts.done, 100);
  EXPECT_GT(refused.load(), 0) << "the window did not hold while the run worked";
  EXPECT_EQ(testing::SqlStateOf(*app, write), "") << "refused after the run stopped";

  // The operator's opt-in: the whole window, with no run.
  auto whole =
      Write(FilmConfig(Policies()[0].second + "  read_only_between_runs: true\n"), "whole.yaml");
  ASSERT_EQ(Coexist({"--config", whole, "db", "install"}).status, 0);
  try {
    pqxx::nontransaction(*app).exec(write);
    ADD_FAILURE() << "a write passed in a window read-only between runs";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(db::SqlStateOf(e), "CX003");
    EXPECT_NE(std::string(e.what()).find(
                  "writes to shop.film are refused during the read-only window of batch job films"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace coexist

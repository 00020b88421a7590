// The configuration against the live catalog (batch/check.h): `config check
// --database`, the same check at the start of `batch run` and `db install`,
// and `db install --add-version-column`. Messages are asserted as exact text.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>

#include "batch/check.h"
#include "common/subprocess.h"
#include "config/config.h"
#include "tests/support/database_test.h"
#include "tests/support/documented_grants.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;

// A table in its own schema, without a version column: the user's own
// schema as it is before coexist.
constexpr const char* kOrders =
    "CREATE SCHEMA sales;"
    "CREATE TABLE sales.orders (order_id bigint PRIMARY KEY, total integer NOT NULL);"
    "INSERT INTO sales.orders SELECT g, 0 FROM generate_series(1, 20) g;";

constexpr const char* kOrdersConfig =
    "target:\n"
    "  table: sales.orders\n"
    "  key_column: order_id\n"
    "batch: {job: orders}\n"
    "operation:\n"
    "  chunk_sql: UPDATE sales.orders SET total = total + 1 WHERE order_id = ANY ($1::bigint[])\n";

class TargetCheckTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    dir_ = fs::temp_directory_path() /
           ("coexist-target-check-" + std::to_string(getpid()) + "-" + database_name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  std::string Write(const std::string& yaml) {
    auto path = (dir_ / "job.yaml").string();
    std::ofstream(path) << yaml;
    return path;
  }

  // build/coexist against this test's database, as `user` when given.
  CommandResult Coexist(const std::vector<std::string>& args, const std::string& user = "") {
    std::vector<std::string> argv = {COEXIST_BINARY, "--log-level", "warn", "--database-url",
                                     conninfo() + (user.empty() ? "" : " user=" + user)};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  batch::CheckReport Check(const std::string& yaml) {
    auto conn = Connect();
    return batch::CheckDatabase(*conn, config::LoadString(yaml, "job.yaml"),
                                {.operation = batch::CheckScope::Operation::kIfConfigured});
  }

  // The first problem's text and hint, as main prints them.
  static std::string Printed(const batch::CheckReport& report, size_t i = 0) {
    if (report.problems.size() <= i) return "(no problem " + std::to_string(i) + ")";
    return std::string(report.problems[i].what()) + "\nHINT: " + report.problems[i].hint();
  }

  long long Triggers(const std::string& table) {
    return Count("SELECT count(*) FROM pg_trigger WHERE tgrelid = '" + table +
                 "'::regclass AND NOT tgisinternal");
  }

  fs::path dir_;
};

TEST_F(TargetCheckTest, AnotherSchemasTableWithoutVersionColumnIsRefusedWithTheAlterThatFixesIt) {
  QueryValue(std::string(kOrders) + "SELECT 1");
  auto path = Write(kOrdersConfig);
  auto check = Coexist({"config", "check", path, "--database"});
  EXPECT_EQ(check.status, 78) << check.output;
  EXPECT_EQ(check.output,
            "config error: " + path +
                ":2:10: target.version_column: table sales.orders has no column \"version\"\n"
                "HINT: name the table's version column, or add one (instant on PostgreSQL 11+): "
                "ALTER TABLE sales.orders ADD COLUMN version bigint NOT NULL DEFAULT 0; `coexist "
                "db install --add-version-column` runs it (waiting at most 2s at a time for the "
                "table's lock, and trying again).\n");
  // A run checks before it installs: refused the same way, nothing installed.
  auto run = Coexist({"--config", path, "batch", "run"});
  EXPECT_EQ(run.status, 78) << run.output;
  EXPECT_NE(run.output.find("target.version_column: table sales.orders has no column"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(Triggers("sales.orders"), 0);

  auto install = Coexist({"--config", path, "db", "install", "--add-version-column"});
  ASSERT_EQ(install.status, 0) << install.output;
  EXPECT_NE(install.output.find("column version added to sales.orders\n"), std::string::npos)
      << install.output;
  EXPECT_EQ(QueryValue("SELECT format_type(atttypid, atttypmod) || ' ' || attnotnull FROM "
                       "pg_attribute WHERE attrelid = 'sales.orders'::regclass AND attname = "
                       "'version'"),
            "bigint true");
  // Again: the column is there, nothing is added twice.
  auto again = Coexist({"--config", path, "db", "install", "--add-version-column"});
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(again.output.find("added"), std::string::npos) << again.output;

  auto valid = Coexist({"config", "check", path, "--database"});
  EXPECT_EQ(valid.status, 0) << valid.output;
  auto enqueue =
      Coexist({"--config", path, "enqueue", "--select", "SELECT order_id FROM sales.orders"});
  ASSERT_EQ(enqueue.status, 0) << enqueue.output;
  auto run_after = Coexist({"--config", path, "batch", "run"});
  EXPECT_EQ(run_after.status, 0) << run_after.output;
  EXPECT_EQ(QueryValue("SELECT sum(total) || '/' || sum(version) FROM sales.orders"), "20/20");
}

TEST_F(TargetCheckTest, AViewIsRefused) {
  QueryValue("CREATE VIEW public.products_view AS SELECT * FROM products; SELECT 1");
  auto report = Check("target: {table: products_view}\n");
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(Printed(report),
            "job.yaml:1:17: target.table: public.products_view is a view, not a table\n"
            "HINT: coexist installs triggers on the target and locks its rows; name the table "
            "itself (a view's base table).");
  EXPECT_EQ(report.problems[0].code(), ExitCode::kConfig);
  // enqueue checks too: no items for a target the batch could never apply.
  auto path = Write("target: {table: products_view}\nbatch: {job: view}\n");
  auto enqueue = Coexist({"--config", path, "enqueue", "--select", "SELECT 1"});
  EXPECT_EQ(enqueue.status, 78) << enqueue.output;
  EXPECT_NE(enqueue.output.find("config error: " + path +
                                ":1:17: target.table: public.products_view is a view, not a "
                                "table\n"),
            std::string::npos)
      << enqueue.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'view'"), 0);
}

TEST_F(TargetCheckTest, AKeyWithoutAUniqueIndexOfItsOwnIsRefused) {
  QueryValue(
      "CREATE TABLE public.tallies (code bigint NOT NULL, part integer NOT NULL,"
      " version bigint NOT NULL DEFAULT 0, UNIQUE (code, part));"
      "CREATE INDEX ON public.tallies (code); SELECT 1");
  const std::string yaml = "target:\n  table: tallies\n  key_column: code\n";
  auto report = Check(yaml);
  ASSERT_EQ(report.problems.size(), 1u) << Printed(report, 1);
  EXPECT_EQ(Printed(report),
            "job.yaml:3:15: target.key_column: column \"code\" of public.tallies is one column "
            "of a composite key (a unique index of several columns), not unique by itself\n"
            "HINT: coexist keys a row by one column: add a surrogate key and name it in "
            "target.key_column: ALTER TABLE public.tallies ADD COLUMN coexist_id bigint GENERATED "
            "ALWAYS AS IDENTITY UNIQUE; (this rewrites the table under an ACCESS EXCLUSIVE lock: "
            "run it in a quiet moment)");
  // A unique index on it alone is enough.
  QueryValue("CREATE UNIQUE INDEX ON public.tallies (code); SELECT 1");
  EXPECT_TRUE(Check(yaml).problems.empty());
}

TEST_F(TargetCheckTest, ATextVersionColumnIsRefusedAndEveryProblemIsReported) {
  QueryValue(
      "CREATE TABLE public.notes (slug numeric PRIMARY KEY, version text NOT NULL DEFAULT '');"
      "SELECT 1");
  auto report = Check("target:\n  table: notes\n  key_column: slug\n");
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_EQ(Printed(report, 0),
            "job.yaml:3:15: target.key_column: column \"slug\" of public.notes is numeric; the "
            "key must be of a supported type\n"
            "HINT: supported key types: smallint, integer, bigint, text, varchar, uuid; name such "
            "a column that identifies a row (for a composite key, add a unique surrogate "
            "column).");
  EXPECT_EQ(Printed(report, 1),
            "job.yaml:2:10: target.version_column: column \"version\" of public.notes is text; "
            "the version must be of an integer type\n"
            "HINT: coexist's trigger adds 1 to it on every UPDATE: name a smallint, integer or "
            "bigint column (a timestamp is a poor lock key).");
  // A command that goes on to work reports both too: the second logged, the
  // first its error, so one round of fixes is enough.
  auto path = Write("target:\n  table: notes\n  key_column: slug\n");
  auto install = Coexist({"--config", path, "db", "install"});
  EXPECT_EQ(install.status, 78) << install.output;
  EXPECT_NE(install.output.find("target check problem 2/2: " + path +
                                ":2:10: target.version_column: column \"version\" of "
                                "public.notes is text"),
            std::string::npos)
      << install.output;
  EXPECT_NE(install.output.find("config error: " + path +
                                ":3:15: target.key_column: column \"slug\" of public.notes is "
                                "numeric; the key must be of a supported type (1 of 2 problems; "
                                "the others are logged above)\n"),
            std::string::npos)
      << install.output;
}

// The documented batch role, here owning its table (so it could install
// triggers on it) but without UPDATE on it: the run is refused before it
// installs anything.
TEST_F(TargetCheckTest, ARoleWithoutUpdateIsRefusedBeforeAnythingIsInstalled) {
  std::string role = "batch_" + database_name();
  QueryValue(testing::DocumentedGrants(COEXIST_SOURCE_DIR, "online_" + database_name(), role) +
             "GRANT CREATE ON DATABASE " + database_name() + " TO " + role +
             ";"
             "GRANT CREATE ON SCHEMA coexist TO " +
             role +
             ";"
             "CREATE TABLE public.accounts (id bigint PRIMARY KEY, balance integer NOT NULL,"
             " version bigint NOT NULL DEFAULT 0);"
             "INSERT INTO public.accounts SELECT g, 0 FROM generate_series(1, 5) g;"
             "ALTER TABLE public.accounts OWNER TO " +
             role + "; REVOKE UPDATE ON public.accounts FROM " + role + "; SELECT 1");
  auto path = Write(
      "target:\n  table: accounts\nbatch: {job: accounts}\n"
      "operation:\n  chunk_sql: UPDATE accounts SET balance = balance + 1 WHERE id = ANY ($1)\n");
  ASSERT_EQ(Coexist({"--config", path, "enqueue", "--select", "SELECT id FROM accounts"}).status,
            0);
  auto run = Coexist({"--config", path, "batch", "run"}, role);
  EXPECT_EQ(run.status, 78) << run.output;
  EXPECT_NE(run.output.find("config error: " + path + ":2:10: target.table: role \"" + role +
                            "\" may not UPDATE public.accounts\n"
                            "HINT: the batch locks the rows it applies (SELECT ... FOR UPDATE) "
                            "and its operation writes them: GRANT SELECT, UPDATE ON "
                            "public.accounts TO " +
                            role + ";\n"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(Triggers("public.accounts"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE job = 'accounts'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'accounts' AND state = "
                  "'queued'"),
            5);
  auto check = Coexist({"config", "check", path, "--database"}, role);
  EXPECT_EQ(check.status, 78) << check.output;
}

// A policy that signals blockers, run by a role outside pg_signal_backend,
// defers what an online session blocks instead (docs/operations.md): a
// warning, asked of the policy's capability, not of its name.
TEST_F(TargetCheckTest, APolicyThatSignalsWithoutPgSignalBackendIsAWarning) {
  std::string role = "batch_" + database_name();
  QueryValue(testing::DocumentedGrants(COEXIST_SOURCE_DIR, "online_" + database_name(), role) +
             "REVOKE pg_signal_backend FROM " + role + "; SELECT 1");
  const std::string operation =
      "operation: {chunk_sql: 'UPDATE products SET stock = stock WHERE id = ANY ($1)'}\n";
  const std::string warning = "warning: role \"" + role +
                              "\" is not a member of pg_signal_backend: batch_priority cannot "
                              "cancel or terminate the online sessions blocking it and defers "
                              "those items instead (GRANT pg_signal_backend TO " +
                              role + ";)\n";
  auto path = Write("policy: {name: batch_priority}\n" + operation);
  auto check = Coexist({"config", "check", path, "--database"}, role);
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find(warning), std::string::npos) << check.output;
  // skip_locked signals only with on_exhausted: force.
  auto report_only = Write("policy: {name: skip_locked}\n" + operation);
  check = Coexist({"config", "check", report_only, "--database"}, role);
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_EQ(check.output.find("pg_signal_backend"), std::string::npos) << check.output;
  auto force = Write("policy: {name: skip_locked, on_exhausted: force}\n" + operation);
  check = Coexist({"config", "check", force, "--database"}, role);
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find("is not a member of pg_signal_backend: skip_locked cannot"),
            std::string::npos)
      << check.output;
}

// A policy that takes rows over writes the owner column: UPDATE of other
// columns is not enough.
TEST_F(TargetCheckTest, TakingRowsOverNeedsUpdateOfTheOwnerColumn) {
  std::string role = "batch_" + database_name();
  QueryValue(testing::DocumentedGrants(COEXIST_SOURCE_DIR, "online_" + database_name(), role) +
             "REVOKE UPDATE ON products FROM " + role + "; GRANT UPDATE (stock) ON products TO " +
             role + "; SELECT 1");
  auto path = Write(
      "target: {owner_column: owner}\npolicy: {name: status_partition}\n"
      "operation: {chunk_sql: 'UPDATE products SET stock = stock WHERE id = ANY ($1)'}\n");
  auto check = Coexist({"config", "check", path, "--database"}, role);
  EXPECT_EQ(check.status, 78) << check.output;
  EXPECT_EQ(check.output, "config error: " + path + ":1:24: target.owner_column: role \"" + role +
                              "\" may not UPDATE column \"owner\" of public.products\n"
                              "HINT: status_partition takes rows over through it: GRANT UPDATE "
                              "(owner) ON public.products TO " +
                              role + ";\n");
  QueryValue("GRANT UPDATE (owner) ON products TO " + role + "; SELECT 1");
  check = Coexist({"config", "check", path, "--database"}, role);
  EXPECT_EQ(check.status, 0) << check.output;
}

TEST_F(TargetCheckTest, APartitionedTableIsCheckedOnItsParentAndAccepted) {
  QueryValue(
      "CREATE TABLE public.readings (id bigint PRIMARY KEY, value integer NOT NULL,"
      " version bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);"
      "CREATE TABLE public.readings_1 PARTITION OF public.readings FOR VALUES FROM (1) TO (100);"
      "CREATE TABLE public.readings_2 PARTITION OF public.readings FOR VALUES FROM (100) TO "
      "(200);"
      "INSERT INTO public.readings VALUES (5, 0), (150, 0); SELECT 1");
  auto path = Write(
      "target: {table: readings}\n"
      "operation: {chunk_sql: 'UPDATE readings SET value = value + 1 WHERE id = ANY ($1)'}\n");
  auto check = Coexist({"config", "check", path, "--database"});
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find(path + ": valid\n"), std::string::npos) << check.output;
  auto install = Coexist({"--config", path, "db", "install"});
  ASSERT_EQ(install.status, 0) << install.output;
  QueryValue("UPDATE public.readings SET value = 1; SELECT 1");
  EXPECT_EQ(QueryValue("SELECT sum(version) FROM public.readings"), "2");
}

TEST_F(TargetCheckTest, AUserTriggerOnTheTargetIsAWarningNotAnError) {
  QueryValue(
      "CREATE TABLE public.audit (id bigint);"
      "CREATE FUNCTION public.audit_products() RETURNS trigger LANGUAGE plpgsql AS"
      " $$BEGIN INSERT INTO public.audit VALUES (NEW.id); RETURN NEW; END$$;"
      "CREATE TRIGGER products_audit AFTER UPDATE ON products FOR EACH ROW"
      " EXECUTE FUNCTION public.audit_products(); SELECT 1");
  auto path =
      Write("operation: {chunk_sql: 'UPDATE products SET stock = stock WHERE id = ANY ($1)'}\n");
  auto check = Coexist({"config", "check", path, "--database"});
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find(
                "warning: target public.products has trigger products_audit (AFTER UPDATE), "
                "which is not coexist's: it fires on the batch's updates too; make sure it "
                "neither writes column version nor waits on what online users lock, then list it "
                "in target.known_triggers to silence this\n"),
            std::string::npos)
      << check.output;
  // coexist's own triggers (the template's version and guard triggers) are not listed.
  EXPECT_EQ(check.output.find("coexist_bump_version"), std::string::npos) << check.output;
  // Once looked at and listed, it is not warned about any more; another one still is.
  auto known = Write(
      "target: {known_triggers: [products_audit]}\n"
      "operation: {chunk_sql: 'UPDATE products SET stock = stock WHERE id = ANY ($1)'}\n");
  auto quiet = Coexist({"config", "check", known, "--database"});
  EXPECT_EQ(quiet.status, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("warning"), std::string::npos) << quiet.output;
  QueryValue(
      "CREATE TRIGGER products_audit_2 AFTER UPDATE ON products FOR EACH ROW"
      " EXECUTE FUNCTION public.audit_products(); SELECT 1");
  auto other = Coexist({"config", "check", known, "--database"});
  EXPECT_NE(other.output.find("warning: target public.products has trigger products_audit_2 "),
            std::string::npos)
      << other.output;
  EXPECT_EQ(other.output.find("trigger products_audit "), std::string::npos) << other.output;
}

// A typo in operation.params (`dlta` for the payloads' `delta`) would bind
// NULL for every item, and every item would fail (or, worse, apply NULL):
// the run refuses it before anything is claimed, located at the field, with
// the fields the waiting payloads do have. A field only some lack: a warning.
TEST_F(TargetCheckTest, AParamsFieldNoWaitingPayloadHasIsRefusedAtItsPlace) {
  auto path = Write(
      "batch: {job: restock}\n"
      "operation:\n"
      "  item_sql: UPDATE products SET stock = stock + $2::integer WHERE id = $1\n"
      "  params: [dlta]\n");
  auto enqueue = Coexist({"--config", path, "enqueue", "--select",
                          "SELECT g, jsonb_build_object('delta', 1, 'note', 'n')"
                          " FROM generate_series(1, 30) g"});
  ASSERT_EQ(enqueue.status, 0) << enqueue.output;
  auto run = Coexist({"--config", path, "batch", "run"});
  EXPECT_EQ(run.status, 78) << run.output;
  EXPECT_NE(
      run.output.find(path + ":4:12: operation.params[0]: payload field 'dlta' is in none of the "
                             "30 waiting items of job restock: every item would bind NULL for it\n"
                             "HINT: their payloads have: delta, note. Name one of those, or remove "
                             "it from params.\n"),
      std::string::npos)
      << run.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE attempts > 0 OR state <> 'queued'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0);

  // Some items lack a field: it works, with a warning.
  QueryValue("UPDATE coexist.queue SET payload = '{}' WHERE record_key IN ('1', '2')");
  auto report = Check(
      "batch: {job: restock}\n"
      "operation:\n"
      "  item_sql: UPDATE products SET stock = stock + $2::integer WHERE id = $1\n"
      "  params: [delta]\n");
  EXPECT_TRUE(report.problems.empty()) << Printed(report);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(report.warnings[0],
            "2 of the 30 waiting items of job restock have no payload field 'delta' "
            "(operation.params[0]): NULL is bound for them");
  // enqueue does not judge the waiting items' payloads: the items it adds
  // may be the ones that carry the field.
  auto more = Coexist(
      {"--config", path, "enqueue", "--select", "SELECT 31, jsonb_build_object('dlta', 1)"});
  EXPECT_EQ(more.status, 0) << more.output;
}

// An online user's transaction holds a lock the ALTER conflicts with: each
// attempt gives up after lock_timeout instead of queueing (and blocking
// every other session behind it); after the last one the command exits 75
// with nothing changed.
TEST_F(TargetCheckTest, AddVersionColumnGivesUpOnALockedTableWithNothingChanged) {
  QueryValue(std::string(kOrders) + "SELECT 1");
  auto path = Write(kOrdersConfig);
  auto online = Connect("coexist-online");
  pqxx::work held(*online);
  held.exec("SELECT count(*) FROM sales.orders");  // ACCESS SHARE until the transaction ends
  auto install = Coexist(
      {"--config", path, "db", "install", "--add-version-column", "--lock-timeout", "50ms"});
  EXPECT_EQ(install.status, 75) << install.output;
  EXPECT_NE(install.output.find(
                "coexist: could not add column version to sales.orders: another session holds a "
                "lock on sales.orders (4 attempts, lock_timeout 50ms each)\n"
                "HINT: nothing was changed by this step. A long transaction on the table blocks "
                "it; run it again when the table is quiet"),
            std::string::npos)
      << install.output;
  held.abort();
  EXPECT_EQ(Count("SELECT count(*) FROM pg_attribute WHERE attrelid = 'sales.orders'::regclass "
                  "AND attname = 'version'"),
            0);
  EXPECT_EQ(Triggers("sales.orders"), 0);
}

// `targets:`: a table the operation writes beside the target is checked at
// its own key, gets its version column from --add-version-column and its
// triggers from db install, like the target.
TEST_F(TargetCheckTest, MoreTargetsAreCheckedAtTheirKeysAndInstalledLikeTheTarget) {
  QueryValue(std::string(kOrders) +
             "ALTER TABLE sales.orders ADD COLUMN version bigint NOT NULL DEFAULT 0;"
             "CREATE TABLE sales.invoices (invoice_no text PRIMARY KEY, total integer);"
             "SELECT 1");
  auto path = Write(std::string(kOrdersConfig) +
                    "targets:\n"
                    "  - {table: sales.invoices, key_column: invoice_no}\n");
  auto check = Coexist({"config", "check", path, "--database"});
  EXPECT_EQ(check.status, 78) << check.output;
  EXPECT_EQ(check.output.substr(0, check.output.find('\n')),
            "config error: " + path +
                ":8:13: targets[0].version_column: table sales.invoices has no column \"version\"")
      << check.output;
  EXPECT_EQ(Triggers("sales.invoices"), 0);

  auto install = Coexist({"--config", path, "db", "install", "--add-version-column"});
  ASSERT_EQ(install.status, 0) << install.output;
  EXPECT_NE(install.output.find("column version added to sales.invoices\n"), std::string::npos)
      << install.output;
  EXPECT_EQ(Triggers("sales.orders"), 2);    // version and guard
  EXPECT_EQ(Triggers("sales.invoices"), 2);  // the same
  QueryValue("INSERT INTO sales.invoices VALUES ('A-1', 0); UPDATE sales.invoices SET total = 1");
  EXPECT_EQ(QueryValue("SELECT version FROM sales.invoices"), "1");

  auto missing = Check(std::string(kOrdersConfig) + "targets:\n  - {table: sales.nothing}\n");
  EXPECT_EQ(Printed(missing),
            "job.yaml:8:13: targets[0].table: table sales.nothing does not exist\n"
            "HINT: create it, or name an existing table (schema.table).");
}

}  // namespace
}  // namespace coexist

// The shared database layer against a real PostgreSQL: throwaway clusters,
// migrations, the version trigger, server resolution.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/server.h"
#include "schema/migrations.h"
#include "schema/status.h"
#include "tests/support/database_test.h"

namespace coexist::db {
namespace {

namespace fs = std::filesystem;
using coexist::testing::DatabaseTest;
using coexist::testing::SqlStateOf;

fs::path ScratchRoot(const std::string& name) {
  fs::path root =
      fs::temp_directory_path() / ("coexist-test-" + name + "-" + std::to_string(getpid()));
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all);  // the server user must enter it
  return root;
}

TEST(TempCluster, StartsOnAPrivateSocketAndRemovesItself) {
  fs::path root = ScratchRoot("lifecycle");
  fs::path dir;
  {
    auto cluster = TempCluster::Start({.temp_root = root});
    dir = cluster->dir();
    EXPECT_TRUE(fs::exists(dir / ".s.PGSQL.5432"));
    auto conn = Connect(cluster->ConnectionString());
    pqxx::work tx(*conn);
    EXPECT_EQ(tx.exec("SHOW listen_addresses")[0][0].as<std::string>(), "");
    EXPECT_EQ(tx.exec("SELECT current_database()")[0][0].as<std::string>(), "coexist");
  }
  EXPECT_FALSE(fs::exists(dir));
  fs::remove_all(root);
}

TEST(TempCluster, ServerCanBeStoppedAndRestarted) {
  fs::path root = ScratchRoot("restart");
  auto cluster = TempCluster::Start({.temp_root = root});
  { pqxx::nontransaction(*Connect(cluster->ConnectionString())).exec("CREATE TABLE kept (x int)"); }
  cluster->StopServer();
  EXPECT_THROW(Connect(cluster->ConnectionString()), TempFailError);
  cluster->StartServer();
  auto conn = Connect(cluster->ConnectionString());
  EXPECT_EQ(pqxx::work(*conn).exec("SELECT to_regclass('kept') IS NOT NULL")[0][0].as<bool>(),
            true);
  cluster.reset();
  fs::remove_all(root);
}

// kill -9 of the owner leaves a folder; the server dies with its parent
// (PR_SET_PDEATHSIG) and the next Start() removes what is left.
TEST(TempCluster, StaleClusterOfAKilledOwnerIsRemoved) {
  fs::path root = ScratchRoot("stale");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    try {
      auto cluster = TempCluster::Start({.temp_root = root});
      std::string line = std::to_string(cluster->server_pid()) + "\n";
      (void)!write(ready[1], line.data(), line.size());
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  close(ready[1]);
  char buffer[32] = {};
  ASSERT_GT(read(ready[0], buffer, sizeof buffer - 1), 0);
  close(ready[0]);
  pid_t server = std::stoi(buffer);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  int leftover = 0;
  for (const auto& entry : fs::directory_iterator(root)) leftover += entry.is_directory();
  EXPECT_EQ(leftover, 1) << "kill -9 leaves the folder behind";
  for (int i = 0; i < 500 && kill(server, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(kill(server, 0), 0) << "the server must die with its owner";

  EXPECT_EQ(RemoveStaleTempClusters(root), 1);
  EXPECT_TRUE(fs::is_empty(root));
  fs::remove_all(root);
}

// Runs `sleep 60`, a process that is not a server of ours, as this user.
pid_t StartUnrelatedProcess() {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "60", nullptr);
    _exit(127);
  }
  return pid;
}

// A pid that no process has: a child that exited and was reaped.
pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

// A folder that looks like a throwaway cluster whose owner died, with a
// postmaster.pid naming `server`: what anyone can plant in a shared $TMPDIR.
fs::path PlantStaleCluster(const fs::path& root, const std::string& name, pid_t server) {
  fs::path dir = root / ("coexist-pg-" + name);
  fs::create_directories(dir / "data");
  fs::permissions(dir, fs::perms::owner_all);
  std::ofstream(dir / "owner.pid") << DeadPid() << '\n';
  std::ofstream(dir / "data" / "postmaster.pid") << server << "\n/some/data\n";
  return dir;
}

bool Running(pid_t pid) {
  // waitpid reaps it if it died, so kill(pid, 0) cannot see a zombie.
  return waitpid(pid, nullptr, WNOHANG) == 0 && kill(pid, 0) == 0;
}

TEST(TempCluster, StaleCleanupNeverSignalsAProcessThatIsNotItsServer) {
  fs::path root = ScratchRoot("planted");
  pid_t unrelated = StartUnrelatedProcess();
  fs::path ours = PlantStaleCluster(root, "ours", unrelated);
  EXPECT_EQ(RemoveStaleTempClusters(root), 1) << "a stale folder of ours still goes";
  EXPECT_FALSE(fs::exists(ours));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(Running(unrelated)) << "the pid in postmaster.pid was signalled";
  kill(unrelated, SIGKILL);
  waitpid(unrelated, nullptr, 0);
  fs::remove_all(root);
}

TEST(TempCluster, StaleCleanupLeavesOtherUsersFoldersAndLinksAlone) {
  fs::path root = ScratchRoot("foreign");
  pid_t unrelated = StartUnrelatedProcess();
  fs::path foreign = PlantStaleCluster(root, "foreign", unrelated);
  const uid_t stranger = 54321;  // no account of ours
  for (const auto& entry : fs::recursive_directory_iterator(foreign)) {
    ASSERT_EQ(lchown(entry.path().c_str(), stranger, stranger), 0);
  }
  ASSERT_EQ(lchown(foreign.c_str(), stranger, stranger), 0);
  fs::path elsewhere = root / "elsewhere";
  fs::create_directories(elsewhere);
  std::ofstream(elsewhere / "owner.pid") << DeadPid() << '\n';
  fs::create_directory_symlink(elsewhere, root / "coexist-pg-link");

  EXPECT_EQ(RemoveStaleTempClusters(root), 0);
  EXPECT_TRUE(fs::exists(foreign / "data" / "postmaster.pid"));
  EXPECT_TRUE(fs::exists(elsewhere / "owner.pid"));
  EXPECT_TRUE(fs::is_symlink(root / "coexist-pg-link"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(Running(unrelated)) << "another user's postmaster.pid was believed";
  kill(unrelated, SIGKILL);
  waitpid(unrelated, nullptr, 0);
  fs::remove_all(root);
}

// The other side: a live server of ours in a stale folder is stopped.
TEST(TempCluster, StaleCleanupStopsALiveServerOfOurs) {
  fs::path root = ScratchRoot("live");
  auto cluster = TempCluster::Start({.temp_root = root});
  pid_t server = cluster->server_pid();
  std::ofstream(cluster->dir() / "owner.pid") << DeadPid() << '\n';
  EXPECT_EQ(RemoveStaleTempClusters(root), 1);
  EXPECT_FALSE(fs::exists(cluster->dir()));
  EXPECT_FALSE(Running(server)) << "the stale server was not stopped";
  cluster.reset();
  fs::remove_all(root);
}

TEST(ServerBinaries, AreFound) {
  fs::path bindir = FindServerBinDir();
  EXPECT_TRUE(fs::exists(bindir / "initdb"));
  EXPECT_TRUE(fs::exists(bindir / "postgres"));
}

TEST(DescribeConninfo, NeverShowsAPassword) {
  EXPECT_EQ(DescribeConninfo("postgresql://app:s3cret@db.example:6432/shop"),
            "host=db.example port=6432 dbname=shop user=app");
  EXPECT_EQ(DescribeConninfo("host=/tmp/x dbname=shop password=s3cret"), "host=/tmp/x dbname=shop");
  EXPECT_EQ(DescribeConninfo("host='unclosed"), "(unparseable connection string)");
}

TEST(ServerResolve, CommandLineWinsAndNothingIsStarted) {
  setenv("COEXIST_DATABASE_URL", "host=/env-socket dbname=env", 1);
  Server server = Server::Resolve(
      {.command_line_url = "host=/cli dbname=cli", .config_url = "host=/cfg dbname=cfg"});
  EXPECT_EQ(server.source(), ServerSource::kCommandLine);
  EXPECT_EQ(server.conninfo(), "host=/cli dbname=cli");
  server = Server::Resolve({.config_url = "host=/cfg dbname=cfg"});
  EXPECT_EQ(server.source(), ServerSource::kEnvironmentUrl);
  unsetenv("COEXIST_DATABASE_URL");
  server = Server::Resolve({.config_url = "host=/cfg dbname=cfg"});
  EXPECT_EQ(server.source(), ServerSource::kConfigUrl);
  setenv("PGDATABASE", "from_env", 1);
  server = Server::Resolve({});
  EXPECT_EQ(server.source(), ServerSource::kPgEnvironment);
  unsetenv("PGDATABASE");
}

TEST(ServerResolve, CommandsThatKeepStateNeverGetAThrowawayCluster) {
  fs::path empty = ScratchRoot("nolocal");
  try {
    Server::Resolve({.local_data_dir = (empty / "pgdata").string()});
    ADD_FAILURE() << "no database configured, yet a server was chosen";
  } catch (const ConfigurationError& e) {
    EXPECT_NE(std::string(e.what()).find("no database configured"), std::string::npos);
    EXPECT_NE(e.hint().find("coexist db up"), std::string::npos) << e.hint();
  }
  fs::remove_all(empty);
}

TEST(ServerResolve, StartsAThrowawayClusterWhenNothingIsConfigured) {
  fs::path empty = ScratchRoot("throwaway");
  fs::path dir;
  {
    Server server = Server::Resolve(
        {.local_data_dir = (empty / "pgdata").string(), .use = DatabaseUse::kEraseData});
    EXPECT_EQ(server.source(), ServerSource::kThrowaway);
    auto conn = Connect(server);
    EXPECT_EQ(pqxx::work(*conn).exec("SELECT 1")[0][0].as<int>(), 1);
  }
  fs::remove_all(empty);
}

TEST(LocalCluster, UpIsUsedByOtherCommandsUntilDown) {
  fs::path root = ScratchRoot("local");
  fs::path data = root / "pgdata";
  // As root the server runs as "postgres", which must enter the parent; only
  // its owner may write there (db up refuses a parent others can write to).
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  std::string conninfo = LocalClusterUp(data);
  EXPECT_TRUE(ProbeLocalCluster(data).running);
  EXPECT_EQ(LocalClusterUp(data), conninfo) << "a second 'db up' is a no-op";
  Server server = Server::Resolve({.local_data_dir = data.string()});
  EXPECT_EQ(server.source(), ServerSource::kLocalCluster);
  EXPECT_EQ(pqxx::work(*Connect(server)).exec("SELECT 1")[0][0].as<int>(), 1);
  LocalClusterDown(data, /*remove_data=*/false);
  EXPECT_FALSE(ProbeLocalCluster(data).running);
  EXPECT_TRUE(fs::exists(data / "PG_VERSION")) << "down keeps the data";
  LocalClusterDown(data, /*remove_data=*/true);
  EXPECT_FALSE(fs::exists(data));
  fs::remove_all(root);
}

// `db up` as root under /var/tmp: anyone may plant a link where it creates
// its folder, or its parent. It refuses, and the link's target is untouched.
TEST(LocalCluster, UpRefusesPlantedLinks) {
  fs::path root = ScratchRoot("planted-up");
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::path victim = root / "victim";
  fs::create_directories(victim);
  fs::permissions(victim, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  struct stat before {};
  ASSERT_EQ(stat(victim.c_str(), &before), 0);
  fs::create_directory_symlink(victim, root / "pgdata");
  fs::create_directory_symlink(victim, root / "state");

  for (const fs::path& data : {root / "pgdata", root / "state" / "pgdata"}) {
    try {
      LocalClusterUp(data);
      ADD_FAILURE() << "db up used " << data;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kCantCreate);
      EXPECT_NE(std::string(e.what()).find("is a symbolic link"), std::string::npos) << e.what();
    }
    struct stat after {};
    ASSERT_EQ(stat(victim.c_str(), &after), 0);
    EXPECT_EQ(after.st_uid, before.st_uid) << data;
    EXPECT_EQ(after.st_gid, before.st_gid) << data;
    EXPECT_EQ(after.st_mode, before.st_mode) << data;
    EXPECT_TRUE(fs::is_empty(victim)) << data;
  }
  EXPECT_FALSE(ProbeLocalCluster(root / "pgdata").running);
  fs::remove_all(root);
}

TEST(LocalCluster, UpRefusesAParentOthersCanWriteTo) {
  fs::path root = ScratchRoot("shared-up");  // mode 777, not sticky
  try {
    LocalClusterUp(root / "pgdata");
    ADD_FAILURE() << "db up used a folder under a world-writable parent";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCantCreate);
    EXPECT_NE(std::string(e.what()).find("writable by other users"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root / "pgdata"));
  fs::remove_all(root);
}

// A malformed URL is a configuration error (78) that never shows the
// password, also in the message that `batch daemon` logs on every retry
// (db::Connect's).
TEST(Conninfo, MalformedIsAConfigurationErrorWithoutThePassword) {
  for (const char* url :
       {"postgresql://u:s3cret@host:notaport/db", "postgresql://u:s3cret%zz@host/db",
        "postgresql://u@host/db?password=s3cret%zz", "host=h password=s3cret port=notaport",
        "host=h password=s3cret dbname", "host=h password='s3cret", "host=h password=s3 cret"}) {
    for (auto attempt : {+[](const std::string& c) { CheckConninfo(c, "--database-url"); },
                         +[](const std::string& c) { Connect(c); }}) {
      try {
        attempt(url);
        ADD_FAILURE() << url << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ExitCode::kConfig) << url << ": " << e.what();
        std::string text = std::string(e.what()) + "\n" + e.hint();
        EXPECT_EQ(text.find("s3"), std::string::npos) << url << ": " << text;
        EXPECT_EQ(text.find("cret"), std::string::npos) << url << ": " << text;
        EXPECT_NE(text.find("database URL"), std::string::npos) << text;
      }
    }
  }
  EXPECT_NO_THROW(CheckConninfo("postgresql://u:s3cret@host:5432,other:/db"));
  EXPECT_NO_THROW(CheckConninfo(""));
}

TEST(Conninfo, MalformedNamesTheProblem) {
  auto message = [](const std::string& conninfo) {
    try {
      CheckConninfo(conninfo, "COEXIST_DATABASE_URL");
    } catch (const ConfigurationError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("postgresql://u:s3cret@host:notaport/db"),
            "the database URL in COEXIST_DATABASE_URL has an invalid port \"notaport\"");
  EXPECT_EQ(message("postgresql://u:s3cret%zz@host/db"),
            "the database URL in COEXIST_DATABASE_URL is malformed: invalid percent-encoded "
            "token: \"...\"");
  EXPECT_EQ(message("host=h passwrd=x"),
            "the database URL in COEXIST_DATABASE_URL is malformed: invalid connection option "
            "\"passwrd\"");
}

TEST(Conninfo, RedactsEveryFormOfThePassword) {
  EXPECT_EQ(RedactPasswords("a s3cr@t b", "postgresql://u:s3cr%40t@h/db"), "a ******** b");
  EXPECT_EQ(RedactPasswords("a s3cr%40t b", "postgresql://u:s3cr%40t@h/db"), "a ******** b");
  EXPECT_EQ(RedactPasswords("x s3 cret y", "host=h password='s3 cret'"), "x ******** y");
  EXPECT_EQ(RedactPasswords("s3cret!", "host=h password=s3cret port=bad%"), "********!");
  EXPECT_EQ(RedactPasswords("nothing here", "host=h"), "nothing here");
}

class EraseData : public DatabaseTest {};

// simulate, demo, db seed, online-sim: a configured database only when the
// user names it, and the refusal says what would be erased.
TEST_F(EraseData, AConfiguredDatabaseIsRefusedUnlessNamed) {
  const ServerChoice choice{.command_line_url = conninfo(), .use = DatabaseUse::kEraseData};
  try {
    Server::Resolve(choice);
    ADD_FAILURE() << "a configured database was erased without --allow-database";
  } catch (const UsageError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("refusing to erase database \"" + database_name() + "\" (host="),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("chosen by --database-url"), std::string::npos) << what;
    EXPECT_EQ(e.hint(), "to erase it, pass --allow-database " + database_name() +
                            "; to run on a throwaway cluster instead, drop --database-url.");
  }
  ServerChoice wrong = choice;
  wrong.allow_database = "production";
  EXPECT_THROW(Server::Resolve(wrong), UsageError);
  ServerChoice named = choice;
  named.allow_database = database_name();
  Server server = Server::Resolve(named);
  EXPECT_EQ(server.source(), ServerSource::kCommandLine);
  EXPECT_EQ(server.conninfo(), conninfo());
}

TEST_F(EraseData, NamingADatabaseWhenNoneIsConfiguredIsRefused) {
  fs::path empty = ScratchRoot("erase-none");
  try {
    Server::Resolve({.local_data_dir = (empty / "pgdata").string(),
                     .use = DatabaseUse::kEraseData,
                     .allow_database = "shop"});
    ADD_FAILURE() << "--allow-database shop ran on a throwaway cluster";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("but no database is configured"), std::string::npos);
  }
  fs::remove_all(empty);
}

class Migrations : public DatabaseTest {};

TEST_F(Migrations, RerunningIsANoOp) {
  auto conn = Connect();
  EXPECT_EQ(InstallMigrations(*conn), 0) << "the template has them all";
  auto applied = AppliedMigrations(*conn);
  ASSERT_EQ(static_cast<int>(applied.size()), LatestVersion());
  for (int i = 0; i < LatestVersion(); ++i) EXPECT_EQ(applied[i].version, i + 1);
}

TEST_F(Migrations, InstallOnAnEmptyDatabaseThenAgainConcurrently) {
  auto conn = Connect();
  pqxx::nontransaction(*conn).exec("DROP SCHEMA coexist CASCADE");
  EXPECT_TRUE(AppliedMigrations(*conn).empty());
  int first = 0, second = 0;
  {
    std::jthread a([&] { first = InstallMigrations(*Connect()); });
    std::jthread b([&] { second = InstallMigrations(*Connect()); });
  }
  EXPECT_EQ(first + second, LatestVersion()) << "each migration applied exactly once";
  EXPECT_EQ(static_cast<int>(AppliedMigrations(*conn).size()), LatestVersion());
}

// 0017 turns every record_key into text: a database at 0016 with queued
// items, a live edit lock, the guard installed and least-privilege grants
// keeps all of them through the upgrade, and the lock still guards.
TEST_F(Migrations, UpgradingTo0017KeepsItemsLocksGuardsAndGrants) {
  auto conn = Connect();
  auto role = "online_" + database_name();
  {
    pqxx::nontransaction tx(*conn);
    tx.exec(
        "DROP SCHEMA coexist CASCADE; CREATE SCHEMA coexist;"
        "CREATE TABLE coexist.schema_migrations (version integer PRIMARY KEY,"
        " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  }
  for (const auto& migration : AllMigrations()) {
    if (migration.version > 16) break;
    pqxx::work tx(*conn);
    tx.exec(std::string(migration.sql));
    tx.exec_params("INSERT INTO coexist.schema_migrations (version, name) VALUES ($1, $2)",
                   migration.version, migration.name);
    tx.commit();
  }
  std::string token;
  {
    pqxx::nontransaction tx(*conn);
    tx.exec(
        "SELECT coexist.install_version_trigger('public.products', 'version');"
        "SELECT coexist.install_guard_trigger('public.products', 'id', 'owner');"
        "INSERT INTO coexist.queue (job, record_key) VALUES ('j', 5), ('j', 7), ('j', 5);"
        "CREATE ROLE " +
        role +
        ";"
        "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA coexist FROM PUBLIC;"
        "GRANT USAGE ON SCHEMA coexist TO " +
        role +
        ";"
        "GRANT EXECUTE ON FUNCTION coexist.acquire_edit_lock(regclass, bigint, text, interval),"
        "  coexist.check_edit_lock(regclass, bigint, uuid) TO " +
        role);
    token = tx.exec("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')")[0][0]
                .as<std::string>();
  }

  EXPECT_EQ(InstallMigrations(*conn), LatestVersion() - 16);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key, ',' ORDER BY item_id) FROM coexist.items"),
            "5,7,5");
  EXPECT_EQ(QueryValue("SELECT string_agg(follows_pending::text, ',' ORDER BY item_id) FROM "
                       "coexist.items"),
            "false,false,true");
  EXPECT_EQ(QueryValue("SELECT key_type FROM coexist.targets"), "bigint");
  // The lock taken before the upgrade still guards the record, and its
  // holder's save still passes with the bigint form of the API.
  auto bob = Connect("bob");
  EXPECT_EQ(SqlStateOf(*bob, "UPDATE products SET stock = 0 WHERE id = 9"), "CX005");
  {
    auto alice_conn = Connect("alice");
    pqxx::work alice(*alice_conn);
    alice.exec("SELECT coexist.check_edit_lock('products', 9, '" + token + "')");
    alice.exec("UPDATE products SET stock = 1 WHERE id = 9");
    alice.commit();
  }
  // The text forms inherit the grants: the online role may call them,
  // PUBLIC still may not.
  for (const char* function : {"coexist.acquire_edit_lock(regclass, text, text, interval)",
                               "coexist.check_edit_lock(regclass, text, uuid)"}) {
    EXPECT_EQ(QueryValue("SELECT has_function_privilege('" + role + "', '" + function +
                         "', 'EXECUTE')::text || ',' || EXISTS (SELECT 1 FROM pg_proc p, "
                         "aclexplode(p.proacl) a WHERE p.oid = '" +
                         function + "'::regprocedure AND a.grantee = 0)::text"),
              "true,false")
        << function;
  }
  pqxx::nontransaction(*conn).exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
}

TEST_F(Migrations, AFailingMigrationRollsBackWhole) {
  auto conn = Connect();
  // A table the next migration's CREATE would collide with: the whole of
  // 0001 must roll back, leaving no half-made schema.
  pqxx::nontransaction(*conn).exec(
      "DROP SCHEMA coexist CASCADE; CREATE SCHEMA coexist; CREATE TABLE coexist.events (x int)");
  EXPECT_THROW(InstallMigrations(*conn), pqxx::sql_error);
  pqxx::work tx(*conn);
  EXPECT_TRUE(tx.exec("SELECT to_regclass('coexist.queue')")[0][0].is_null());
  EXPECT_EQ(tx.exec("SELECT count(*) FROM coexist.schema_migrations")[0][0].as<int>(), 0);
}

class VersionTrigger : public DatabaseTest {
 protected:
  long long Version(long long id) {
    return std::stoll(QueryValue("SELECT version FROM products WHERE id = " + std::to_string(id)));
  }
};

TEST_F(VersionTrigger, BumpsOnEveryWritePath) {
  auto conn = Connect();
  // An application that forgets the version.
  pqxx::nontransaction(*conn).exec("UPDATE products SET stock = stock - 1 WHERE id = 1");
  EXPECT_EQ(Version(1), 1);
  {
    pqxx::work tx(*conn);
    tx.exec("UPDATE products SET stock = stock - 1 WHERE id = 1");
    tx.commit();
  }
  EXPECT_EQ(Version(1), 2);
  // An optimistic writer that bumps it itself: still exactly one step.
  {
    pqxx::work tx(*conn);
    tx.exec("UPDATE products SET stock = 5, version = version + 1 WHERE id = 1 AND version = 2");
    tx.commit();
  }
  EXPECT_EQ(Version(1), 3);
  // A writer that tries to set it backwards or keep it.
  {
    pqxx::work tx(*conn);
    tx.exec("UPDATE products SET version = 0 WHERE id = 1");
    tx.commit();
  }
  EXPECT_EQ(Version(1), 4);
  // A bulk batch UPDATE ... FROM touching many rows.
  {
    pqxx::work tx(*conn);
    tx.exec(
        "UPDATE products p SET stock = p.stock + v.d FROM (VALUES (2, 1), (3, 2)) v(id, d) WHERE "
        "p.id = v.id");
    tx.commit();
  }
  EXPECT_EQ(Version(2), 1);
  EXPECT_EQ(Version(3), 1);
  // An unrelated role with plain UPDATE rights, like an admin tool.
  {
    pqxx::work tx(*conn);
    tx.exec("CREATE ROLE admin_tool LOGIN; GRANT SELECT, UPDATE ON products TO admin_tool");
    tx.exec(
        "SET ROLE admin_tool; UPDATE products SET note = 'fixed by hand' WHERE id = 4; RESET ROLE");
    tx.commit();
  }
  EXPECT_EQ(Version(4), 1);
  // A no-op UPDATE still counts as a write.
  {
    pqxx::work tx(*conn);
    tx.exec("UPDATE products SET stock = stock WHERE id = 5");
    tx.commit();
  }
  EXPECT_EQ(Version(5), 1);
}

TEST_F(VersionTrigger, LostUpdateBecomesAConflict) {
  // Seed 001's two sessions: both read version 0, the second write finds 0 rows.
  auto a = Connect();
  auto b = Connect();
  pqxx::work ta(*a);
  pqxx::work tb(*b);
  auto read_a = ta.exec("SELECT version FROM products WHERE id = 7")[0][0].as<long long>();
  auto read_b = tb.exec("SELECT version FROM products WHERE id = 7")[0][0].as<long long>();
  EXPECT_EQ(
      ta.exec_params("UPDATE products SET stock = stock - 1 WHERE id = 7 AND version = $1", read_a)
          .affected_rows(),
      1u);
  ta.commit();
  EXPECT_EQ(
      tb.exec_params("UPDATE products SET stock = stock - 1 WHERE id = 7 AND version = $1", read_b)
          .affected_rows(),
      0u);
  tb.commit();
}

TEST_F(VersionTrigger, RejectsATimestampVersionColumn) {
  auto conn = Connect();
  pqxx::nontransaction(*conn).exec(
      "CREATE TABLE stamped (id bigint PRIMARY KEY, changed timestamptz)");
  EXPECT_EQ(SqlStateOf(*conn, "SELECT coexist.install_version_trigger('stamped', 'changed')"),
            "42804");
  EXPECT_EQ(SqlStateOf(*conn, "SELECT coexist.install_version_trigger('stamped', 'nope')"),
            "42703");
}

TEST_F(VersionTrigger, InstallsOnAConfiguredTarget) {
  auto conn = Connect();
  pqxx::nontransaction(*conn).exec(
      "CREATE SCHEMA sales; CREATE TABLE sales.orders (order_id bigint PRIMARY KEY, lock_version "
      "integer NOT NULL DEFAULT 0, total numeric); INSERT INTO sales.orders VALUES (1, 0, 10)");
  InstallVersionTrigger(*conn, config::TargetTable{.schema = "sales",
                                                   .table = "orders",
                                                   .key_column = "order_id",
                                                   .version_column = "lock_version",
                                                   .owner_column = std::nullopt});
  pqxx::nontransaction(*conn).exec("UPDATE sales.orders SET total = 11");
  EXPECT_EQ(QueryValue("SELECT lock_version FROM sales.orders"), "1");
  auto status = ReadStatus(*conn, config::TargetTable{.schema = "sales", .table = "orders"});
  EXPECT_TRUE(status.version_trigger);
  EXPECT_EQ(status.target_rows, 1);
}

TEST_F(Migrations, StatusReportsTheInstalledSchema) {
  auto conn = Connect();
  auto status = ReadStatus(*conn, config::TargetTable{});
  EXPECT_EQ(status.installed_version, LatestVersion());
  EXPECT_EQ(status.target_rows, coexist::testing::ClusterEnvironment::kTemplateRecords);
  EXPECT_TRUE(status.version_trigger);
  EXPECT_EQ(status.queue_by_state.at("queued"), 0);
}

}  // namespace
}  // namespace coexist::db

// Batch throughput benchmark (not a test): a queue of N items (default
// 1,000,000), a single-row UPDATE per item, policy skip_locked, no online
// load, 1 and 2 workers, side by side with two set-based references on the
// same rows in chunk-sized statements:
//   (a) the target UPDATE alone: UPDATE ... WHERE id BETWEEN lo AND hi;
//   (b) the writes the batch cannot avoid: the queue store's own claim, the
//       target UPDATE of the claimed keys and the store's completion, in
//       one transaction per chunk, with no decisions in between.
// Prints the rates and the ratios batch/(a) and batch/(b).
// Then one worker again on the same rows keyed by uuid, against the bigint
// run: what a key kept as text costs, with random keys (v4-like: the
// index's order is not the rows' order) and with keys in the rows' order
// (v7-like); and one worker on items of four records each (operation.keys:
// many, a quarter as many items over the same rows), against the
// one-record items: what an item of several keys costs. Those runs print
// the server's and this process's CPU per item (robust on a shared
// machine, unlike the rates) and WAL per item, and the ratios also net of
// a run of an empty queue (what every run costs, which a short run of a
// quarter as many items pays four times per item); with --rounds R they
// repeat, alternating, R times; --keys-only leaves out the references and
// the 2-worker run.
//   build/bench/batch_bench [--records N] [--chunk N] [--rounds R] [--keys-only] [--range-only]
//                           [--icu-locale L]

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <thread>

#include "batch/enqueue.h"
#include "batch/guard.h"
#include "batch/runner.h"
#include "bench/bench_cli.h"
#include "config/config.h"
#include "db/array_literal.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/install.h"
#include "schema/queue_store.h"
#include "schema/queue_store_ops.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace coexist;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU seconds of the server's finished backends (the postmaster's reaped
// children: cutime + cstime in /proc/PID/stat) and of this process (the
// batch's workers are its threads). Robust where wall-clock rates are not:
// on a shared machine a neighbour's load stretches the seconds, not these.
struct CpuClock {
  pid_t server = -1;
  double ServerSeconds() const {
    std::ifstream in("/proc/" + std::to_string(server) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    // Fields 3.. after "pid (comm) "; cutime and cstime are fields 16 and 17.
    for (int i = 3; i <= 17 && fields >> field; ++i) {
      if (i >= 16) ticks += std::stod(field);
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  static double ClientSeconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
};

// What one run cost: its items, seconds (as the run counts them), CPU
// seconds of the server and of this process, WAL bytes.
struct Cost {
  double items = 0;
  double seconds = 0;
  double server_s = 0;
  double client_s = 0;
  double wal_bytes = 0;
  double enqueue_s = 0;  // the enqueue before the run (its INSERT, marking, ANALYZE)

  double Rate() const { return items / seconds; }
  // Per item, net of what any run costs whatever its size (`fixed`: a run
  // of an empty queue). A quarter as many items of four records would
  // otherwise carry four times the start-up per item on a short run.
  double NetRate(const Cost& fixed) const { return items / (seconds - fixed.seconds); }
  double NetCpuUs(const Cost& fixed) const {
    return (server_s + client_s - fixed.server_s - fixed.client_s) * 1e6 / items;
  }
};

long long WalLsn(pqxx::connection_base& conn) {
  return pqxx::nontransaction(conn)
      .exec1("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0]
      .as<long long>();
}

void Vacuum(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec("VACUUM ANALYZE public.products");
  db::VacuumQueue(tx);
}

// The same start for every measurement of a pair: the table rewritten
// compact (no free space a run's first UPDATE could use for HOT versions,
// which the run before would otherwise leave at random) and a checkpoint
// just taken (every page's first change writes its full image to the WAL).
void ResetTable(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec("VACUUM FULL ANALYZE public.products");
  db::VacuumQueue(tx);
  tx.exec("CHECKPOINT");
}

// Keys: "bigint", the demo table; "uuid", public.products_uuid, the same
// rows keyed by random uuids (md5(g), like v4: the key order is not the
// rows' order); "uuid_ordered", public.products_uuid_ordered, keyed by
// uuids in the rows' order (like v7). See SeedUuidTable.
std::string TableOf(const std::string& keys) {
  if (keys == "bigint") return "public.products";
  return "public.products_" + keys;
}
std::string TypeOf(const std::string& keys) { return keys == "bigint" ? "bigint" : "uuid"; }
// The key of row g.
std::string KeyOf(const std::string& keys) {
  if (keys == "uuid") return "md5(g::text)::uuid";
  if (keys == "uuid_ordered") return "lpad(to_hex(g), 32, '0')::uuid";
  return "g";
}

config::Config BenchConfig(const std::string& job, int workers, int chunk,
                           const std::string& keys = "bigint", bool several_keys = false) {
  std::string table = TableOf(keys);
  std::string key_type = TypeOf(keys);
  // Items of several records: $1 holds one array literal of keys per item,
  // made one array of keys for one index scan (docs/batch.md: `IN (SELECT
  // unnest(...))` plans a hash aggregate and a join, ~10 % more per row).
  std::string where = several_keys ? "= ANY (ARRAY(SELECT unnest(k::" + key_type +
                                         "[]) FROM unnest($1::text[]) AS k))"
                                   : "= ANY ($1::" + key_type + "[])";
  return config::LoadString("target: {table: " + table + "}\n" + "batch: {job: " + job +
                                ", chunk_size: " + std::to_string(chunk) +
                                ", workers: " + std::to_string(workers) +
                                "}\n"
                                // Fixed chunks, like the set-based references.
                                "pacing: {adaptive: false}\n"
                                "policy: {name: skip_locked}\n"
                                "operation:\n"
                                "  keys: " +
                                (several_keys ? "many" : "one") + "\n  chunk_sql: UPDATE " + table +
                                " SET stock = stock + 1 WHERE id " + where + "\n",
                            "bench.yaml");
}

// `records` rows like the demo table's, inserted in the order of g, keyed
// by KeyOf(keys), with its version trigger and guard.
void SeedUuidTable(pqxx::connection& conn, long long records, int chunk, const std::string& keys) {
  pqxx::nontransaction(conn).exec("CREATE TABLE " + TableOf(keys) +
                                  " (id uuid PRIMARY KEY, stock bigint NOT NULL DEFAULT 1000,"
                                  " version bigint NOT NULL DEFAULT 0);"
                                  "INSERT INTO " +
                                  TableOf(keys) + " (id) SELECT " + KeyOf(keys) +
                                  " FROM generate_series(1, " + std::to_string(records) + ") g");
  pqxx::nontransaction(conn).exec("VACUUM ANALYZE " + TableOf(keys));
  auto config = BenchConfig("bench_" + keys, 1, chunk, keys);
  db::InstallVersionTrigger(conn, config.target);
  batch::InstallGuard(conn, batch::CheckConfig(conn, config, batch::kInstallCheck));
}

// (a): the target UPDATE alone, chunk by chunk, one transaction each.
double ReferenceA(pqxx::connection& conn, long long records, int chunk) {
  conn.prepare("ref_update",
               "UPDATE public.products SET stock = stock + 1 WHERE id BETWEEN $1 AND $2");
  auto start = Clock::now();
  for (long long lo = 1; lo <= records; lo += chunk) {
    pqxx::work tx(conn);
    tx.exec_prepared("ref_update", lo, lo + chunk - 1);
    tx.commit();
  }
  return records / Seconds(start);
}

// (a) on the uuid-keyed copy: the same set-based UPDATE by chunks of keys,
// in the order the batch takes them (md5(g) for g = 1, 2, ...), so that the
// cost of the keys' locality is in the reference too.
double ReferenceUuid(pqxx::connection& conn, long long records, int chunk) {
  conn.prepare("ref_update_uuid",
               "UPDATE public.products_uuid SET stock = stock + 1 WHERE id IN "
               "(SELECT md5(g::text)::uuid FROM generate_series($1::bigint, $2::bigint) g)");
  auto start = Clock::now();
  for (long long lo = 1; lo <= records; lo += chunk) {
    pqxx::work tx(conn);
    tx.exec_prepared("ref_update_uuid", lo, lo + chunk - 1);
    tx.commit();
  }
  return records / Seconds(start);
}

// How (b) settles a chunk's items: the queue store's completion (the row
// kept as done), none (what the completion costs), or deleting the rows (a
// queue that keeps no row per done item: what such a design could gain).
enum class Settle { kComplete, kNone, kDelete };

// (b): claim a chunk, update its keys, complete it: the queue store's own
// statements, one transaction per chunk.
double ReferenceB(const std::string& conninfo, pqxx::connection& conn, const std::string& job,
                  long long records, int chunk, Settle settle = Settle::kComplete) {
  batch::EnqueueSelect(conninfo, job,
                       "SELECT g FROM generate_series(1, " + std::to_string(records) + ") g");
  Vacuum(conn);
  db::QueueStore queue(conn, {.job = job, .max_attempts = 1});
  long long run_id = 0;
  {
    pqxx::work tx(conn);
    run_id = queue.StartRun(tx, "reference", "{}");
    tx.commit();
  }
  conn.prepare(
      "ref_update_keys",
      "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1::text[]::bigint[])");
  auto start = Clock::now();
  long long after = 0;
  while (true) {
    pqxx::work tx(conn);
    auto items = queue.ClaimItems(tx, run_id, chunk, after, {}, false);
    if (items.empty()) break;
    after = items.back().item_id;
    std::vector<db::RecordKey> keys;
    std::vector<long long> ids;
    for (const auto& item : items) {
      keys.push_back(item.key);
      ids.push_back(item.item_id);
    }
    tx.exec_prepared("ref_update_keys", db::ArrayLiteral(keys));
    if (settle == Settle::kComplete) queue.CompleteItems(tx, run_id, ids);
    if (settle == Settle::kDelete) queue.DeleteItems(tx, ids);
    tx.commit();
  }
  double rate = records / Seconds(start);
  pqxx::work tx(conn);
  queue.FinishRun(tx, run_id, "succeeded", records, records, 0, 0, "{}");
  tx.commit();
  return rate;
}

// `keys_per_item` > 1: items of that many records each (disjoint), over
// the same rows. The costs are of the run alone, not of the enqueue.
// One batch::Run of `config` with the clocks around it: its seconds, the
// server's and this process's CPU and the WAL it wrote. The backends of
// whatever ran before (an enqueue, a vacuum) are gone (reaped) before the
// clocks start, the run's before they stop.
Cost MeasuredRun(const std::string& conninfo, pqxx::connection& conn, const CpuClock& cpu,
                 const config::Config& config, batch::RunSummary* summary_out = nullptr) {
  batch::RunOptions options;
  options.install = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double server = cpu.ServerSeconds();
  double client = CpuClock::ClientSeconds();
  long long wal = WalLsn(conn);
  auto summary = batch::Run(conninfo, config, options);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (summary_out != nullptr) *summary_out = summary;
  return {static_cast<double>(summary.counts.done), summary.seconds, cpu.ServerSeconds() - server,
          CpuClock::ClientSeconds() - client, static_cast<double>(WalLsn(conn) - wal)};
}

Cost BatchRun(const std::string& conninfo, pqxx::connection& conn, const CpuClock& cpu,
              const std::string& job, long long records, int workers, int chunk,
              const std::string& keys = "bigint", int keys_per_item = 1) {
  std::string key = KeyOf(keys);
  long long items = records / keys_per_item;
  std::string n = std::to_string(keys_per_item);
  std::string select =
      keys_per_item == 1
          ? "SELECT " + key + " FROM generate_series(1, " + std::to_string(records) + ") g"
          : "SELECT ARRAY(SELECT " + n + " * i - j FROM generate_series(0, " + n +
                " - 1) j) FROM generate_series(1, " + std::to_string(items) + ") i";
  auto enqueue_start = Clock::now();
  batch::EnqueueSelect(conninfo, job, select, TypeOf(keys));
  double enqueue_s = Seconds(enqueue_start);
  Vacuum(conn);
  batch::RunSummary summary;
  auto cost = MeasuredRun(conninfo, conn, cpu,
                          BenchConfig(job, workers, chunk, keys, keys_per_item > 1), &summary);
  if (summary.counts.done != items) {
    std::fprintf(stderr, "batch run finished %lld of %lld items\n", summary.counts.done, items);
  }
  cost.items = static_cast<double>(items);
  cost.enqueue_s = enqueue_s;
  return cost;
}

// A range job (batch.range) over every row, applying the same UPDATE as (a)
// to the keys of each chunk: as chunk_sql, or as operation.set (coexist
// writes the UPDATE, which repeats the predicate, so the walk need not lock
// the rows first: batch/range_chunk_call.h).
config::Config RangeJobConfig(int workers, int chunk, bool with_set) {
  return config::LoadString(
      "batch: {job: range_" + std::to_string(workers) + (with_set ? "w_set" : "w") +
          ", chunk_size: " + std::to_string(chunk) + ", workers: " + std::to_string(workers) +
          ", range: {where: \"true\"}}\n"
          "pacing: {adaptive: false}\n"
          "policy: {name: skip_locked}\n"
          "operation:\n" +
          (with_set ? std::string("  set: stock = stock + 1\n")
                    : std::string("  chunk_sql: UPDATE public.products SET stock = stock + 1 "
                                  "WHERE id = ANY ($1::bigint[])\n")),
      "bench.yaml");
}

// A run of an empty queue: what every run costs, whatever its size
// (connections, checks, prepared statements).
Cost EmptyRun(const std::string& conninfo, pqxx::connection& conn, const CpuClock& cpu, int chunk) {
  return MeasuredRun(conninfo, conn, cpu, BenchConfig("bench_empty", 1, chunk, "bigint", true));
}

void PrintCost(const char* what, const Cost& c) {
  std::printf(
      "  %-22s %9.0f items/s  server %5.1f us/item  client %4.1f us/item  WAL %5.0f B/item"
      "  (enqueued at %.0f items/s)\n",
      what, c.Rate(), c.server_s * 1e6 / c.items, c.client_s * 1e6 / c.items, c.wal_bytes / c.items,
      c.items / c.enqueue_s);
}

}  // namespace

// The range job beside the set-based UPDATE of the same rows, measured one
// after the other on the same table, with 1 and 2 workers, as chunk_sql and
// as operation.set, `rounds` times; the last two lines give the medians'
// ratios, the last one of operation.set.
void MeasureRangeJob(const std::string& conninfo, pqxx::connection& conn, CpuClock& cpu,
                     long long records, int chunk, int rounds) {
  // [form][workers - 1]: the ratios of each round; form 0 chunk_sql, 1 set.
  std::vector<double> ratios[2][2];
  for (int round = 1; round <= rounds; ++round) {
    std::printf("range job (batch.range, where true), %lld rows, chunk %d, round %d:\n", records,
                chunk, round);
    for (int form = 0; form < 2; ++form) {
      for (int workers = 1; workers <= 2; ++workers) {
        // Each run beside a reference of its own, just before it, both from
        // the same start (ResetTable): the table's free space and the
        // checkpoint's distance otherwise move with every run, by up to
        // 1.9x in the reference's rate on this machine.
        ResetTable(conn);
        double range_a = ReferenceA(conn, records, chunk);
        ResetTable(conn);
        Cost run = MeasuredRun(conninfo, conn, cpu, RangeJobConfig(workers, chunk, form == 1));
        std::printf(
            "  range job, %-10s %d worker%s %10.0f rows/s, set-based UPDATE %10.0f: %.2fx\n",
            form == 1 ? "set," : "chunk_sql,", workers, workers == 1 ? " " : "s", run.Rate(),
            range_a, run.Rate() / range_a);
        ratios[form][workers - 1].push_back(run.Rate() / range_a);
      }
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "targets: 1 worker >= 0.50x (a), 2 workers >= 1.00x (a), uuid >= 0.80x bigint,\n"
      "         items of 4 records >= 0.50x one-record items;\n"
      "         range job: 1 worker >= 0.80x, 2 workers >= 1.30x set-based\n");
  std::printf("range job with chunk_sql: 1 worker %.2fx, 2 workers %.2fx set-based\n",
              median(ratios[0][0]), median(ratios[0][1]));
  // The line, last: the job as operation.set writes it.
  std::printf("range job: 1 worker %.2fx, 2 workers %.2fx set-based\n", median(ratios[1][0]),
              median(ratios[1][1]));
}

int main(int argc, char** argv) {
  long long records = 1'000'000;
  int chunk = 500;
  int rounds = 1;
  bool keys_only = false;
  bool range_only = false;  // --range-only: the range job and its reference, --rounds times
  std::string icu_locale;   // a database of this ICU locale instead of "C"
  CLI::App app{
      "Batch throughput benchmark: batch run against set-based UPDATEs on a throwaway "
      "cluster (docs/batch.md, \"Benchmark\")."};
  app.add_option("--records", records, "rows and queue items (default 1000000)")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  app.add_option("--chunk", chunk, "items per chunk (default 500)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--rounds", rounds, "repeats of the one-worker runs, alternating (default 1)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--keys-only", keys_only, "leave out the references and the 2-worker run");
  app.add_flag("--range-only", range_only,
               "only the range job (1 and 2 workers) beside its set-based reference");
  app.add_option("--icu-locale", icu_locale,
                 "work in a database of this ICU locale (e.g. en-US) instead of C");
  bench::ParseOrExit(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  auto cluster = db::TempCluster::Start();
  CpuClock cpu{cluster->server_pid()};
  std::string conninfo = cluster->ConnectionString();
  if (!icu_locale.empty()) {
    // Most servers are not initialised with --locale=C as ours is: text
    // keys then compare by the locale's rules, in the queue's indexes too.
    auto admin = db::Connect(cluster->ConnectionString("postgres"), "coexist-bench");
    pqxx::nontransaction(*admin).exec(
        "CREATE DATABASE coexist_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE " +
        admin->quote(icu_locale));
    conninfo = cluster->ConnectionString("coexist_icu");
    std::printf("database of ICU locale %s\n", icu_locale.c_str());
  }
  auto conn = db::Connect(conninfo, "coexist-bench");
  std::printf("seeding %lld rows...\n", records);
  db::SeedDemoTable(*conn, records);
  batch::InstallGuard(
      *conn, batch::CheckConfig(*conn, BenchConfig("bench", 1, chunk), batch::kInstallCheck));
  // The references write as the batch does, through both triggers' batch path.
  pqxx::nontransaction(*conn).exec("SET coexist.actor = 'batch'");
  Vacuum(*conn);
  if (range_only) {
    MeasureRangeJob(conninfo, *conn, cpu, records, chunk, rounds);
    return 0;
  }

  double a = 0, b = 0, b_none = 0, b_delete = 0, ua = 0;
  Cost w2;
  if (!keys_only) {
    a = ReferenceA(*conn, records, chunk);
    Vacuum(*conn);
    b = ReferenceB(conninfo, *conn, "ref_b", records, chunk);
    Vacuum(*conn);
    b_none = ReferenceB(conninfo, *conn, "ref_b_none", records, chunk, Settle::kNone);
    Vacuum(*conn);
    b_delete = ReferenceB(conninfo, *conn, "ref_b_delete", records, chunk, Settle::kDelete);
  }
  SeedUuidTable(*conn, records, chunk, "uuid");
  SeedUuidTable(*conn, records, chunk, "uuid_ordered");
  Vacuum(*conn);
  if (!keys_only) {
    ua = ReferenceUuid(*conn, records, chunk);
    pqxx::nontransaction(*conn).exec("VACUUM ANALYZE public.products_uuid");
  }
  // One worker on bigint keys, uuid keys (random, then in the rows' order)
  // and items of four records, round after round, so that a neighbour's
  // load falls on all of them alike.
  std::vector<Cost> w1s, u1s, o1s, m1s, empties;
  for (int round = 1; round <= rounds; ++round) {
    std::string r = std::to_string(round);
    empties.push_back(EmptyRun(conninfo, *conn, cpu, chunk));
    w1s.push_back(BatchRun(conninfo, *conn, cpu, "batch_1w_" + r, records, 1, chunk));
    if (round == 1 && !keys_only) {
      w2 = BatchRun(conninfo, *conn, cpu, "batch_2w", records, 2, chunk);
    }
    Vacuum(*conn);
    u1s.push_back(BatchRun(conninfo, *conn, cpu, "batch_uuid_1w_" + r, records, 1, chunk, "uuid"));
    pqxx::nontransaction(*conn).exec("VACUUM ANALYZE public.products_uuid");
    Vacuum(*conn);
    o1s.push_back(BatchRun(conninfo, *conn, cpu, "batch_uuid_ordered_1w_" + r, records, 1, chunk,
                           "uuid_ordered"));
    pqxx::nontransaction(*conn).exec("VACUUM ANALYZE public.products_uuid_ordered");
    Vacuum(*conn);
    m1s.push_back(
        BatchRun(conninfo, *conn, cpu, "batch_4keys_1w_" + r, records, 1, chunk, "bigint", 4));
    Vacuum(*conn);
  }

  std::printf("\n%lld items, chunk %d, skip_locked, single-row UPDATE, no online load\n", records,
              chunk);
  if (!keys_only) {
    double w1 = w1s.front().Rate();
    std::printf("  (a) target UPDATE alone, set-based      %10.0f rows/s\n", a);
    std::printf("  (b) claim + UPDATE + complete, set-based %7.0f rows/s   %.2fx (a)\n", b, b / a);
    std::printf("      the same, no completion          %10.0f rows/s   %.2fx (a)\n", b_none,
                b_none / a);
    std::printf("      the same, completion by DELETE   %10.0f rows/s   %.2fx (a)\n", b_delete,
                b_delete / a);
    std::printf("  batch, 1 worker                         %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
                w1, w1 / a, w1 / b);
    std::printf("  batch, 2 workers                        %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
                w2.Rate(), w2.Rate() / a, w2.Rate() / b);
    std::printf("  (a') target UPDATE alone, uuid keys     %10.0f rows/s   %.2fx (a)\n", ua,
                ua / a);
  }
  for (int round = 0; round < rounds; ++round) {
    const auto& w1 = w1s[round];
    const auto& u1 = u1s[round];
    const auto& o1 = o1s[round];
    const auto& m1 = m1s[round];
    const auto& fixed = empties[round];
    std::printf("round %d of 1 worker (a run of an empty queue: %.2f s, %.0f ms CPU):\n", round + 1,
                fixed.seconds, (fixed.server_s + fixed.client_s) * 1e3);
    PrintCost("bigint keys", w1);
    PrintCost("uuid keys", u1);
    PrintCost("uuid keys in row order", o1);
    PrintCost("items of 4 records", m1);
    std::printf(
        "  uuid keys          %.2fx bigint keys; net of the empty run %.2fx, CPU per item %.2fx\n"
        "  in row order       %.2fx bigint keys; net of the empty run %.2fx, CPU per item %.2fx\n"
        "  items of 4 records %.2fx one-record items; net of the empty run %.2fx, CPU per item "
        "%.2fx (%.0f rows/s)\n",
        u1.Rate() / w1.Rate(), u1.NetRate(fixed) / w1.NetRate(fixed),
        w1.NetCpuUs(fixed) / u1.NetCpuUs(fixed), o1.Rate() / w1.Rate(),
        o1.NetRate(fixed) / w1.NetRate(fixed), w1.NetCpuUs(fixed) / o1.NetCpuUs(fixed),
        m1.Rate() / w1.Rate(), m1.NetRate(fixed) / w1.NetRate(fixed),
        w1.NetCpuUs(fixed) / m1.NetCpuUs(fixed), 4 * m1.Rate());
    if (!keys_only && round == 0) {
      std::printf("  uuid keys          %.2fx (a')\n", u1.Rate() / ua);
    }
  }
  MeasureRangeJob(conninfo, *conn, cpu, records, chunk, range_only ? rounds : 1);
  return 0;
}

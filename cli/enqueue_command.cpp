// coexist enqueue: add items to the configured job's queue.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <pqxx/pqxx>

#include "batch/check.h"
#include "batch/enqueue.h"
#include "cli/context.h"
#include "cli/shard_report.h"
#include "common/error.h"
#include "config/config.h"
#include "db/connection.h"
#include "db/failure.h"
#include "db/target_table.h"

namespace coexist::cli {
namespace {

struct EnqueueOptions {
  std::string job;
  std::string select;
  std::string file;
  std::string format = "auto";
  bool refuse_missing = false;
};

// The name messages give the input: the file, or "stdin".
std::string InputName(const EnqueueOptions& o) { return o.file == "-" ? "stdin" : o.file; }

std::vector<batch::EnqueueItem> ReadItems(const EnqueueOptions& o, bool integer_keys,
                                          bool shard_field = false) {
  bool from_stdin = o.file == "-";
  std::string format = o.format;
  if (format == "auto") {
    bool jsonl = o.file.size() > 6 && (o.file.ends_with(".jsonl") || o.file.ends_with(".ndjson"));
    format = jsonl ? "jsonl" : "csv";
  }
  std::ifstream file;
  if (!from_stdin) {
    file.open(o.file);
    if (!file) throw Error(ExitCode::kNoInput, "cannot read " + o.file);
  }
  std::istream& in = from_stdin ? std::cin : file;
  return format == "jsonl" ? batch::ParseJsonLines(in, InputName(o), integer_keys, shard_field)
                           : batch::ParseCsv(in, InputName(o), integer_keys, shard_field);
}

// The file's query: what the database refuses in it (a syntax error, a
// table or column missing, a right missing) is the configuration's fault,
// named at the key (78) like a rejected operation.
batch::EnqueueResult EnqueueFromFile(const std::string& conninfo, const std::string& job,
                                     const config::EnqueueConfig& enqueue,
                                     const std::string& source, const std::string& key_type,
                                     const batch::EnqueueTarget& target) {
  try {
    return batch::EnqueueSelect(conninfo, job, enqueue.select, key_type, target);
  } catch (const pqxx::sql_error& e) {
    if (db::Classify(e) != db::FailureKind::kConfiguration) throw;
    // The server's first line, without its "ERROR:  " prefix (the rest
    // points into the wrapped statement, not the file).
    std::string message = e.what();
    message = message.substr(0, message.find('\n'));
    if (message.starts_with("ERROR:")) message.erase(0, message.find_first_not_of(" ", 6));
    config::Mark at = enqueue.select_at.file.empty() ? config::Mark{source} : enqueue.select_at;
    throw config::ConfigError(at, "enqueue.select", "the database rejects it: " + message,
                              "nothing was enqueued. The query returns key[, payload jsonb[, "
                              "idempotency_key text]], by position.");
  } catch (const UsageError& e) {
    config::Mark at = enqueue.select_at.file.empty() ? config::Mark{source} : enqueue.select_at;
    throw config::ConfigError(at, "enqueue.select", e.what(), e.hint());
  }
}

// Items of several records for a job whose operation takes one key each
// would fail in the run: refused before anything is written.
void RefuseSeveralKeys(Context& context, const std::vector<batch::EnqueueItem>& items) {
  if (!context.HasConfigFile() || context.Config().operation.keys == config::ItemKeys::kMany) {
    return;
  }
  for (const auto& item : items) {
    if (item.keys.size() > 1) {
      throw Error(ExitCode::kDataError,
                  "the input holds items of several records (\"keys\") but operation.keys in " +
                      context.Config().source + " is one",
                  "nothing was enqueued. Set operation.keys: many (the operation's $1 then holds "
                  "each item's keys as an array: docs/batch.md), or give one \"key\" per item.");
    }
  }
}

// "enqueued for job J: 3 added, 1 duplicate, 1 missing (no row in
// public.products)" (`on`: " on shard s1"; "missing" only when some are);
// the first missing keys on stderr, as a warning.
void PrintLine(const std::string& job, const std::string& on, const batch::EnqueueResult& r,
               const std::string& table) {
  std::cout << "enqueued for job " << job << on << ": " << r.added << " added, " << r.duplicates
            << " duplicate" << (r.duplicates == 1 ? "" : "s");
  if (r.missing > 0) std::cout << ", " << r.missing << " missing (no row in " << table << ")";
  std::cout << "\n";
}

void PrintResult(const std::string& job, const std::string& on, const batch::EnqueueResult& r,
                 const std::string& table) {
  PrintLine(job, on, r, table);
  if (!r.missing_counted) {
    std::cerr << "coexist: warning: items whose keys have no row in " << table
              << " were not counted: this role may not read its key column\n";
  }
  if (r.missing > 0) {
    std::string keys;
    for (const auto& key : r.missing_keys) keys += (keys.empty() ? "" : " ") + key;
    if (r.missing > static_cast<long long>(r.missing_keys.size())) keys += " ...";
    std::cerr << "coexist: warning: " << r.missing << " item" << (r.missing == 1 ? "" : "s") << on
              << " name" << (r.missing == 1 ? "s" : "") << " a key with no row in " << table << ": "
              << keys
              << "\nHINT: a run applies them anyway, skips them or fails them as "
                 "batch.missing_rows says (apply, skip, fail; docs/batch.md); enqueue "
                 "--refuse-missing refuses them instead.\n";
  }
}

// The target's key type on one database: keys are checked and stored as
// its key column types them.
std::string CheckedKeyType(Context& context, const std::string& conninfo) {
  auto conn = db::Connect(conninfo);
  if (context.HasConfigFile()) {
    // Items for a target the batch could never apply are refused up front
    // (78, at the key); the enqueuing role's rights are not the batch's.
    batch::CheckConfig(*conn, context.Config(),
                       {.operation = batch::CheckScope::Operation::kIfConfigured,
                        .privileges = false,
                        .payloads = false});
  }
  pqxx::read_transaction tx(*conn);
  return db::KeyTypeOf(tx, context.Config().target);
}

// What routing needs of a key type: integers, uuids and text are each
// canonical in their own way (batch::CanonicalKey).
std::string KeyKind(const std::string& key_type) {
  return db::IsIntegerType(key_type) ? "integer" : key_type == "uuid" ? "uuid" : "text";
}

// enqueue over database.shards: every shard reachable and fit, or nothing
// is enqueued; then a query runs on every shard and enqueues that shard's
// rows there, and items read from a file or stdin go where shard_by sends
// them, one transaction per shard (docs/operations.md, "Jobs over several
// databases").
int EnqueueOnShards(Context& context, const EnqueueOptions& o, const std::string& job,
                    const config::EnqueueConfig* from_file) {
  auto shards = context.Shards();
  std::map<std::string, std::string> key_types;  // by shard name
  int checked = EachShard(shards, [&](const batch::Shard& shard) {
    key_types[shard.name] = CheckedKeyType(context, shard.conninfo);
    return 0;
  });
  if (checked != 0) {
    std::cerr << "coexist: nothing was enqueued on any shard\n"
              << "HINT: enqueue writes only when every shard it works can take its items; "
                 "enqueue again once the shard above is fixed.\n";
    return checked;
  }
  const std::string& key_type = key_types[shards.front().name];
  for (const auto& shard : shards) {
    if (KeyKind(key_types[shard.name]) != KeyKind(key_type)) {
      throw ConfigurationError(
          "the shards' targets disagree on the key's type: " + shards.front().name + " has " +
              key_type + ", " + shard.name + " has " + key_types[shard.name],
          "nothing was enqueued; give the target the same key type on every "
          "shard.");
    }
  }
  const std::string table = context.Config().target.Name();
  batch::EnqueueTarget target{.table = &context.Config().target,
                              .refuse_missing = o.refuse_missing};
  batch::EnqueueResult total;
  auto add = [&](const batch::Shard& shard, const batch::EnqueueResult& result) {
    PrintResult(job, " on shard " + shard.name, result, table);
    total.added += result.added;
    total.duplicates += result.duplicates;
    total.missing += result.missing;
    return 0;
  };
  int code = 0;
  if (from_file != nullptr || !o.select.empty()) {
    code = EachShard(shards, [&](const batch::Shard& shard) {
      const std::string& type = key_types[shard.name];
      return add(shard, from_file != nullptr
                            ? EnqueueFromFile(shard.conninfo, job, *from_file,
                                              context.Config().source, type, target)
                            : batch::EnqueueSelect(shard.conninfo, job, o.select, type, target));
    });
  } else {
    const auto& database = context.Config().database;
    auto items =
        ReadItems(o, db::IsIntegerType(key_type), database.shard_by == config::ShardBy::kColumn);
    RefuseSeveralKeys(context, items);
    auto routed = batch::RouteItems(std::move(items), database, key_type, InputName(o),
                                    context.options.shard.value_or(""));
    // One list per shard of database.shards, in its order.
    code = EachShard(shards, [&](const batch::Shard& shard) {
      size_t at = 0;
      while (database.shards[at].name != shard.name) ++at;
      return add(shard, batch::EnqueueItems(shard.conninfo, job, routed[at], key_types[shard.name],
                                            target));
    });
  }
  // The shards' lines above named the missing keys.
  total.missing_keys.clear();
  PrintLine(job,
            " on " + std::to_string(shards.size()) + " shard" + (shards.size() == 1 ? "" : "s"),
            total, table);
  return code;
}

int Enqueue(Context& context, const EnqueueOptions& o) {
  if (!o.select.empty() && !o.file.empty()) {
    throw UsageError("give one of --select and --file, not both",
                     "--select \"SELECT id FROM ...\", or --file items.csv (- for stdin).");
  }
  // Neither: the file's enqueue.select, so that a scheduled unit needs
  // nothing but --config.
  const config::EnqueueConfig* from_file = nullptr;
  if (o.select.empty() && o.file.empty()) {
    if (context.HasConfigFile() && !context.Config().enqueue.select.empty()) {
      from_file = &context.Config().enqueue;
    } else {
      throw UsageError("enqueue: nothing to enqueue",
                       "pass --select \"SELECT id FROM ...\" or --file items.csv (- for stdin), "
                       "or set enqueue.select in the file given with --config.");
    }
  }
  // --job, else batch.job of --config; never the default job unasked: items
  // nobody's `batch run` takes would wait forever.
  std::string job = o.job;
  if (job.empty() && context.HasConfigFile() && context.Config().batch.job_given) {
    job = context.Config().batch.job;
  }
  if (job.empty()) {
    throw UsageError("enqueue: no job given",
                     "pass --job NAME, or set batch.job in the file given with --config (the "
                     "job whose batch run takes the items).");
  }
  if (context.Sharded()) return EnqueueOnShards(context, o, job, from_file);
  const auto& server = context.Server();
  std::string key_type = CheckedKeyType(context, server.conninfo());
  batch::EnqueueTarget target{.table = &context.Config().target,
                              .refuse_missing = o.refuse_missing};
  batch::EnqueueResult result;
  if (from_file != nullptr) {
    result = EnqueueFromFile(server.conninfo(), job, *from_file, context.Config().source, key_type,
                             target);
  } else if (!o.select.empty()) {
    result = batch::EnqueueSelect(server.conninfo(), job, o.select, key_type, target);
  } else {
    // Keys are read as text and checked by the server against the key
    // column's type, which names the column and the types when one does
    // not fit (batch::EnqueueItems).
    auto items = ReadItems(o, /*integer_keys=*/false);
    RefuseSeveralKeys(context, items);
    result = batch::EnqueueItems(server.conninfo(), job, items, key_type, target);
  }
  PrintResult(job, "", result, context.Config().target.Name());
  return 0;
}

}  // namespace

void AddEnqueueCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "enqueue",
      "Add items to the job's queue from a query, a CSV or JSON-lines file, or stdin (neither: "
      "enqueue.select of --config); items whose "
      "idempotency key the job already has are counted as duplicates");
  static EnqueueOptions options;
  cmd->add_option("--job", options.job,
                  "the job the items are for (default: batch.job of --config; one of the two is "
                  "required)")
      ->check(CLI::Validator(
          [](std::string& name) { return name.empty() ? "the job's name is empty" : ""; }, "NAME"));
  cmd->add_option("--select", options.select,
                  "SQL returning key[, payload jsonb[, idempotency_key text]]");
  cmd->add_option("--file", options.file,
                  "CSV (key,payload,idempotency_key) or JSON lines; - reads stdin");
  cmd->add_option("--format", options.format, "auto (by extension), csv or jsonl")
      ->check(CLI::IsMember({"auto", "csv", "jsonl"}));
  cmd->add_flag("--refuse-missing", options.refuse_missing,
                "refuse the whole enqueue (exit 65, nothing added) when an item names a key with "
                "no row in the target; without it such items are added and counted as missing");
  cmd->callback([&] { exit_code = Enqueue(context, options); });
}

}  // namespace coexist::cli

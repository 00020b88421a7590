// coexist enqueue: add items to the configured job's queue.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "batch/check.h"
#include "batch/enqueue.h"
#include "cli/context.h"
#include "common/error.h"
#include "db/connection.h"

namespace coexist::cli {
namespace {

struct EnqueueOptions {
  std::string select;
  std::string file;
  std::string format = "auto";
};

std::vector<batch::EnqueueItem> ReadItems(const EnqueueOptions& o, bool integer_keys) {
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
  std::string name = from_stdin ? "stdin" : o.file;
  return format == "jsonl" ? batch::ParseJsonLines(in, name, integer_keys)
                           : batch::ParseCsv(in, name, integer_keys);
}

int Enqueue(Context& context, const EnqueueOptions& o) {
  if (o.select.empty() == o.file.empty()) {
    throw UsageError("give exactly one of --select and --file",
                     "--select \"SELECT id FROM ...\", or --file items.csv (- for stdin).");
  }
  const auto& job = context.Config().batch.job;
  const auto& server = context.Server();
  if (context.HasConfigFile()) {
    // Items for a target the batch could never apply are refused up front
    // (78, at the key); the enqueuing role's rights are not the batch's.
    auto conn = db::Connect(server);
    batch::CheckConfig(
        *conn, context.Config(),
        {.operation = batch::CheckScope::Operation::kIfConfigured, .privileges = false});
  }
  // Keys are checked and stored as the target's key column types them.
  auto key_type = batch::TargetKeyType(server.conninfo(), context.Config().target);
  batch::EnqueueResult result;
  if (!o.select.empty()) {
    result = batch::EnqueueSelect(server.conninfo(), job, o.select, key_type);
  } else {
    result = batch::EnqueueItems(server.conninfo(), job,
                                 ReadItems(o, batch::IsIntegerType(key_type)), key_type);
  }
  std::cout << "enqueued for job " << job << ": " << result.added << " added, " << result.duplicates
            << " duplicate" << (result.duplicates == 1 ? "" : "s") << "\n";
  return 0;
}

}  // namespace

void AddEnqueueCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "enqueue",
      "Add items to the job's queue from a query, a CSV or JSON-lines file, or stdin; items whose "
      "idempotency key the job already has are counted as duplicates");
  static EnqueueOptions options;
  cmd->add_option("--select", options.select,
                  "SQL returning key[, payload jsonb[, idempotency_key text]]");
  cmd->add_option("--file", options.file,
                  "CSV (key,payload,idempotency_key) or JSON lines; - reads stdin");
  cmd->add_option("--format", options.format, "auto (by extension), csv or jsonl")
      ->check(CLI::IsMember({"auto", "csv", "jsonl"}));
  cmd->callback([&] { exit_code = Enqueue(context, options); });
}

}  // namespace coexist::cli

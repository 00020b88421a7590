// coexist enqueue: add items to the configured job's queue.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "batch/enqueue.h"
#include "cli/context.h"
#include "common/error.h"

namespace coexist::cli {
namespace {

struct EnqueueOptions {
  std::string job;
  std::string select;
  std::string file;
  std::string format = "auto";
};

std::vector<batch::EnqueueItem> ReadItems(const EnqueueOptions& o) {
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
  return format == "jsonl" ? batch::ParseJsonLines(in, name) : batch::ParseCsv(in, name);
}

int Enqueue(Context& context, const EnqueueOptions& o) {
  if (o.select.empty() == o.file.empty()) {
    throw UsageError("give exactly one of --select and --file",
                     "--select \"SELECT id FROM ...\", or --file items.csv (- for stdin).");
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
  const auto& server = context.Server();
  batch::EnqueueResult result;
  if (!o.select.empty()) {
    result = batch::EnqueueSelect(server.conninfo(), job, o.select);
  } else {
    result = batch::EnqueueItems(server.conninfo(), job, ReadItems(o));
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
  cmd->add_option("--job", options.job,
                  "the job the items are for (default: batch.job of --config; one of the two is "
                  "required)");
  cmd->add_option("--select", options.select,
                  "SQL returning key[, payload jsonb[, idempotency_key text]]");
  cmd->add_option("--file", options.file,
                  "CSV (key,payload,idempotency_key) or JSON lines; - reads stdin");
  cmd->add_option("--format", options.format, "auto (by extension), csv or jsonl")
      ->check(CLI::IsMember({"auto", "csv", "jsonl"}));
  cmd->callback([&] { exit_code = Enqueue(context, options); });
}

}  // namespace coexist::cli

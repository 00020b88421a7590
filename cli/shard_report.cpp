#include "cli/shard_report.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>

#include "db/server.h"

namespace coexist::cli {
namespace {

// "coexist: " + rest -> "coexist: shard s2: " + rest (and "config error: ").
std::string OnShard(const std::string& shard, const std::string& message) {
  for (const char* prefix : {"coexist: ", "config error: "}) {
    std::string_view p = prefix;
    if (message.starts_with(p)) {
      return std::string(p) + "shard " + shard + ": " + message.substr(p.size());
    }
  }
  return "shard " + shard + ": " + message;
}

std::string OutcomeOf(const ShardedRunReport::Row& row) {
  if (row.summary) return row.summary->outcome;
  bool busy = row.code == ExitCode::kJobBusy || row.code == ExitCode::kJobStuck;
  return busy ? "busy" : "failed";
}

std::string Cell(const ShardedRunReport::Row& row, long long value) {
  return row.summary ? std::to_string(value) : "-";
}

}  // namespace

ExitCode Worst(ExitCode a, ExitCode b) { return ToInt(a) >= ToInt(b) ? a : b; }

Failure ShardFailure(const batch::Shard& shard, const std::exception_ptr& error) {
  Failure failure = Describe(error);
  failure.message = db::RedactPasswords(OnShard(shard.name, failure.message), shard.conninfo);
  failure.hint = db::RedactPasswords(failure.hint, shard.conninfo);
  return failure;
}

void PrintFailure(std::ostream& err, const Failure& failure) {
  err << failure.message << '\n';
  if (!failure.hint.empty()) err << "HINT: " << failure.hint << '\n';
}

int EachShard(const std::vector<batch::Shard>& shards,
              const std::function<int(const batch::Shard&)>& work) {
  ExitCode worst = ExitCode::kOk;
  for (const auto& shard : shards) {
    try {
      worst = Worst(worst, static_cast<ExitCode>(work(shard)));
    } catch (...) {
      Failure failure = ShardFailure(shard, std::current_exception());
      PrintFailure(std::cerr, failure);
      worst = Worst(worst, failure.code);
    }
  }
  return ToInt(worst);
}

ShardedRunReport ReportOf(const std::vector<batch::Shard>& shards,
                          const std::vector<batch::ShardRun>& runs, const config::Config& config,
                          double seconds) {
  ShardedRunReport report;
  report.job = config.batch.job;
  report.policy = config.policy.name;
  report.seconds = seconds;
  for (size_t i = 0; i < runs.size(); ++i) {
    ShardedRunReport::Row row;
    row.shard = runs[i].shard;
    if (runs[i].error) {
      row.failure = ShardFailure(shards[i], runs[i].error);
      row.code = row.failure->code;
    } else {
      row.summary = runs[i].summary;
      row.code = batch::ExitCodeOf(*row.summary);
      report.policy = row.summary->policy;
      report.counts += row.summary->counts;
      report.queued_left += row.summary->queued_left;
    }
    report.code = Worst(report.code, row.code);
    report.rows.push_back(std::move(row));
  }
  return report;
}

void PrintShardedRun(std::ostream& out, const ShardedRunReport& report) {
  std::map<std::string, int> outcomes;
  for (const auto& row : report.rows) ++outcomes[OutcomeOf(row)];
  std::string tally;
  for (const auto& [outcome, n] : outcomes) {
    tally += (tally.empty() ? "" : ", ") + std::to_string(n) + " " + outcome;
  }
  out << "job " << report.job << " on " << report.rows.size() << " shard"
      << (report.rows.size() == 1 ? "" : "s") << " (policy " << report.policy << "): " << tally
      << "\n";
  size_t name_width = 5;  // "total"
  for (const auto& row : report.rows) name_width = std::max(name_width, row.shard.size());
  auto line = [&](const std::string& name, const std::string& run, const std::string& outcome,
                  const std::string& done, const std::string& deferred, const std::string& dead,
                  const std::string& queued, const std::string& exit) {
    out << "  " << std::left << std::setw(static_cast<int>(name_width)) << name << std::right
        << std::setw(7) << run << "  " << std::left << std::setw(10) << outcome << std::right
        << std::setw(9) << done << std::setw(9) << deferred << std::setw(7) << dead << std::setw(8)
        << queued << std::setw(6) << exit << "\n";
  };
  line("shard", "run", "outcome", "done", "deferred", "dead", "queued", "exit");
  for (const auto& row : report.rows) {
    const auto* s = row.summary ? &*row.summary : nullptr;
    line(row.shard, s ? std::to_string(s->run_id) : "-", OutcomeOf(row),
         Cell(row, s ? s->counts.done : 0), Cell(row, s ? s->counts.deferred : 0),
         Cell(row, s ? s->counts.dead : 0), Cell(row, s ? s->queued_left : 0),
         std::to_string(ToInt(row.code)));
  }
  const auto& c = report.counts;
  line("total", "", "", std::to_string(c.done), std::to_string(c.deferred), std::to_string(c.dead),
       std::to_string(report.queued_left), std::to_string(ToInt(report.code)));
  if (c.escalated + c.revoked + c.signalled > 0) {
    out << "  escalated " << c.escalated << ", edit locks revoked " << c.revoked
        << ", online backends signalled " << c.signalled << "\n";
  }
  for (const auto& row : report.rows) {
    if (!row.summary) continue;
    if (row.summary->abandoned_runs > 0) {
      out << "  " << row.shard << ": marked " << row.summary->abandoned_runs
          << " stale run(s) abandoned\n";
    }
    if (row.summary->stop_reason != StopReason::kDrained) {
      out << "  " << row.shard << ": claiming stopped: " << ToString(row.summary->stop_reason)
          << "\n";
    }
  }
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.2f s, %.0f items/s", report.seconds,
                report.seconds > 0 ? c.done / report.seconds : 0.0);
  out << "  " << rate << "\n";
}

nlohmann::json ShardedRunJson(const ShardedRunReport& report) {
  const auto& c = report.counts;
  nlohmann::json shards = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& row : report.rows) {
    nlohmann::json j = row.summary ? nlohmann::json::parse(batch::SummaryJson(*row.summary))
                                   : nlohmann::json{{"outcome", OutcomeOf(row)}};
    j["shard"] = row.shard;
    j["exit_code"] = ToInt(row.code);
    if (row.failure) {
      j["error"] = row.failure->message;
      j["hint"] = row.failure->hint;
      failed.push_back(row.shard);
    }
    shards.push_back(std::move(j));
  }
  return {{"job", report.job},
          {"policy", report.policy},
          {"exit_code", ToInt(report.code)},
          {"failed_shards", failed},
          {"claimed", c.claimed},
          {"done", c.done},
          {"deferred", c.deferred},
          {"dead", c.dead},
          {"escalated", c.escalated},
          {"revoked", c.revoked},
          {"signalled", c.signalled},
          {"deferrals_by_reason", c.deferrals_by_reason},
          {"queued_left", report.queued_left},
          {"seconds", report.seconds},
          {"items_per_second", report.seconds > 0 ? c.done / report.seconds : 0.0},
          {"shards", shards}};
}

metrics::RunMetrics ShardedRunMetrics(const ShardedRunReport& report) {
  metrics::RunMetrics run;
  run.job = report.job;
  run.policy = report.policy;
  run.succeeded = std::none_of(report.rows.begin(), report.rows.end(), [](const auto& row) {
    return (row.failure && OutcomeOf(row) == "failed") ||
           (row.summary && row.summary->outcome == "failed");
  });
  run.finished_at = std::chrono::system_clock::now();
  run.seconds = report.seconds;
  run.counts = report.counts;
  run.queued_left = report.queued_left;
  return run;
}

}  // namespace coexist::cli

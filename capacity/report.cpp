#include "capacity/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "capacity/projection.h"
#include "capacity/recommendation.h"
#include "capacity/report_html.h"
#include "common/error.h"

namespace coexist::capacity {

std::string RunSharesText(const CellResult& cell, const std::string& separator) {
  std::string out;
  for (const auto& run : cell.runs)
    out += (out.empty() ? "" : separator) + std::to_string(run.done);
  return out;
}

bool SeveralRuns(const std::vector<CellResult>& cells) {
  return std::any_of(cells.begin(), cells.end(),
                     [](const CellResult& c) { return c.batch_processes > 1; });
}

bool AnyRange(const std::vector<CellResult>& cells) {
  return std::any_of(cells.begin(), cells.end(), [](const CellResult& c) { return c.Range(); });
}

namespace {

namespace fs = std::filesystem;

nlohmann::ordered_json PhaseJson(const PhaseStats& p) {
  return {{"seconds", p.seconds}, {"transactions", p.transactions},
          {"tps", p.tps},         {"p50_ms", p.p50_ms},
          {"p95_ms", p.p95_ms},   {"p99_ms", p.p99_ms}};
}

// The figures of one cell, flat, in CSV column order; JSON values so that
// results.json keeps numbers as numbers.
nlohmann::ordered_json FlatFigures(const CellResult& c) {
  std::string parameters;
  for (const auto& [key, value] : c.parameters) {
    parameters += (parameters.empty() ? "" : ";") + key + "=" + value;
  }
  nlohmann::ordered_json f;
  f["cell"] = c.index;
  f["parameters"] = parameters;
  f["policy"] = c.policy;
  f["load_level"] = c.load_level;
  f["items"] = c.items;
  f["batch_seconds"] = c.batch_seconds;
  f["items_per_second"] = c.items_per_second;
  f["done"] = c.done;
  f["deferred"] = c.deferred;
  f["dead"] = c.dead;
  f["queued_left"] = c.queued_left;
  f["finished_in_window"] = c.finished_in_window;
  for (const auto& [phase, p] :
       {std::pair{"before", &c.before}, {"during", &c.during}, {"after", &c.after}}) {
    f[std::string("online_tps_") + phase] = p->tps;
    f[std::string("p50_ms_") + phase] = p->p50_ms;
    f[std::string("p95_ms_") + phase] = p->p95_ms;
    f[std::string("p99_ms_") + phase] = p->p99_ms;
  }
  f["conflicts"] = c.conflicts;
  f["gave_up"] = c.gave_up;
  f["refusals"] = c.refusals;
  f["revocations"] = c.revocations;
  f["lock_timeouts"] = c.lock_timeouts;
  f["other_errors"] = c.other_errors;
  f["pool_wait_p99_ms"] = c.pool_wait_p99_ms;
  f["lost_updates"] = c.lost_updates;
  f["applied_twice"] = c.applied_twice;
  f["rows_changed_by_batch"] = c.rows_changed_by_batch;
  // Every cell has the columns (CSV); objective 0 and on false: not set.
  const auto latency = c.latency.value_or(pacing::LatencySummary{.on = false});
  f["latency_objective"] = latency.objective;
  f["latency_on"] = latency.on;
  f["latency_signal"] = latency.signal;
  f["latency_baseline_ms"] = latency.baseline_ms;
  f["latency_slowdowns"] = latency.slowdowns;
  f["latency_seconds_over"] = latency.seconds_over;
  f["check_of"] = c.check_of;
  f["chunks"] = static_cast<long long>(c.chunks.size());
  f["sweep_cell"] = c.sweep_cell;
  f["repeat"] = c.repeat;
  f["grown_from"] = c.grown_from;
  f["records"] = c.records;
  f["window_seconds"] = c.window_seconds;
  f["batch_processes"] = c.batch_processes;
  f["run_shares"] = RunSharesText(c, ";");
  f["job"] = c.JobKind();  // queued, or range (batch.range: items are its rows)
  f["range_where"] = c.range_where;
  f["enqueue_seconds"] = c.enqueue_seconds;
  return f;
}

std::string CsvText(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{:.3f}", value.get<double>());
  return value.dump();
}

std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void WriteAtomically(const fs::path& path, const std::string& text) {
  fs::path temp = path;
  temp += ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error(ExitCode::kCantCreate, "cannot write " + temp.string());
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) throw Error(ExitCode::kCantCreate, "cannot write " + path.string() + ": " + ec.message());
}

nlohmann::ordered_json ObjectivesJson(const config::Objectives& o) {
  return {{"max_p99_ratio", o.max_p99_ratio},
          {"max_error_rate_percent", o.max_error_percent},
          {"min_done_share_percent", o.min_done_percent},
          {"max_deferred_share_percent", o.max_deferred_percent}};
}

nlohmann::ordered_json RecommendationJson(const Recommendation& r) {
  nlohmann::ordered_json outcomes = nlohmann::ordered_json::array();
  for (const auto& o : r.outcomes) {
    nlohmann::ordered_json misses = nlohmann::ordered_json::array();
    for (const auto& m : o.misses) {
      misses.push_back({{"objective", m.objective},
                        {"limit", m.limit},
                        {"measured", m.measured},
                        {"by", m.by},
                        {"text", m.text},
                        {"remedy", m.remedy}});
    }
    auto spread = [](const Spread& x) {
      return nlohmann::ordered_json{{"median", x.median}, {"min", x.min}, {"max", x.max}};
    };
    outcomes.push_back({{"policy", o.policy},
                        {"variant", o.variant},
                        {"meets_objectives", o.Qualifies()},
                        {"failed_by_kind", o.failed_by_kind},
                        {"user_conflicts", o.user_conflicts},
                        {"repeats", o.repeats},
                        {"spread",
                         {{"batch_seconds", spread(o.batch_seconds_spread)},
                          {"items_per_second", spread(o.items_per_second)},
                          {"p99_ratio", spread(o.p99_ratio_spread)},
                          {"error_rate_percent", spread(o.error_percent_spread)}}},
                        {"window_seconds", o.window_seconds},
                        {"batch_seconds", o.batch_seconds},
                        {"finished_in_window", o.finished_in_window},
                        {"p99_ratio", o.p99_ratio},
                        {"error_rate_percent", o.error_percent},
                        {"done_percent", o.done_percent},
                        {"deferred_percent", o.deferred_percent},
                        {"missed", misses}});
  }
  return {{"load_level", r.load_level},
          {"recommended", r.recommended},
          {"reason", r.reason},
          {"noise", r.noise},
          {"policies", outcomes}};
}

nlohmann::ordered_json ModelJson(const DurationModel& m) {
  if (!m.trusted) return {{"trusted", false}, {"untrusted_reason", m.untrusted_reason}};
  return {{"trusted", true},
          {"steady_items_per_second", m.steady_rate},
          {"fixed_seconds", m.fixed_seconds},
          {"done_share", m.done_share},
          {"steady_chunks", m.steady_chunks},
          {"steady_seconds", m.steady_seconds},
          {"items_per_row", m.items_per_row}};
}

nlohmann::ordered_json WorkloadJson(const std::vector<std::pair<std::string, std::string>>& w) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [what, text] : w) out[what] = text;
  return out;
}

std::string ResultsJson(const ScenarioSummary& s, const std::vector<CellResult>& cells) {
  nlohmann::ordered_json out;
  out["scenario"] = {{"name", s.name},
                     {"description", s.description},
                     {"records", s.records},
                     {"queue_items", s.queue_items},
                     {"window_seconds", s.window_seconds},
                     {"production_queue_items", s.production_queue_items},
                     {"production_window_seconds", s.production_window_seconds},
                     {"min_batch_seconds", s.min_batch_seconds},
                     {"repeat", s.repeat},
                     {"objectives", ObjectivesJson(s.objectives)},
                     {"workload", WorkloadJson(s.workload)},
                     {"started_at", s.started_at},
                     {"host", s.host}};
  out["cells"] = nlohmann::ordered_json::array();
  for (const auto& c : cells) {
    nlohmann::ordered_json cell = FlatFigures(c);
    cell["parameters"] = c.parameters;
    cell["before"] = PhaseJson(c.before);
    cell["during"] = PhaseJson(c.during);
    cell["after"] = PhaseJson(c.after);
    cell["during_errors"] = c.during_errors;
    cell["during_user_conflicts"] = c.during_user_conflicts;
    nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
    for (const auto& chunk : c.chunks) chunks.push_back({chunk.at_seconds, chunk.items});
    cell["chunks_done"] = chunks;  // [seconds since the run started, items]
    cell["batch_span_seconds"] = {c.batch_start_seconds, c.batch_end_seconds};
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const auto& r : c.runs) {
      runs.push_back({{"run_id", r.run_id},
                      {"done", r.done},
                      {"deferred", r.deferred},
                      {"dead", r.dead},
                      {"start_seconds", r.start_seconds},
                      {"seconds", r.seconds},
                      {"stop_reason", ToString(r.stop_reason)}});
    }
    cell["runs"] = runs;  // each run's share of the batch
    nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
    for (const auto& t : c.timeline) {
      timeline.push_back({{"at", t.at_seconds},
                          {"seconds", t.width_seconds},
                          {"transactions", t.transactions},
                          {"not_ok", t.not_ok},
                          {"tps", t.tps},
                          {"p50_ms", t.p50_ms},
                          {"p99_ms", t.p99_ms}});
    }
    cell["timeline"] = timeline;
    out["cells"].push_back(cell);
  }
  out["recommendations"] = nlohmann::ordered_json::array();
  for (const auto& r : Recommend(cells, s)) out["recommendations"].push_back(RecommendationJson(r));
  out["projections"] = nlohmann::ordered_json::array();
  for (const auto& p : Project(cells, s)) {
    nlohmann::ordered_json j = {{"cell", p.cell},
                                {"policy", p.policy},
                                {"load_level", p.load_level},
                                {"job", p.job},
                                {"model", ModelJson(p.model)}};
    j["repeats"] = p.repeats;
    j["mix"] = p.mix;
    if (p.model.trusted) {
      j["projected_seconds"] = p.projected_seconds;
      j["projected_range_seconds"] = {p.low_seconds, p.high_seconds};
      j["fits_window"] = p.fits_window;
    }
    out["projections"].push_back(j);
  }
  out["projection_checks"] = nlohmann::ordered_json::array();
  for (const auto& c : CheckProjections(cells)) {
    nlohmann::ordered_json j = {{"cell", c.cell},
                                {"check_cell", c.check_cell},
                                {"policy", c.policy},
                                {"load_level", c.load_level},
                                {"measured_items", c.measured_items},
                                {"check_items", c.check_items},
                                {"measured_records", c.measured_records},
                                {"check_records", c.check_records},
                                {"repeats", c.repeats},
                                {"model", ModelJson(c.model)},
                                {"trusted", c.trusted},
                                {"measured_seconds", c.measured_seconds}};
    if (c.trusted) {
      j["projected_seconds"] = c.projected_seconds;
      j["error_percent"] = c.error_percent;
    } else {
      j["untrusted_reason"] = c.untrusted_reason;
    }
    out["projection_checks"].push_back(j);
  }
  return out.dump(2) + "\n";
}

std::string ResultsCsv(const std::vector<CellResult>& cells) {
  std::string out;
  for (const auto& column : CsvColumns()) out += (out.empty() ? "" : ",") + column;
  out += "\n";
  for (const auto& c : cells) {
    std::string row;
    for (const auto& value : FlatFigures(c)) {
      if (!row.empty()) row += ',';
      row += CsvField(CsvText(value));
    }
    out += row + "\n";
  }
  return out;
}

}  // namespace

const std::vector<std::string>& CsvColumns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> out;
    const nlohmann::ordered_json figures = FlatFigures(CellResult{});
    for (const auto& item : figures.items()) out.push_back(item.key());
    return out;
  }();
  return columns;
}

void WriteReport(const fs::path& dir, const ScenarioSummary& scenario,
                 const std::vector<CellResult>& cells) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ExitCode::kCantCreate, "cannot create " + dir.string() + ": " + ec.message());
  WriteAtomically(dir / "results.json", ResultsJson(scenario, cells));
  WriteAtomically(dir / "results.csv", ResultsCsv(cells));
  WriteAtomically(dir / "report.html", ReportHtml(scenario, cells));
}

void PrintTable(std::ostream& out, const std::vector<CellResult>& cells) {
  // With several runs in a cell: how many, and what each of them did.
  bool shares = SeveralRuns(cells);
  // With a range job among the cells: which cells are (their items are rows).
  bool jobs = AnyRange(cells);
  out << fmt::format(
      "{:>4} {:<18} {:<14} {:>3} {:>8} {:>8} {:>9} {:>7} {:>8} {:>5} {:>5} {:>9} {:>9} {:>8} "
      "{:>8} {:>5}{}{}\n",
      "cell", "policy", "load", "rep", "items", "batch_s", "items/s", "done", "deferred", "dead",
      "left", "p99_bef", "p99_dur", "refused", "revoked", "lost",
      jobs ? fmt::format(" {:<6}", "job") : "",
      shares ? fmt::format(" {:>5} {}", "runs", "done per run") : "");
  for (const auto& c : cells) {
    out << fmt::format(
        "{:>4} {:<18} {:<14} {:>3} {:>8} {:>8.1f} {:>9.0f} {:>7} {:>8} {:>5} {:>5} {:>9.1f} "
        "{:>9.1f} {:>8} {:>8} {:>5}{}{}\n",
        c.index, c.policy, c.load_level, c.repeat, c.items, c.batch_seconds, c.items_per_second,
        c.done, c.deferred, c.dead, c.queued_left, c.before.p99_ms, c.during.p99_ms, c.refusals,
        c.revocations, c.lost_updates, jobs ? fmt::format(" {:<6}", c.JobKind()) : "",
        shares ? fmt::format(" {:>5} {}", c.batch_processes, RunSharesText(c, " + ")) : "");
  }
}

namespace {

// " over 1000 -> 10000 rows", or "" when the rows are unknown.
std::string RowsText(long long measured_records, long long check_records) {
  if (measured_records <= 0 || check_records <= 0) return "";
  return fmt::format(" over {} -> {} rows", measured_records, check_records);
}

// A model's fixed seconds as a projection line gives them: a rounding's
// "-0.0" is 0.0.
std::string FixedCost(double seconds) {
  return fmt::format("{:.1f} s fixed", seconds > -0.05 ? std::max(seconds, 0.0) : seconds);
}

// Why a fixed cost is below zero, when it is: said at the end of the
// model's parentheses.
std::string BelowZero(double seconds) {
  return seconds > -0.05 ? ""
                         : "; fixed below zero: the first chunks and the tail ran faster than "
                           "the steady rate";
}

}  // namespace

void PrintProjections(std::ostream& out, const ScenarioSummary& scenario,
                      const std::vector<CellResult>& cells) {
  for (const auto& p : Project(cells, scenario)) {
    out << fmt::format("projection cell {} ({}{}): ", p.cell, p.policy,
                       p.job == "range" ? ", range job" : "");
    if (p.model.trusted) {
      out << fmt::format(
          "{} items in {:.0f} s{} ({} + {:.0f} items/s{}{}){}\n", scenario.production_queue_items,
          p.projected_seconds,
          p.repeats > 1 ? fmt::format(" ({:.0f}-{:.0f} s over {} measurements)", p.low_seconds,
                                      p.high_seconds, p.repeats)
                        : "",
          FixedCost(p.model.fixed_seconds), p.model.steady_rate,
          p.model.items_per_row > 0
              ? fmt::format(", at {:.2f} items per row as measured", p.model.items_per_row)
              : "",
          BelowZero(p.model.fixed_seconds),
          scenario.production_window_seconds <= 0 ? ""
          : p.fits_window                         ? ", fits the window"
                                                  : ", does not fit the window");
    } else {
      out << "none, " << p.model.untrusted_reason << '\n';
    }
  }
  double worst = 0;
  int checked = 0, unchecked = 0, ranged = 0, within = 0;
  for (const auto& c : CheckProjections(cells)) {
    if (c.trusted) {
      ++checked;
      if (std::abs(c.error_percent) > std::abs(worst)) worst = c.error_percent;
      if (c.repeats > 1) {
        ++ranged;
        if (c.WithinRange()) ++within;
      }
    } else {
      ++unchecked;
    }
    out << fmt::format(
        "projection check cell {} -> {} ({}{}): {} -> {} items{}{}: ", c.cell, c.check_cell,
        c.policy, c.load_level.empty() ? "" : ", " + c.load_level, c.measured_items, c.check_items,
        RowsText(c.measured_records, c.check_records),
        c.repeats > 1 ? fmt::format(", model the median of {} measurements", c.repeats) : "");
    if (c.trusted) {
      out << fmt::format(
          "projected {:.1f} s{}, measured {:.1f} s, error {:+.1f}%{}\n", c.projected_seconds,
          c.repeats > 1 ? fmt::format(" (range {:.1f}-{:.1f} s)", c.low_seconds, c.high_seconds)
                        : "",
          c.measured_seconds, c.error_percent,
          c.repeats > 1 && !c.WithinRange() ? ", outside the range" : "");
    } else {
      out << fmt::format("measured {:.1f} s, no projection: {}\n", c.measured_seconds,
                         c.untrusted_reason);
    }
  }
  // Whether the range the report states around a projection (the repeats'
  // own models) held the measurement.
  if (ranged > 0) {
    out << fmt::format("projection range: {} of {} checks measured within their repeats' range\n",
                       within, ranged);
  }
  // The line bench/projection_mixes.yaml is read by: how far the model
  // missed at worst, over the checks that gave an error figure.
  if (checked + unchecked > 0) {
    out << fmt::format(
        "projection: worst error {:+.1f}% over {} check{}{}\n", worst, checked,
        checked == 1 ? "" : "s",
        unchecked > 0 ? fmt::format(" ({} without an error figure)", unchecked) : "");
  }
}

void PrintRecommendations(std::ostream& out, const ScenarioSummary& scenario,
                          const std::vector<CellResult>& cells) {
  for (const auto& r : Recommend(cells, scenario)) {
    std::string level = r.load_level.empty() ? "" : " at " + r.load_level;
    out << "recommended" << level << ": " << (r.recommended.empty() ? "none" : r.recommended)
        << " — " << r.reason << '\n';
    for (const auto& p : r.outcomes) {
      if (p.repeats > 1) {
        out << fmt::format(
            "  {} over {} measurements: items/s {}, online p99 ratio {}, online errors {}\n",
            p.Label(), p.repeats, SpreadText(p.items_per_second, "{:.0f}"),
            SpreadText(p.p99_ratio_spread, "{:.2f}x"),
            SpreadText(p.error_percent_spread, "{:.2f}%"));
      }
      for (const auto& m : p.misses) {
        out << "  " << p.Label() << " missed " << m.objective << ": " << m.text << '\n';
      }
    }
  }
}

}  // namespace coexist::capacity

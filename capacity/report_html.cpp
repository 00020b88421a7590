#include "capacity/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "capacity/projection.h"
#include "capacity/recommendation.h"
#include "capacity/report.h"
#include "capacity/svg_chart.h"

namespace coexist::capacity {

std::string SpreadText(const Spread& s, const char* format) {
  return fmt::format(fmt::runtime(format), s.median) + " (" +
         fmt::format(fmt::runtime(format), s.min) + " to " +
         fmt::format(fmt::runtime(format), s.max) + ")";
}

namespace {

std::string Label(const CellResult& c) {
  return c.load_level.empty() ? c.policy : c.policy + " @ " + c.load_level;
}

// One bin of a cell's charts over time.
struct Bin {
  double from = 0, to = 0;
  long long transactions = 0;
  long long not_ok = 0;
  double p50_ms = 0, p99_ms = 0;
  long long batch_items = 0;
};

// The bin width while the batch runs: about 60 bins over its span, between
// one tick (100 ms) and a second; outside the batch, one bin per tick.
double BatchBinWidth(const CellResult& c) {
  double span = c.batch_end_seconds - c.batch_start_seconds;
  return std::clamp(std::round(span / 60 * 10) / 10, 0.1, 1.0);
}

// The ticks merged into bins: transactions add up, p50 is the
// transaction-weighted mean of the ticks' p50s, p99 the highest tick p99 (an
// upper bound: percentiles do not add); the batch's done chunks counted
// into the bin they ended in.
std::vector<Bin> Bins(const CellResult& c) {
  std::vector<Bin> bins;
  double width = BatchBinWidth(c);
  for (const auto& t : c.timeline) {
    double from = t.at_seconds - t.width_seconds;
    bool in_batch = t.at_seconds > c.batch_start_seconds && from < c.batch_end_seconds;
    if (bins.empty() || !in_batch || t.at_seconds - bins.back().from > width + 1e-6 ||
        bins.back().to <= c.batch_start_seconds) {
      bins.push_back({.from = from, .to = t.at_seconds});
    }
    Bin& b = bins.back();
    double weight = static_cast<double>(t.transactions);
    double total = static_cast<double>(b.transactions) + weight;
    if (total > 0)
      b.p50_ms = (b.p50_ms * static_cast<double>(b.transactions) + t.p50_ms * weight) / total;
    b.p99_ms = std::max(b.p99_ms, t.p99_ms);
    b.transactions += t.transactions;
    b.not_ok += t.not_ok;
    b.to = t.at_seconds;
  }
  for (const auto& chunk : c.chunks) {
    double at = c.batch_start_seconds + chunk.at_seconds;
    auto it = std::find_if(bins.begin(), bins.end(), [at](const Bin& b) { return at <= b.to; });
    if (it == bins.end() && !bins.empty()) it = std::prev(bins.end());
    if (it != bins.end()) it->batch_items += chunk.items;
  }
  return bins;
}

// When scenario.batch_processes is swept: per policy (and load), the runs
// side by side against the batch's items/s and the online p99 ratio, the
// median of the cells at each number of runs.
std::string ProcessesCharts(const std::vector<CellResult>& cells) {
  std::vector<int> counts;
  std::vector<std::string> labels;
  for (const auto& c : cells) {
    if (c.check_of != 0) continue;
    if (std::find(counts.begin(), counts.end(), c.batch_processes) == counts.end())
      counts.push_back(c.batch_processes);
    if (std::find(labels.begin(), labels.end(), Label(c)) == labels.end())
      labels.push_back(Label(c));
  }
  if (counts.size() < 2) return "";
  std::sort(counts.begin(), counts.end());
  auto chart = [&](const std::string& title, const std::string& y_label, auto figure) {
    LineChartSpec spec{.title = title, .x_label = "batch processes", .y_label = y_label};
    for (const auto& label : labels) {
      Series s{label};
      for (int count : counts) {
        std::vector<double> values;
        for (const auto& c : cells) {
          if (c.check_of == 0 && Label(c) == label && c.batch_processes == count)
            values.push_back(figure(c));
        }
        if (values.empty()) continue;
        s.x.push_back(count);
        s.y.push_back(SpreadOf(values).median);
      }
      spec.series.push_back(s);
    }
    return "<figure>" + LineChart(spec) + "</figure>\n";
  };
  return chart("Batch processes vs batch throughput", "items per second",
               [](const CellResult& c) { return c.items_per_second; }) +
         chart("Batch processes vs online p99 ratio", "p99 during / p99 before",
               [](const CellResult& c) {
                 return c.before.p99_ms > 0 ? c.during.p99_ms / c.before.p99_ms : 0;
               });
}

std::string Charts(const std::vector<CellResult>& cells) {
  std::string out;
  // Per cell, over time: online latency, then the throughput of both sides,
  // with the batch's span shaded and binned finer while it runs.
  for (const auto& c : cells) {
    auto bins = Bins(c);
    std::string width = fmt::format("{:.0f} ms bins while the batch runs", 1000 * BatchBinWidth(c));
    LineChartSpec latency{
        .title = fmt::format("Cell {}: online latency ({}, {})", c.index, Label(c), width),
        .x_label = "seconds since start",
        .y_label = "latency (ms)"};
    LineChartSpec throughput{
        .title = fmt::format("Cell {}: throughput ({}, {})", c.index, Label(c), width),
        .x_label = "seconds since start",
        .y_label = "per second"};
    LineChartSpec errors{
        .title = fmt::format("Cell {}: online not ok ({}, {})", c.index, Label(c), width),
        .x_label = "seconds since start",
        .y_label = "% of online transactions"};
    Series p50{"online p50"}, p99{"online p99"}, online{"online tx/s"}, batch{"batch items/s"};
    Series not_ok{"not ok %"};
    for (const auto& b : bins) {
      double mid = (b.from + b.to) / 2, seconds = std::max(b.to - b.from, 1e-3);
      if (b.transactions > 0) {
        p50.x.push_back(mid);
        p50.y.push_back(b.p50_ms);
        p99.x.push_back(mid);
        p99.y.push_back(b.p99_ms);
        not_ok.x.push_back(mid);
        not_ok.y.push_back(100.0 * static_cast<double>(b.not_ok) /
                           static_cast<double>(b.transactions));
      }
      online.x.push_back(mid);
      online.y.push_back(static_cast<double>(b.transactions) / seconds);
      // The batch's line only over its span: from the one-second bin before
      // it, a line to its first bin would draw a ramp up before it started.
      if (b.to > c.batch_start_seconds && b.from < c.batch_end_seconds) {
        batch.x.push_back(mid);
        batch.y.push_back(static_cast<double>(b.batch_items) / seconds);
      }
    }
    latency.series = {p50, p99};
    throughput.series = {online, batch};
    errors.series = {not_ok};
    latency.shaded = throughput.shaded =
        errors.shaded = {{c.batch_start_seconds, c.batch_end_seconds, "batch"}};
    out += "<figure>" + LineChart(latency) + "</figure>\n";
    out += "<figure>" + LineChart(throughput) + "</figure>\n";
    out += "<figure>" + LineChart(errors) + "</figure>\n";
  }
  // Per policy and load level: batch throughput, online p99, error rates.
  std::vector<std::string> levels;
  std::vector<std::string> policies;
  for (const auto& c : cells) {
    if (std::find(levels.begin(), levels.end(), c.load_level) == levels.end())
      levels.push_back(c.load_level);
    if (std::find(policies.begin(), policies.end(), c.policy) == policies.end())
      policies.push_back(c.policy);
  }
  // The median of the policy's cells at the level (their repeats, or several sweep cells).
  auto bars = [&](const std::string& title, const std::string& y_label, auto figure) {
    BarChartSpec spec{.title = title, .y_label = y_label};
    for (const auto& level : levels) spec.categories.push_back(level.empty() ? "all" : level);
    for (const auto& policy : policies) {
      Series s{policy};
      for (const auto& level : levels) {
        std::vector<double> values;  // every sweep cell and repeat of the policy at the level
        for (const auto& c : cells) {
          if (c.policy == policy && c.load_level == level && c.check_of == 0) {
            values.push_back(figure(c));
          }
        }
        s.y.push_back(SpreadOf(values).median);
      }
      spec.series.push_back(s);
    }
    return "<figure>" + BarChart(spec) + "</figure>\n";
  };
  out += ProcessesCharts(cells);
  out += bars("Batch throughput per policy", "items per second",
              [](const CellResult& c) { return c.items_per_second; });
  out += bars("Online p99 during the batch", "ms",
              [](const CellResult& c) { return c.during.p99_ms; });
  out += bars("Deferred items per 100 queued", "per 100 items", [](const CellResult& c) {
    return c.items > 0 ? 100.0 * static_cast<double>(c.deferred) / static_cast<double>(c.items) : 0;
  });
  out += bars("Online refusals and revocations per 1000 transactions", "per 1000",
              [](const CellResult& c) {
                return c.during.transactions > 0
                           ? 1000.0 * static_cast<double>(c.refusals + c.revocations) /
                                 static_cast<double>(c.during.transactions)
                           : 0;
              });
  return out;
}

std::string ProjectionChecksHtml(const std::vector<CellResult>& cells) {
  auto checks = CheckProjections(cells);
  if (checks.empty()) return "";
  std::string html =
      "<h2>Projection check</h2><p>Each measured cell's model projected to its check cell's "
      "queue (scenario.projection_check), against the duration measured there. The check cell "
      "seeds rows in proportion to its items, so each row has as many items as in the measured "
      "cell. A cell measured several times (scenario.repeat) is projected through the median of "
      "its measurements' models.</p>\n"
      "<table><tr><th>cell</th><th>policy</th><th>load</th><th>items (rows)</th><th>check "
      "items (rows)</th><th>projected</th><th>measured</th><th>error</th></tr>\n";
  for (const auto& c : checks) {
    html += fmt::format(
        "<tr><td>{} &rarr; {}</td><td class=text>{}</td><td class=text>{}</td><td>{}{}</td>"
        "<td>{}{}</td>",
        c.cell, c.check_cell, Escape(c.policy), Escape(c.load_level), c.measured_items,
        c.measured_records > 0 ? fmt::format(" ({})", c.measured_records) : "", c.check_items,
        c.check_records > 0 ? fmt::format(" ({})", c.check_records) : "");
    html += c.trusted
                ? fmt::format("<td>{:.1f} s{}</td><td>{:.1f} s</td><td>{:+.1f}%</td></tr>\n",
                              c.projected_seconds,
                              c.repeats > 1 ? fmt::format(" (median model of {})", c.repeats) : "",
                              c.measured_seconds, c.error_percent)
                : fmt::format(
                      "<td colspan=3 class=text>{:.1f} s measured; no projection: "
                      "{}</td></tr>\n",
                      c.measured_seconds, Escape(c.untrusted_reason));
  }
  return html + "</table>\n";
}

std::string PassFail(bool pass, const std::string& figure) {
  return pass ? "<span class=ok>" + figure + "</span>" : "<span class=bad>" + figure + "</span>";
}

bool Met(const PolicyOutcome& p, std::string_view objective) {
  return std::none_of(p.misses.begin(), p.misses.end(),
                      [&](const Miss& m) { return m.objective == objective; });
}

// The summary chart: each policy (at each load level) against each
// objective, a green or red square with the measured figure.
std::string ObjectivesChart(const std::vector<Recommendation>& recommendations) {
  GridChartSpec spec{.title = "Policies against the objectives",
                     .columns = {"window", "p99 ratio", "online errors", "done", "deferred"}};
  for (const auto& r : recommendations) {
    for (const auto& p : r.outcomes) {
      spec.rows.push_back(
          {.label = r.load_level.empty() ? p.Label() : p.Label() + " @ " + r.load_level,
           .cells = {{fmt::format("{:.1f} s", p.batch_seconds), Met(p, "window")},
                     {fmt::format("{:.2f}x", p.p99_ratio), Met(p, "max_p99_ratio")},
                     {fmt::format("{:.2f}%", p.error_percent), Met(p, "max_error_rate")},
                     {fmt::format("{:.2f}%", p.done_percent), Met(p, "min_done_share")},
                     {fmt::format("{:.2f}%", p.deferred_percent), Met(p, "max_deferred_share")}}});
    }
  }
  return "<figure>" + GridChart(spec) + "</figure>\n";
}

// Each policy against each objective, pass/fail at a glance, with what it
// missed and what would make it qualify.
std::string ObjectivesHtml(const ScenarioSummary& s, const std::vector<CellResult>& cells) {
  const auto& o = s.objectives;
  const auto recommendations = Recommend(cells, s);
  std::string html = fmt::format(
      "<h2>Objectives</h2>\n<p>A policy is recommended only when it meets all of them: the batch "
      "finishes inside the {:.0f} s window, online p99 during the batch at most {:g}x of the "
      "warm-up's, at most {:g}% of online transactions fail during the batch, at least {:g}% of "
      "the items done and at most {:g}% left deferred.</p>\n",
      s.window_seconds, o.max_p99_ratio, o.max_error_percent, o.min_done_percent,
      o.max_deferred_percent);
  html += ObjectivesChart(recommendations);
  html +=
      "<table><tr><th>load</th><th>policy</th><th>window</th><th>p99 ratio</th><th>online "
      "errors</th><th>what failed (users' conflicts with each other, not counted)</th>"
      "<th>done</th><th>deferred</th><th>missed, and what would qualify it</th></tr>\n";
  for (const auto& r : recommendations) {
    for (const auto& p : r.outcomes) {
      auto missed = [&p](const char* objective) { return Met(p, objective); };
      std::string notes;
      for (const auto& m : p.misses) {
        notes += (notes.empty() ? "" : "<br>") + Escape(m.text) + " &rarr; " + Escape(m.remedy);
      }
      std::string failed = Escape(FailuresText(p.failed_by_kind));
      if (!p.user_conflicts.empty()) {
        failed += " <span class=muted>(" + Escape(FailuresText(p.user_conflicts)) + ")</span>";
      }
      html += fmt::format(
          "<tr><td class=text>{}</td><td class=text>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td class=\"text failed\">{}</td><td>{}</td><td>{}</td><td class=text>{}</td></tr>\n",
          Escape(r.load_level.empty() ? "all" : r.load_level), Escape(p.Label()),
          PassFail(missed("window"), fmt::format("{:.1f} s", p.batch_seconds)),
          PassFail(missed("max_p99_ratio"), fmt::format("{:.2f}x", p.p99_ratio)),
          PassFail(missed("max_error_rate"), fmt::format("{:.2f}%", p.error_percent)), failed,
          PassFail(missed("min_done_share"), fmt::format("{:.2f}%", p.done_percent)),
          PassFail(missed("max_deferred_share"), fmt::format("{:.2f}%", p.deferred_percent)),
          notes.empty() ? "<span class=ok>meets every objective</span>" : notes);
    }
  }
  return html + "</table>\n";
}

// With scenario.repeat above 1: each policy's key figures, median and range
// over its cell's measurements, so that the planner sees which differences
// are larger than repeating the same cell gives.
std::string NoiseHtml(const ScenarioSummary& s, const std::vector<Recommendation>& recs) {
  if (s.repeat < 2) return "";
  std::string html = fmt::format(
      "<h2>Noise</h2>\n<p>Each cell was measured {} times, each on fresh data: the median and, "
      "in brackets, the lowest and highest of the measurements. Where two policies' ranges "
      "overlap, the difference between them is within the noise.</p>\n"
      "<table><tr><th>load</th><th>policy</th><th>measurements</th><th>batch items/s</th>"
      "<th>online p99 ratio</th><th>online errors</th><th>batch s</th></tr>\n",
      s.repeat);
  for (const auto& r : recs) {
    for (const auto& p : r.outcomes) {
      html += fmt::format(
          "<tr><td class=text>{}</td><td class=text>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td></tr>\n",
          Escape(r.load_level.empty() ? "all" : r.load_level), Escape(p.Label()), p.repeats,
          SpreadText(p.items_per_second, "{:.0f}"), SpreadText(p.p99_ratio_spread, "{:.2f}x"),
          SpreadText(p.error_percent_spread, "{:.2f}%"),
          SpreadText(p.batch_seconds_spread, "{:.1f}"));
    }
    if (!r.noise.empty()) {
      html += "<tr><td colspan=7 class=text>" + Escape(r.noise) + "</td></tr>\n";
    }
  }
  return html + "</table>\n";
}

// What pacing.online_latency did in each cell that set it; nothing when none did.
std::string LatencyObjectiveHtml(const std::vector<CellResult>& cells) {
  std::string rows;
  for (const auto& c : cells) {
    if (!c.latency) continue;
    const auto& l = *c.latency;
    rows += l.on ? fmt::format(
                       "<tr><td>{}</td><td class=text>{}</td><td>{:.2f}x</td>"
                       "<td class=text>{}</td><td>{:.2f}</td><td>{}</td><td>{:.1f}</td></tr>\n",
                       c.index, Escape(c.policy), l.objective, Escape(l.signal), l.baseline_ms,
                       l.slowdowns, l.seconds_over)
                 : fmt::format(
                       "<tr><td>{}</td><td class=text>{}</td><td>{:.2f}x</td>"
                       "<td colspan=4 class=text>off: {}</td></tr>\n",
                       c.index, Escape(c.policy), l.objective, Escape(l.off_reason));
  }
  if (rows.empty()) return "";
  return "<h2>Online latency objective</h2>\n<table><tr><th>cell</th><th>policy</th>"
         "<th>objective</th><th>signal</th><th>baseline ms</th><th>slowdowns</th><th>s "
         "over</th></tr>\n" +
         rows + "</table>\n";
}

}  // namespace

std::string ReportHtml(const ScenarioSummary& s, const std::vector<CellResult>& cells) {
  std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>coexist capacity report: )" +
                     Escape(s.name) + R"(</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3} td.text{text-align:left}
figure{margin:1em 0} svg.chart{width:100%;max-width:760px;height:auto;border:1px solid #eee}
.title{font-size:14px;font-weight:600} .tick,.legend,.axis-label{font-size:11px;fill:#444}
.grid{stroke:#e5e5e5} .span{fill:#ffd54f;opacity:.35} .span-label{font-size:11px;fill:#8a6d00}
.ok{color:#1b7f1b;font-weight:600} .bad{color:#b00020;font-weight:600} .muted{color:#666}
.grid-text{font-size:12px;fill:#222}
</style></head><body>
)";
  html += "<h1>Capacity report: " + Escape(s.name) + "</h1>\n";
  if (!s.description.empty()) html += "<p>" + Escape(s.description) + "</p>\n";
  html += fmt::format(
      "<p>{}{} queued items per cell, batch window {:.0f} s{}{}. Run {} on {}.</p>\n",
      s.records > 0 ? fmt::format("{} records, ", s.records) : "", s.queue_items, s.window_seconds,
      s.min_batch_seconds > 0
          ? fmt::format(", each cell's queue grown until its batch runs at least {:g} s",
                        s.min_batch_seconds)
          : "",
      s.repeat > 1 ? fmt::format(", each cell measured {} times", s.repeat) : "",
      Escape(s.started_at), Escape(s.host));
  if (!s.workload.empty()) {
    html += "<table class=workload>\n";
    for (const auto& [what, text] : s.workload) {
      html += "<tr><th>" + Escape(what) + "</th><td class=text>" + Escape(text) + "</td></tr>\n";
    }
    html += "</table>\n";
  }

  html +=
      "<h2>Recommendation</h2>\n<table><tr><th>load</th><th>recommended</th><th>why</th></tr>\n";
  for (const auto& r : Recommend(cells, s)) {
    html +=
        fmt::format("<tr><td class=text>{}</td><td class=text>{}</td><td class=text>{}</td></tr>\n",
                    Escape(r.load_level.empty() ? "all" : r.load_level),
                    r.recommended.empty() ? "<span class=bad>none</span>"
                                          : "<span class=ok>" + Escape(r.recommended) + "</span>",
                    Escape(r.reason));
  }
  html += "</table>\n" + ObjectivesHtml(s, cells) + NoiseHtml(s, Recommend(cells, s));

  auto projections = Project(cells, s);
  if (!projections.empty()) {
    html += fmt::format(
        "<h2>Projection for production</h2><p>Batch duration for {} items from each cell's "
        "model: fixed costs (setup, the first chunks, the tail of waits and deferred items) plus "
        "the items at the steady rate measured between the first and the last tenth of the "
        "items. Assumes the same online load, hardware, items per row of the target and policy "
        "settings.</p>\n"
        "<table><tr><th>cell</th><th>policy</th><th>measured on</th><th>steady items/s</th>"
        "<th>fixed s</th><th>projected</th><th>fits {:.0f} s window</th><th>range over the "
        "repeats</th></tr>\n",
        s.production_queue_items, s.production_window_seconds);
    for (const auto& p : projections) {
      html += fmt::format("<tr><td>{}</td><td class=text>{}</td><td class=text>{}</td>", p.cell,
                          Escape(p.policy), Escape(p.mix));
      html +=
          p.model.trusted
              ? fmt::format(
                    "<td>{:.0f}</td><td>{:.1f}</td><td>{:.0f} s</td><td>{}</td><td>{}</td></tr>\n",
                    p.model.steady_rate, p.model.fixed_seconds, p.projected_seconds,
                    p.fits_window ? "<span class=ok>yes</span>" : "<span class=bad>no</span>",
                    p.repeats > 1 ? fmt::format("{:.0f}-{:.0f} s ({} measurements)", p.low_seconds,
                                                p.high_seconds, p.repeats)
                                  : "one measurement")
              : "<td colspan=5 class=text>no projection: " + Escape(p.model.untrusted_reason) +
                    "</td></tr>\n";
    }
    html += "</table>\n";
  }
  html += ProjectionChecksHtml(cells);

  html += "<h2>Results</h2>\n<table><tr>";
  for (const char* h : {"cell", "policy", "load", "repeat", "items", "batch s", "items/s", "done",
                        "deferred", "dead", "left", "p99 before", "p99 during", "p99 after",
                        "conflicts", "refusals", "revocations", "lost"}) {
    html += std::string("<th>") + h + "</th>";
  }
  const bool several_runs = SeveralRuns(cells);
  const bool jobs = AnyRange(cells);
  if (jobs) html += "<th>job</th>";
  if (several_runs) html += "<th>runs: done per run</th>";
  html += "</tr>\n";
  for (const auto& c : cells) {
    html += fmt::format(
        "<tr><td>{}</td><td class=text>{}</td><td class=text>{}</td><td>{}</td><td>{}</td>"
        "<td>{:.1f}</td><td>{:.0f}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td>{}{}</tr>\n",
        c.index, Escape(c.policy), Escape(c.load_level), c.repeat,
        c.grown_from > 0
            ? fmt::format("{} (grown from {}, over {} rows)", c.items, c.grown_from, c.records)
            : std::to_string(c.items),
        c.batch_seconds, c.items_per_second, c.done, c.deferred, c.dead, c.queued_left,
        c.before.p99_ms, c.during.p99_ms, c.after.p99_ms, c.conflicts, c.refusals, c.revocations,
        c.lost_updates == 0 ? "0" : "<span class=bad>" + std::to_string(c.lost_updates) + "</span>",
        jobs ? fmt::format("<td class=text>{}</td>",
                           c.Range() ? "range: " + Escape(c.range_where) : "queued")
             : "",
        several_runs ? fmt::format("<td>{}: {}</td>", c.batch_processes, RunSharesText(c, " + "))
                     : "");
  }
  html += "</table>\n";
  html += LatencyObjectiveHtml(cells);
  html += "<h2>Charts</h2>\n" + Charts(cells) + "</body></html>\n";
  return html;
}

}  // namespace coexist::capacity

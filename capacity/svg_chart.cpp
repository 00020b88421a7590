#include "capacity/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace coexist::capacity {
namespace {

constexpr double kWidth = 720;
constexpr double kHeight = 320;
constexpr double kLeft = 64;
constexpr double kRight = 160;  // room for the legend
constexpr double kTop = 36;
constexpr double kBottom = 48;
constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

const char* Color(size_t i) { return kPalette[i % std::size(kPalette)]; }

// A "nice" upper bound and step for an axis from 0 to max.
std::pair<double, double> NiceScale(double max) {
  if (max <= 0 || !std::isfinite(max)) return {1, 0.2};
  double magnitude = std::pow(10, std::floor(std::log10(max)));
  for (double step_factor : {0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0}) {
    double step = step_factor * magnitude;
    if (max / step <= 6) return {std::ceil(max / step) * step, step};
  }
  return {max, max / 5};
}

std::string Number(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::abs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2g}", v);
}

std::string Frame(const std::string& title, const std::string& x_label,
                  const std::string& y_label) {
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">)svg",
      kWidth, kHeight, Escape(title));
  out += fmt::format(R"svg(<text x="{}" y="20" class="title">{}</text>)svg", kLeft, Escape(title));
  out +=
      fmt::format(R"svg(<text x="{}" y="{}" class="axis-label" text-anchor="middle">{}</text>)svg",
                  kLeft + (kWidth - kLeft - kRight) / 2, kHeight - 8, Escape(x_label));
  out += fmt::format(
      R"svg(<text transform="translate(14 {}) rotate(-90)" class="axis-label" text-anchor="middle">{}</text>)svg",
      kTop + (kHeight - kTop - kBottom) / 2, Escape(y_label));
  return out;
}

std::string Legend(const std::vector<Series>& series) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    double y = kTop + 8 + 18 * static_cast<double>(i);
    out += fmt::format(R"svg(<rect x="{}" y="{}" width="12" height="12" fill="{}"/>)svg",
                       kWidth - kRight + 12, y - 10, Color(i));
    out += fmt::format(R"svg(<text x="{}" y="{}" class="legend">{}</text>)svg",
                       kWidth - kRight + 30, y, Escape(series[i].name));
  }
  return out;
}

}  // namespace

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string LineChart(const LineChartSpec& spec) {
  double x_max = 0, y_max = 0;
  for (const auto& s : spec.series) {
    for (double x : s.x) x_max = std::max(x_max, x);
    for (double y : s.y) y_max = std::max(y_max, y);
  }
  for (const auto& span : spec.shaded) x_max = std::max(x_max, span.to);
  auto [x_top, x_step] = NiceScale(x_max);
  auto [y_top, y_step] = NiceScale(y_max);
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + plot_w * x / x_top; };
  auto py = [&](double y) { return kTop + plot_h * (1 - y / y_top); };

  std::string out = Frame(spec.title, spec.x_label, spec.y_label);
  for (const auto& span : spec.shaded) {
    out += fmt::format(R"svg(<rect class="span" x="{:.1f}" y="{}" width="{:.1f}" height="{}"/>)svg",
                       px(span.from), kTop, std::max(1.0, px(span.to) - px(span.from)), plot_h);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{}" class="span-label">{}</text>)svg",
                       px(span.from) + 4, kTop + 12, Escape(span.label));
  }
  for (double y = 0; y <= y_top + 1e-9; y += y_step) {
    out += fmt::format(R"svg(<line class="grid" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>)svg",
                       kLeft, kLeft + plot_w, py(y), py(y));
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)svg",
                       kLeft - 6, py(y) + 4, Number(y));
  }
  for (double x = 0; x <= x_top + 1e-9; x += x_step) {
    out +=
        fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg",
                    px(x), kTop + plot_h + 16, Number(x));
  }
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const auto& s = spec.series[i];
    std::string points;
    for (size_t k = 0; k < std::min(s.x.size(), s.y.size()); ++k) {
      points += fmt::format("{:.1f},{:.1f} ", px(s.x[k]), py(s.y[k]));
    }
    out += fmt::format(
        R"svg(<polyline class="series" fill="none" stroke="{}" stroke-width="1.8" points="{}"/>)svg",
        Color(i), points);
  }
  out += Legend(spec.series);
  out += "</svg>";
  return out;
}

std::string BarChart(const BarChartSpec& spec) {
  double y_max = 0;
  for (const auto& s : spec.series) {
    for (double y : s.y) y_max = std::max(y_max, y);
  }
  auto [y_top, y_step] = NiceScale(y_max);
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto py = [&](double y) { return kTop + plot_h * (1 - y / y_top); };
  std::string out = Frame(spec.title, "", spec.y_label);
  for (double y = 0; y <= y_top + 1e-9; y += y_step) {
    out += fmt::format(R"svg(<line class="grid" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>)svg",
                       kLeft, kLeft + plot_w, py(y), py(y));
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)svg",
                       kLeft - 6, py(y) + 4, Number(y));
  }
  size_t groups = std::max<size_t>(1, spec.categories.size());
  double group_w = plot_w / static_cast<double>(groups);
  double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, spec.series.size()));
  for (size_t g = 0; g < spec.categories.size(); ++g) {
    double x0 = kLeft + group_w * static_cast<double>(g) + group_w * 0.1;
    for (size_t i = 0; i < spec.series.size(); ++i) {
      double y = g < spec.series[i].y.size() ? spec.series[i].y[g] : 0;
      double x = x0 + bar_w * static_cast<double>(i);
      out += fmt::format(
          R"svg(<rect class="bar" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} / {}: {}</title></rect>)svg",
          x, py(y), std::max(1.0, bar_w - 2), kTop + plot_h - py(y), Color(i),
          Escape(spec.categories[g]), Escape(spec.series[i].name), Number(y));
    }
    out +=
        fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg",
                    x0 + group_w * 0.4, kTop + plot_h + 16, Escape(spec.categories[g]));
  }
  out += Legend(spec.series);
  out += "</svg>";
  return out;
}

std::string GridChart(const GridChartSpec& spec) {
  constexpr double kLabelWidth = 200, kRowHeight = 28, kHeaderHeight = 24;
  double height = kTop + kHeaderHeight + kRowHeight * static_cast<double>(spec.rows.size()) + 16;
  double column_w =
      (kWidth - kLabelWidth - 8) / static_cast<double>(std::max<size_t>(1, spec.columns.size()));
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart grid-chart" viewBox="0 0 {} {}" role="img" aria-label="{}">)svg",
      kWidth, height, Escape(spec.title));
  out += fmt::format(R"svg(<text x="8" y="20" class="title">{}</text>)svg", Escape(spec.title));
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    out +=
        fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)svg",
                    kLabelWidth + column_w * (static_cast<double>(c) + 0.5), kTop + 14,
                    Escape(spec.columns[c]));
  }
  for (size_t r = 0; r < spec.rows.size(); ++r) {
    const auto& row = spec.rows[r];
    double y = kTop + kHeaderHeight + kRowHeight * static_cast<double>(r);
    out += fmt::format(R"svg(<text x="8" y="{:.1f}" class="legend">{}</text>)svg", y + 18,
                       Escape(row.label));
    for (size_t c = 0; c < std::min(row.cells.size(), spec.columns.size()); ++c) {
      const auto& cell = row.cells[c];
      double x = kLabelWidth + column_w * static_cast<double>(c);
      out += fmt::format(
          R"svg(<rect class="{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} / {}: {} ({})</title></rect>)svg",
          cell.pass ? "pass" : "fail", x + 2, y + 2, column_w - 4, kRowHeight - 4,
          cell.pass ? "#c8e6c9" : "#ffcdd2", Escape(row.label), Escape(spec.columns[c]),
          Escape(cell.text), cell.pass ? "pass" : "fail");
      out += fmt::format(
          R"svg(<text x="{:.1f}" y="{:.1f}" class="grid-text" text-anchor="middle">{} {}</text>)svg",
          x + column_w / 2, y + 18, cell.pass ? "&#x2713;" : "&#x2717;", Escape(cell.text));
    }
  }
  out += "</svg>";
  return out;
}

}  // namespace coexist::capacity

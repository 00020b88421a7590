#pragma once

#include <string>
#include <vector>

namespace coexist::capacity {

// Small, dependency-free SVG charts for the self-contained report.html.
// Output is a complete <svg> element with a viewBox, so it scales with the page.

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
};

struct Span {
  double from = 0;
  double to = 0;
  std::string label;
};

struct LineChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<Span> shaded;  // e.g. the batch's span
  bool log_y = false;
};

std::string LineChart(const LineChartSpec& spec);

struct BarChartSpec {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;  // groups along x
  std::vector<Series> series;           // one bar per series in each group; y[i] per category
};

std::string BarChart(const BarChartSpec& spec);

// A pass/fail grid: one row per subject (a policy at a load level), one
// column per criterion (an objective); each square green with class "pass"
// or red with class "fail", the measured figure written in it.
struct GridCell {
  std::string text;  // the figure, e.g. "1.20x"
  bool pass = false;
};

struct GridRow {
  std::string label;
  std::vector<GridCell> cells;  // one per column
};

struct GridChartSpec {
  std::string title;
  std::vector<std::string> columns;
  std::vector<GridRow> rows;
};

std::string GridChart(const GridChartSpec& spec);

// Escapes text for SVG/HTML.
std::string Escape(const std::string& text);

}  // namespace coexist::capacity

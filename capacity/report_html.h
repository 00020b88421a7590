#pragma once

#include <string>
#include <vector>

#include "capacity/cell_result.h"
#include "capacity/recommendation.h"

namespace coexist::capacity {

// report.html: one self-contained page (inline CSS and SVG charts) with the
// recommendation, the objectives chart and table, the noise over repeats,
// the projection and its check, the results table and the charts over time.
std::string ReportHtml(const ScenarioSummary& scenario, const std::vector<CellResult>& cells);

// A figure's median and range as text, each number formatted with `format`
// (a fmt format string for one double): "1.40x (1.20x to 1.60x)".
std::string SpreadText(const Spread& spread, const char* format);

}  // namespace coexist::capacity

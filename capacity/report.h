#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// Writes results.json, results.csv and report.html into `dir` (created if
// needed). Each file is written to a temporary name and renamed, so a reader
// never sees half a report. Throws coexist::Error (EX_CANTCREAT) when the
// folder cannot be written.
void WriteReport(const std::filesystem::path& dir, const ScenarioSummary& scenario,
                 const std::vector<CellResult>& cells);

// The terminal table: one row per cell.
void PrintTable(std::ostream& out, const std::vector<CellResult>& cells);

// Each cell's production projection (or why there is none), then each
// projection check: projected and measured duration, and the error.
void PrintProjections(std::ostream& out, const ScenarioSummary& scenario,
                      const std::vector<CellResult>& cells);

// Per load level: the recommended policy (or none) and why, then each
// objective each policy missed.
void PrintRecommendations(std::ostream& out, const ScenarioSummary& scenario,
                          const std::vector<CellResult>& cells);

// Each run's items done, joined by `separator` ("160 + 140").
std::string RunSharesText(const CellResult& cell, const std::string& separator);
// Whether some cell ran several runs of the job (scenario.batch_processes).
bool SeveralRuns(const std::vector<CellResult>& cells);
// Whether some cell is a range job's (batch.range): the table then says
// which cells are ("range" or "queued").
bool AnyRange(const std::vector<CellResult>& cells);

// The CSV columns, in order (results.csv's header).
const std::vector<std::string>& CsvColumns();

}  // namespace coexist::capacity

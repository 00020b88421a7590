#pragma once

// Writing a file node_exporter's textfile collector reads, so that it never
// reads half of one: the run's metrics (metrics/run_metrics.h) and the
// jobs' progress (metrics/job_metrics.h).

#include <filesystem>
#include <string>

namespace coexist::metrics {

// Replaces `path` with `text` in one step: a new temporary file of an
// unpredictable name in the same folder (mkstemp, which never follows a
// symlink planted there), mode 0644 (node_exporter reads it as another
// user), synced, then renamed over `path`, and the folder synced. Throws
// coexist::Error (EX_CANTCREAT) naming the path and the step that failed,
// with no temporary file left behind.
void ReplaceFile(const std::filesystem::path& path, const std::string& text);

}  // namespace coexist::metrics

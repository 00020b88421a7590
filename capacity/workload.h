#pragma once

// The user's workload in a scenario cell (config::Workload): their tables
// made afresh, filled with sampled and generated rows, their job's items
// queued, and their checks run. Private to capacity/ (it brings in libpqxx).

#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "config/scenario.h"

namespace coexist::capacity {

// The server's first line of a refused statement, without "ERROR:  ".
std::string FirstLine(const pqxx::sql_error& e);

// Drops the schemas the schema file creates (and the tables it creates
// outside them), runs it, copies the sample, generates scenario.data in
// order, gives the target and targets the version trigger, and ANALYZEs
// what was filled. Returns the target's rows. SQL the database refuses
// (the file, a generator, a where:) is a ConfigError at its key; a source
// that cannot be reached a TempFailError naming it without its password.
long long PrepareUserTables(pqxx::connection_base& conn, const config::Workload& workload,
                            const config::Config& config);

// Copies the sample's rows into its table on `conn`: the columns both
// tables have, at most sample.rows rows matching sample.where. The source
// is only read, in a READ ONLY transaction: a where: that would write fails
// there (25006) and is reported at the key. Returns the rows copied.
long long CopySample(const config::SampleSource& sample, pqxx::connection_base& conn);

// The online role's rights on the user's tables, as on the demo table.
void GrantUserTables(pqxx::transaction_base& tx, const config::Workload& workload,
                     const std::string& role);

// The query that queues a cell's `items` items: the job's enqueue.select's
// first rows when it has one, else the target's keys in key order, evenly,
// as many as asked (the demo's spread).
std::string EnqueueQuery(pqxx::transaction_base& tx, const config::Config& config, long long items);

// scenario.applied_check's number, and scenario.invariant's value (text).
long long AppliedCheck(pqxx::transaction_base& tx, const config::Workload& workload);
std::string ReadInvariant(pqxx::transaction_base& tx, const config::Workload& workload);
// How far the invariant moved: |after - before| for numbers (at least 1
// when they differ), 1 for other values that differ, 0 when equal.
long long InvariantDrift(const std::string& before, const std::string& after);

// What the cells run, for the report: the table and its rows, the online
// mix (custom SQL kinds marked), the batch's operation and job, the checks.
std::vector<std::pair<std::string, std::string>> DescribeWorkload(const config::ScenarioCell& cell);

}  // namespace coexist::capacity

#pragma once

// The `operation:` section the batch, pacing, crash, ops and daemon tests
// run: each chunk sleeps `sleep` seconds in the database (so a run lasts
// long enough to signal, pace or kill it), adds 1 to its products' stock and
// writes one ledger row per item, so "applied exactly once" is a count of
// ledger rows. The test creates public.ledger (key bigint[, tag text]).

#include <string>

namespace coexist::testing {

// `tag`, when given, goes into ledger.tag: which configuration applied an
// item (the daemon's SIGHUP tests).
inline std::string LedgerOperation(const std::string& sleep = "0", const std::string& tag = "") {
  std::string insert = tag.empty() ? "    INSERT INTO ledger (key) SELECT unnest($1::bigint[])\n"
                                   : "    INSERT INTO ledger (key, tag) SELECT k, '" + tag +
                                         "' FROM unnest($1::bigint[]) AS k\n";
  return "operation:\n"
         "  chunk_sql: |\n"
         "    WITH s AS (SELECT pg_sleep(" +
         sleep +
         ")),\n"
         "    u AS (UPDATE products SET stock = stock + 1\n"
         "          WHERE id = ANY ($1::bigint[]) AND (SELECT true FROM s))\n" +
         insert;
}

}  // namespace coexist::testing

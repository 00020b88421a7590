#include "schema/range_chunk_function.h"

#include "common/sql_text.h"

namespace coexist::db {
namespace {

// A SQL string literal of `text`.
std::string Literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The bounds of step 3 (the checkpoint, exclusive; the segment's upper key,
// inclusive), for one shape: each shape is a statement of its own so that
// its plan uses the key's index for the bounds it has, as
// RecordSql::PrepareRange's.
std::string Bounds(const std::string& key, const std::string& key_type, bool after, bool upper) {
  std::string bounds;
  if (after) bounds += key + " > cx_last::" + key_type + " AND ";
  if (upper) bounds += key + " <= cx_upper::" + key_type + " AND ";
  return bounds;
}

// Step 3 in the four shapes of bounds (no checkpoint yet, no upper bound:
// the first and last segments), `read` writing one of them.
std::string ForEachShape(const std::function<std::string(bool after, bool upper)>& read) {
  return "  IF cx_last IS NULL AND cx_upper IS NULL THEN\n" + read(false, false) +
         "  ELSIF cx_upper IS NULL THEN\n" + read(true, false) + "  ELSIF cx_last IS NULL THEN\n" +
         read(false, true) + "  ELSE\n" + read(true, true) + "  END IF;\n";
}

}  // namespace

std::string RangeChunkFunctionSql(const RangeChunkSpec& spec) {
  const std::string& table = spec.table;
  const std::string& key = spec.key;
  const std::string& key_type = spec.key_type;
  // The line break ends a `--` comment the predicate may end with.
  const std::string where = "(" + spec.where + "\n)";
  // Keys an earlier pass left in the queue are the queue's (step 4).
  const std::string queued =
      "EXISTS (SELECT 1 FROM coexist.queue q WHERE q.job = cx_job\n"
      "        AND q.record_key = %s AND q.state IN ('queued', 'deferred'))";
  auto queued_key = [&](const std::string& k) {
    std::string text = queued;
    return text.replace(text.find("%s"), 2, k);
  };
  // Step 5. Most chunks meet no live edit lock of the target at all: that
  // is asked first, by the expiry's index, before the chunk's keys are.
  // `live_lock` is left open: a condition on the lock may follow, then ")".
  const std::string live_lock =
      "EXISTS (SELECT 1 FROM coexist.edit_locks e WHERE e.target = " + Literal(table) +
      "::regclass\n"
      "         AND e.expires_at > clock_timestamp()";
  std::string taken = "(" + live_lock + ")\n     AND " + live_lock +
                      "\n         AND e.record_key = ANY (cx_apply)))";
  if (spec.owner_column) {
    taken += "\n      OR EXISTS (SELECT 1 FROM " + table + " WHERE " + key +
             " = ANY (cx_apply::" + key_type + "[]) AND " + *spec.owner_column + " = 'batch')";
  }
  const std::string finish =
      "    UPDATE coexist.range_checkpoints c SET finished = true, run_id = cx_run,\n"
      "           updated_at = now() WHERE c.job = cx_job AND c.segment = cx_segment;\n"
      "    cx_state := 'walked'; cx_keys := 0; RETURN;\n";
  std::string steps;
  if (!spec.set_update) {
    // chunk_sql: its statement may not repeat the predicate, so the rows are
    // locked first and the predicate checked on the locked versions (the
    // lock's recheck); the statement runs by name on the keys locked. Named
    // apart from the key column: ORDER BY the column's name would otherwise
    // sort by this text (10 before 9).
    steps = ForEachShape([&](bool after, bool upper) {
              return "    cx_keys_read := ARRAY(SELECT " + key + "::text AS cx_k FROM " + table +
                     " WHERE " + Bounds(key, key_type, after, upper) + where + " ORDER BY " + key +
                     " LIMIT cx_size FOR UPDATE NOWAIT);\n";
            }) +
            "  IF cardinality(cx_keys_read) = 0 THEN\n" + finish +
            "  END IF;\n"
            "  cx_keys := cardinality(cx_keys_read);\n"
            "  cx_upto := cx_keys_read[cx_keys];\n"
            "  cx_apply := cx_keys_read;\n"
            "  IF cx_skip_queued THEN\n"
            "    cx_apply := ARRAY(SELECT u.k FROM unnest(cx_keys_read) WITH ORDINALITY u(k, n)\n"
            "      WHERE NOT " +
            queued_key("u.k") +
            " ORDER BY u.n);\n"
            "  END IF;\n"
            "  IF " +
            taken +
            " THEN\n"
            "    cx_state := 'retake'; RETURN;\n"
            "  END IF;\n"
            "  IF cardinality(cx_apply) > 0 THEN\n"
            "    EXECUTE 'EXECUTE " +
            spec.statement +
            " (' || quote_literal(cx_apply::text) || ')';\n"
            "    cx_applied := cardinality(cx_apply);\n"
            "  END IF;\n";
  } else {
    // operation.set: coexist writes the UPDATE and it repeats the predicate,
    // so step 3 reads only where the chunk ends (no lock: a lock first
    // writes every row twice), and the UPDATE of the rows up to there takes
    // their locks, under a 1 ms lock_timeout, and checks the predicate
    // again on the versions it changes; then step 5 over the chunk's range
    // rolls the whole call back when a row of it is taken (the header).
    // Step 5 asks about every row of the range, changed or not (the
    // predicate may no longer select the changed ones): a row it did not
    // change sends the chunk the careful way for nothing, which costs time,
    // never a row.
    auto update_and_check = [&](bool after) {
      std::string range = Bounds(key, key_type, after, false) + key + " <= cx_upto::" + key_type;
      std::string check =
          "    IF cx_applied > 0 AND " + live_lock +
          ") THEN\n"
          "      cx_apply := ARRAY(SELECT " +
          key + "::text FROM " + table + " WHERE " + range +
          ");\n"
          "      IF " +
          live_lock +
          "\n         AND e.record_key = ANY (cx_apply)) THEN\n"
          "        RAISE EXCEPTION 'coexist: a row of the range chunk is edit-locked'\n"
          "          USING ERRCODE = 'lock_not_available';\n"
          "      END IF;\n"
          "    END IF;\n";
      if (spec.owner_column) {
        check += "    IF cx_applied > 0 AND EXISTS (SELECT 1 FROM " + table + " WHERE " + range +
                 " AND " + *spec.owner_column +
                 " = 'batch') THEN\n"
                 "      RAISE EXCEPTION 'coexist: a row of the range chunk is owned by a run'\n"
                 "        USING ERRCODE = 'lock_not_available';\n"
                 "    END IF;\n";
      }
      return "    " +
             spec.set_update(range + "\n AND NOT (cx_skip_queued AND " +
                             queued_key(key + "::text") + ")") +
             ";\n"
             "    GET DIAGNOSTICS cx_applied = ROW_COUNT;\n" +
             check;
    };
    steps = ForEachShape([&](bool after, bool upper) {
              // The last of the chunk's keys and their number (max() would
              // not do: uuid has none).
              return "    SELECT r.cx_k::text, r.cx_n INTO cx_upto, cx_keys FROM (SELECT " + key +
                     " AS cx_k, row_number() OVER (ORDER BY " + key + ") AS cx_n FROM " + table +
                     " WHERE " + Bounds(key, key_type, after, upper) + where + " ORDER BY " + key +
                     " LIMIT cx_size) r ORDER BY r.cx_n DESC LIMIT 1;\n";
            }) +
            "  IF cx_keys IS NULL THEN\n" + finish +
            "  END IF;\n"
            "  PERFORM set_config('lock_timeout', '1ms', true);\n"
            "  IF cx_last IS NULL THEN\n" +
            update_and_check(false) + "  ELSE\n" + update_and_check(true) + "  END IF;\n";
  }
  // The variables are cx_-named and columns win a clash (use_column): the
  // predicate names the target's columns, whatever they are called.
  std::string body =
      "#variable_conflict use_column\n"
      "DECLARE\n"
      "  cx_pass bigint; cx_upper text; cx_last text; cx_finished boolean;\n"
      "  cx_keys_read text[]; cx_apply text[]; cx_upto text;\n"
      "BEGIN\n"
      "  cx_keys := 0; cx_applied := 0;\n"
      "  IF NOT coexist.hold_run(cx_run) THEN cx_state := 'fenced'; RETURN; END IF;\n"
      "  SELECT c.pass, c.upper_key, c.last_key, c.finished\n"
      "    INTO cx_pass, cx_upper, cx_last, cx_finished FROM coexist.range_checkpoints c\n"
      "   WHERE c.job = cx_job AND c.segment = cx_segment FOR UPDATE SKIP LOCKED;\n"
      "  IF NOT FOUND THEN cx_state := 'busy'; RETURN; END IF;\n"
      "  IF cx_finished OR cx_pass <> cx_pass_wanted THEN cx_state := 'walked'; RETURN; END IF;\n" +
      steps +
      "  UPDATE coexist.range_checkpoints c\n"
      "     SET last_key = cx_upto, applied = c.applied + cx_applied, run_id = cx_run,\n"
      "         updated_at = now()\n"
      "   WHERE c.job = cx_job AND c.segment = cx_segment;\n"
      "  cx_state := 'applied';\n"
      "END\n";
  std::string tag = sql_text::DollarQuoteTag(body, "coexist_range");
  return "CREATE OR REPLACE FUNCTION pg_temp.coexist_range_chunk(\n"
         "    cx_run bigint, cx_job text, cx_segment integer, cx_pass_wanted bigint,\n"
         "    cx_size integer, cx_skip_queued boolean,\n"
         "    OUT cx_state text, OUT cx_keys integer, OUT cx_applied bigint)\n"
         "LANGUAGE plpgsql VOLATILE AS " +
         tag + "\n" + body + tag;
}

}  // namespace coexist::db

#include "dashboard/state.h"

#include <pqxx/pqxx>

namespace coexist::dashboard {

nlohmann::json JobJson(const db::JobRow& j) {
  nlohmann::json row = {{"job", j.job},
                        {"running_runs", j.running_runs},
                        {"queued", j.queued},
                        {"deferred", j.deferred},
                        {"done", j.done},
                        {"dead", j.dead},
                        {"cancelled", j.cancelled},
                        {"items_per_second", nullptr},
                        {"eta_seconds", nullptr},
                        {"paused", false}};
  if (auto rate = j.Rate()) row["items_per_second"] = *rate;
  if (auto eta = j.EtaSeconds()) row["eta_seconds"] = *eta;
  row["online_latency_ratio"] = nullptr;
  if (j.online_latency_ratio) row["online_latency_ratio"] = *j.online_latency_ratio;
  row["online_latency_objective"] = nullptr;
  if (j.online_latency_objective) row["online_latency_objective"] = *j.online_latency_objective;
  row["runs_by_pacing_state"] = j.runs_by_pacing_state;
  row["pacing_duty"] = nullptr;
  if (j.pacing_duty) row["pacing_duty"] = *j.pacing_duty;
  if (j.range_segments > 0) {
    row["range"] = {{"segments", j.range_segments},
                    {"finished", j.range_finished},
                    {"applied", j.range_applied},
                    {"expected", j.range_expected},
                    {"walked", j.range_walked}};
  }
  if (j.pause) {
    row["paused"] = true;
    row["paused_at"] = j.pause->since;
    row["paused_by"] = j.pause->by;
    row["db_user"] = j.pause->db_user;
    row["reason"] = j.pause->reason;
  }
  return row;
}

nlohmann::json RunJson(const db::RunRow& r) {
  return {{"run_id", r.run_id},     {"job", r.job},
          {"policy", r.policy},     {"host", r.host},
          {"pid", r.pid},           {"started_at", r.started_at},
          {"ended_at", r.ended_at}, {"outcome", r.outcome},
          {"claimed", r.claimed},   {"done", r.done},
          {"deferred", r.deferred}, {"dead", r.dead},
          {"seconds", r.seconds},   {"pacing", nlohmann::json::parse(r.pacing_json)}};
}

nlohmann::json EventJson(const db::EventRow& e) {
  auto optional = [](const std::optional<long long>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  auto text = [](const std::string& v) { return v.empty() ? nlohmann::json() : nlohmann::json(v); };
  return {{"event_id", e.event_id},
          {"at", e.at},
          {"kind", e.kind},
          {"job", text(e.job)},
          {"run_id", optional(e.run_id)},
          {"item_id", optional(e.item_id)},
          {"target", text(e.target)},
          {"record_key", text(e.record_key)},
          {"actor", text(e.actor)},
          {"subject", text(e.subject)},
          {"details", nlohmann::json::parse(e.details_json)}};
}

nlohmann::json DashboardState(pqxx::connection_base& conn, int runs, int events) {
  nlohmann::json state = {{"jobs", nlohmann::json::array()},
                          {"runs", nlohmann::json::array()},
                          {"events", nlohmann::json::array()}};
  for (const auto& j : db::ListJobs(conn)) state["jobs"].push_back(JobJson(j));
  for (const auto& r : db::ListRuns(conn, "", runs)) state["runs"].push_back(RunJson(r));
  db::EventFilter filter;
  filter.limit = events;
  for (const auto& e : db::ListEvents(conn, filter)) state["events"].push_back(EventJson(e));
  pqxx::read_transaction tx(conn);
  state["read_at"] = tx.exec1("SELECT now()::text")[0].as<std::string>();
  return state;
}

}  // namespace coexist::dashboard

// Rank reports and their merge (rank_results.hpp, docs/node.md).
#include "core/node/rank_results.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/util/error.hpp"
#include "core/io/json_text.hpp"
#include "core/report/report.hpp"
#include "core/util/text_util.hpp"

namespace gs {

std::string encode_rank_report(const RankReport& r) {
  nlohmann::json j;
  j["schema"] = "gemmscope-rank/1";
  j["rank"] = r.rank;
  j["host"] = r.host;
  j["local_rank"] = r.local_rank;
  j["device"] = r.device;
  j["status"] = r.status;
  j["error"] = r.error;
  j["output"] = r.output;
  if (r.run) j["run"] = *r.run;
  return json_text(j);  // a host name or an error may not be UTF-8
}

RankReport decode_rank_report(const std::string& text, int expected_rank) {
  const std::string where = fmt::format("rank {}'s report", expected_rank);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("schema", nlohmann::json()).dump() != "\"gemmscope-rank/1\"")
    throw UsageError(where + " is not a gemmscope rank report");
  auto need_int = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_integer()) throw UsageError(fmt::format("{} needs an integer \"{}\"", where, key));
    return j[key].get<int>();
  };
  auto need_str = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) throw UsageError(fmt::format("{} needs a string \"{}\"", where, key));
    return j[key].get<std::string>();
  };
  RankReport r;
  r.rank = need_int("rank");
  if (r.rank != expected_rank) throw UsageError(fmt::format("{} says it is rank {}", where, r.rank));
  r.host = clip_text(printable(need_str("host")), 200);
  r.local_rank = need_int("local_rank");
  r.device = need_int("device");
  r.status = need_int("status");
  r.error = clip_text(printable(need_str("error")), 1000);
  r.output = need_str("output");
  if (j.contains("run")) r.run = j["run"];
  return r;
}

MergedRanks merge_rank_reports(const std::vector<RankReport>& reports) {
  if (reports.empty()) throw UsageError("MPI: no rank reported");
  MergedRanks m;
  for (size_t i = 0; i < reports.size(); ++i) {
    const RankReport& r = reports[i];
    if (r.rank != static_cast<int>(i))
      throw UsageError(fmt::format("MPI: the reports are not ranks 0..{} in order (found rank {} at {})",
                                   reports.size() - 1, r.rank, i));
    if (std::find(m.hosts.begin(), m.hosts.end(), r.host) == m.hosts.end()) m.hosts.push_back(r.host);
    m.worst_status = std::max(m.worst_status, r.status);
    if (r.status != 0) {
      m.failures.push_back(fmt::format("rank {} on {}: exit {}: {}", r.rank, r.host, r.status,
                                       r.error.empty() ? "(no message)" : r.error));
      continue;
    }
    if (!r.run) continue;
    try {
      RunResult run = from_json(*r.run, fmt::format("rank {}'s result", r.rank));
      const std::string name = run.device ? run.device->name : "?";
      m.runs.push_back({fmt::format("rank {}: GPU {} ({}) on {}", r.rank, r.device, name, r.host), std::move(run), r.host, r.rank});
      m.run_ranks.push_back(r.rank);
      m.run_hosts.push_back(r.host);
    } catch (const UsageError& e) {
      m.failures.push_back(fmt::format("rank {} on {}: its result cannot be read: {}", r.rank, r.host, e.what()));
      m.worst_status = std::max(m.worst_status, 70);
    }
  }
  return m;
}

void annotate_fleet_json(nlohmann::json& fleet, const MergedRanks& m, const std::string& library, int ranks) {
  fleet["launcher"] = {{"kind", "mpi"}, {"library", library}, {"ranks", ranks}, {"hosts", m.hosts}};
}

}  // namespace gs

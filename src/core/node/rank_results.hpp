// Several processes under a launcher (MPI): what each rank sends to rank 0 after its run, and the
// merge of those reports into one fleet (core/node/fleet.hpp) naming each rank's host and GPU
// (docs/node.md). Pure data: the transport is core/node/process_group.hpp.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/node/fleet.hpp"

namespace gs {

struct RankReport {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  int device = -1;          // the GPU it measured (--device)
  int status = 0;           // its run's exit status (0 ok, 2 bad input, 70 internal error)
  std::string error;        // one line when status != 0
  std::string output;       // what the run printed (rank 0's report is printed as it is)
  std::optional<nlohmann::json> run;  // its result JSON, when it wrote one
};

// One JSON line; decode_rank_report reads it back (UsageError on anything malformed or on a rank
// other than `expected_rank`).
std::string encode_rank_report(const RankReport& r);
RankReport decode_rank_report(const std::string& text, int expected_rank);

struct MergedRanks {
  std::vector<FleetRun> runs;        // "rank 1: GPU 1 (NVIDIA H100 80GB HBM3) on host-b", rank order
  std::vector<int> run_ranks;        // the rank of each run
  std::vector<std::string> run_hosts;  // the host of each run
  std::vector<std::string> hosts;    // distinct hosts, in rank order
  std::vector<std::string> failures; // "rank 1 on host-b: exit 2: ..."
  int worst_status = 0;              // the largest exit status of any rank
};

// Ranks must be 0..n-1 in order (UsageError otherwise). A rank that failed, or whose result JSON
// cannot be read, becomes a failure; a rank without a result (e.g. --comm-only) is neither.
MergedRanks merge_rank_reports(const std::vector<RankReport>& reports);

// Adds "launcher": {"kind": "mpi", "library", "ranks", "hosts"} to a fleet document built from `m`
// (fleet_to_json, whose "ranks" name each run's rank and host).
void annotate_fleet_json(nlohmann::json& fleet, const MergedRanks& m, const std::string& library, int ranks);

}  // namespace gs

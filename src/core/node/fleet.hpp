// Fleet mode: the same plan measured on every GPU of a node at once, one worker process per GPU
// (docs/node.md). This file holds the pure part: each GPU's per-layer totals and clock state, the
// spread across GPUs, the GPUs slower than the median by more than a threshold with their
// evidence, and the fleet's JSON. Starting the workers is the front end's (src/cli/cmd_fleet.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/results/results.hpp"

namespace gs {

// One GPU's run: `label` names the GPU ("GPU 1 (NVIDIA H100 80GB HBM3) on host-a"); under a
// launcher (MPI) also its host and rank.
struct FleetRun {
  std::string label;
  RunResult run;
  std::string host;
  int rank = -1;
};

// The runs of a fleet as one result document's run: the first run's plan and settings, one
// RunResult::ranks entry per run (label, host, rank, device, step context, notes, creation time)
// and every run's records keyed by its position as rank. UsageError when the runs differ in what
// the document holds once (plan, modes, precisions, providers, accuracy pass, settings).
RunResult merge_ranks(const std::vector<FleetRun>& runs);
// The inverse: each rank of `r` as a run of its own (its records keyed by rank 0). A run without
// ranks is one run, labelled "".
std::vector<FleetRun> split_ranks(RunResult r);

struct FleetGpuSummary {
  std::string label;
  // Per precision of the runs: the per-layer total of the first mode (a dense layer; a MoE layer's
  // in models whose layers all have experts); nullopt where a cell is N/A.
  std::vector<std::optional<double>> layer_ms;
  std::optional<double> mean_sm_mhz;  // over the measured cells with a clock sample
  int max_sm_mhz = 0;
  std::optional<double> mean_temp_c;   // over the cells with a temperature sample
  std::optional<double> mean_power_w;  // over the cells with a power sample
  int clock_cells = 0, power_capped_cells = 0, thermal_cells = 0;
};

struct SlowGpu {
  size_t gpu;           // index into FleetSummary::gpus
  size_t precision;     // index into FleetSummary::precisions
  double over_median;   // 0.05 = 5% slower than the median GPU
  std::string evidence; // clocks and throttle reasons against the median GPU's
};

struct FleetSummary {
  std::vector<Precision> precisions;
  std::string mode;  // the mode the totals are of
  std::vector<FleetGpuSummary> gpus;
  std::vector<std::optional<double>> median_ms;  // per precision
  std::vector<std::optional<double>> spread;     // (slowest - fastest) / median, per precision
  double threshold = 0.03;
  std::vector<SlowGpu> slow;
};

// UsageError when fewer than one run, a run without measurements, or runs of different plans,
// precisions or modes. `threshold` > 0 (a fraction).
FleetSummary summarize_fleet(const std::vector<FleetRun>& runs, double threshold);

// The per-GPU table, the spread and the slow GPUs (each with its evidence), or "none".
std::string render_fleet_text(const FleetSummary& s);

// The result document of merge_ranks(runs) (schema gemmscope.result/3 with "ranks") plus "fleet":
// {"threshold", "mode", "gpus": [{"label", "layer_ms", "mean_sm_mhz", ...}], "slow": [...]}, the
// summary, written and not read.
nlohmann::json fleet_to_json(const std::vector<FleetRun>& runs, const FleetSummary& s);
// What `gemmscope plot` hands the chart script for a fleet file (a per-GPU chart): {"schema":
// "gemmscope-fleet-chart/1", "mode", "threshold", "precisions", "gpus": [{"label", "layer_ms": [per
// precision, null where N/A], "mean_sm_mhz", "mean_temp_c", "mean_power_w"}], "median_ms", "slow":
// [{"gpu", "precision", "over_median"}]}, indices into "gpus" and "precisions".
nlohmann::json fleet_chart_json(const FleetSummary& s);

// Whether `j` is a fleet document: a result with "ranks", or a file of the earlier fleet schema
// ("gemmscope-fleet/1": {"threshold", "gpus": [{"label", "run": <result JSON>}]}). fleet_from_json
// reads its runs back (UsageError on a bad one); fleet_threshold is the slow-GPU threshold it was
// written with (0.03 when it says none).
bool is_fleet_json(const nlohmann::json& j);
std::vector<FleetRun> fleet_from_json(const nlohmann::json& j, const std::string& name);
double fleet_threshold(const nlohmann::json& j);

}  // namespace gs

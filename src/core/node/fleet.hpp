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

// One GPU's run: `label` names the GPU ("GPU 1 (NVIDIA H100 80GB HBM3) on host-a").
struct FleetRun {
  std::string label;
  RunResult run;
};

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

// {"schema": "gemmscope-fleet/1", "threshold", "gpus": [{"label", "run": <result JSON>}], "summary"}.
nlohmann::json fleet_to_json(const std::vector<FleetRun>& runs, const FleetSummary& s);
// What `gemmscope plot` hands the chart script for a fleet file (a per-GPU chart): {"schema":
// "gemmscope-fleet-chart/1", "mode", "threshold", "precisions", "gpus": [{"label", "layer_ms": [per
// precision, null where N/A], "mean_sm_mhz", "mean_temp_c", "mean_power_w"}], "median_ms", "slow":
// [{"gpu", "precision", "over_median"}]}, indices into "gpus" and "precisions".
nlohmann::json fleet_chart_json(const FleetSummary& s);

// Whether `j` is a fleet document; fleet_from_json reads its runs back (UsageError on a bad one).
bool is_fleet_json(const nlohmann::json& j);
std::vector<FleetRun> fleet_from_json(const nlohmann::json& j, const std::string& name);

}  // namespace gs

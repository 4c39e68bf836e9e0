// The value of one record (core/results/records.hpp): a time with its spread, the clocks it ran
// at, the kernels it launched, a predicted band, the reason it is N/A, and any quantity of its own
// kind by name. Every measured, modelled or predicted quantity of a run is such a cell under a key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/results/kernels.hpp"

namespace gs {

struct Stats {
  double mean_ms = 0, median_ms = 0, min_ms = 0, max_ms = 0, stdev_ms = 0;
  int iters = 0;
};
// Summary statistics of per-iteration times. Throws std::invalid_argument on an empty sample.
Stats summarize(const std::vector<double>& samples_ms);

// GPU clock state sampled by the host halfway through a cell's timed loop (NVML). Absent when
// NVML is not available; one sample per cell, so it shows the state, not an average.
struct ClockSample {
  int sm_mhz = 0;         // SM clock at the sample
  int max_sm_mhz = 0;     // the device's maximum SM clock
  uint64_t reasons = 0;   // NVML clocks-event reasons (bitmask, nvml.h nvmlClocksEventReason*)
  std::optional<int> temp_c;      // GPU temperature (NVML), when it could be read
  std::optional<double> power_w;  // board power draw (NVML), when it could be read
  static constexpr uint64_t kPowerCap = 0x4 | 0x80;         // SW power cap, HW power brake
  static constexpr uint64_t kThermal = 0x8 | 0x20 | 0x40;   // HW slowdown, SW / HW thermal slowdown
  bool power_capped() const { return (reasons & kPowerCap) != 0; }
  bool thermal() const { return (reasons & kThermal) != 0; }
};

// gemmscope predict: the band of a predicted time (docs/predict.md), low_ms <= mean <= high_ms.
struct TimeBand {
  double low_ms = 0, high_ms = 0;
  bool contains(double ms) const { return ms >= low_ms && ms <= high_ms; }
};

// A quantity of a record beyond a cell's common fields, by name, as nvbench's summaries hold them:
// a prediction's kernel and overhead times and its basis, an accuracy record's relative error.
// Written and read generically (core/report/record_json.cpp); only presentation knows the names.
using Value = std::variant<double, bool, std::string>;
struct NamedValue {
  std::string name;
  Value value;
};

struct Cell {
  bool ok = false;
  std::string reason;  // why the cell is N/A
  Stats stats;
  std::optional<ClockSample> clock;  // measured cells, when the engine can read clocks
  // Grouped GEMMs: the time of one dense GEMM with the same total FLOPs (the padded rows summed
  // along the grouped dimension), measured beside it; grouping efficiency = dense / grouped.
  std::optional<double> dense_equiv_ms;
  // The launch gate opened by its timeout instead of after the whole loop was enqueued: part of
  // the loop ran at the host's launch rate (a flagged cell, never silently).
  bool gate_timed_out = false;
  CellKernels kernels;  // kernels one iteration launched, the GEMM's algorithm (core/results/kernels.hpp)
  // --repeats N (N > 1): each repeat's mean time (ms), in order; the stats are the pooled ones
  // (repeats.hpp). Empty for a single measurement.
  std::vector<double> repeat_ms;
  // A predicted cell (record source "predicted"): its band. nullopt for a measured cell.
  std::optional<TimeBand> band;
  // Quantities of the record's own kind (NamedValue), in the order they were set.
  std::vector<NamedValue> values;

  static Cell na(std::string why) { Cell c; c.reason = std::move(why); return c; }
  static Cell measured(const Stats& s) { Cell c; c.ok = true; c.stats = s; return c; }
  // The named value `name`, or nullptr; number(): the value when it is a number.
  const Value* value(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;
  // Sets (or replaces) the named value.
  void set(std::string_view name, Value v);
};

}  // namespace gs

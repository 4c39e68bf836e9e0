// What a run produced, independent of how it was measured: one cell per (mode, GEMM, precision),
// plus the device and timing settings. Reports, JSON, charts and comparisons read only this.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/results/kernels.hpp"
#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/util/text_util.hpp"
#include "core/recipes/recipe.hpp"
#include "core/plan/step_model.hpp"
#include "core/step/step_breakdown.hpp"

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
  // A predicted cell (gemmscope predict; JSON "predicted": true, low_ms / high_ms): its band.
  // nullopt for a measured cell.
  std::optional<TimeBand> band;
  static Cell na(std::string why) { Cell c; c.reason = std::move(why); return c; }
  static Cell measured(const Stats& s) { Cell c; c.ok = true; c.stats = s; return c; }
};

// Operand distributions for --accuracy (and the timing operands, which are always normal).
enum class Dist { Normal, Outliers };
const char* to_string(Dist d);
Dist dist_from_string(const std::string& s);

// Relative Frobenius error of a recipe's GEMM against an FP32 GEMM of the original BF16 inputs.
struct AccuracyCell {
  bool ok = false;
  std::string reason;
  double rel_error = 0;
  bool emulated = false;  // quantize -> dequantize -> higher-precision GEMM (no native kernel here)
  static AccuracyCell na(std::string why) { AccuracyCell c; c.reason = std::move(why); return c; }
};

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t memory_bytes = 0, l2_bytes = 0;
  int driver_version = 0, runtime_version = 0;  // CUDA's encoding: 13000 = 13.0
  int64_t cublaslt_version = 0;
  // NVFP4's FP32 -> E2M1 conversion on this device: true for the hardware instruction
  // (arch-specific Blackwell code), false for the software encoder; unset where NVFP4 cannot run.
  std::optional<bool> nvfp4_hw_conversion;
  int compute_capability() const { return cc_major * 10 + cc_minor; }
  ArchPolicy arch_policy() const { return ArchPolicy(compute_capability()); }
};

// --l2 (core/run/settings.cpp holds the names "warm" and "cold").
enum class L2State { Warm, Cold };
const char* to_string(L2State l);
const EnumNames<L2State>& l2_names();  // "warm", "cold" (the registry's choices)

struct TimingConfig {
  std::string method = "cuda-events";
  int warmup = 10;
  int iters = 100;
  double gpu_warmup_s = 5.0;
  int repeats = 1;  // --repeats: every cell measured this many times, interleaved GEMM-major
  // --l2: warm (operands stay in L2 from one iteration to the next) or cold (L2 flushed
  // between iterations, outside the timed samples).
  L2State l2 = L2State::Warm;
  bool l2_cold() const { return l2 == L2State::Cold; }
  // --step-other-ms: the non-GEMM kernel time of one layer's training step, run as memory-bound
  // work between timed iterations (core/run/step_context.hpp); 0 = GEMMs back to back.
  double step_other_ms = 0;
  double step_gap_ms_per_gflop = 0;  // derived from the plan (step_gap_ms_per_gflop())
  // --step-context: the framework whose step is modelled between timed iterations (core/plan/step_model.hpp);
  // te by default for model plans, none for --shapes/--sweep.
  StepContextKind step_context_kind = StepContextKind::None;
  // --power-hold: heavy GEMMs enqueued before each timed loop's gate, so a short loop starts from
  // the GPU's loaded power state instead of the boost an idle gap gives (cuda/timing/power_hold.hpp).
  // Off by default: against a PyTorch training step it read 2-6% slow (docs/measurement.md).
  bool power_hold = false;
  bool step_context() const { return step_other_ms > 0 || step_context_kind != StepContextKind::None; }
};

// The step context as the engine ran it (core/plan/step_model.hpp): per average layer.
struct StepContextInfo {
  StepContextKind kind = StepContextKind::None;
  double stream_gb_per_s = 0;  // the calibrated memory-bound stand-in kernel's rate on this GPU
  double efficiency = 0;       // fraction of it the framework's memory-bound kernels reach (modelled)
  // Memory-bound kernels per layer (modelled; --step-other-ms: the user's figure, split): other_ms
  // run as the activation-like stand-in, move_ms (MoE dispatch and combine) as the gather stand-in.
  double other_ms = 0;
  double move_ms = 0;
  double move_gb_per_s = 0;    // the calibrated gather stand-in's rate on this GPU
  double memory_ms() const { return other_ms + move_ms; }
  bool other_from_user = false;  // --step-other-ms (includes the FP8 casts of the user's step)
  double cast_ms = 0;          // FP8 casts per layer (modelled), in the context of FP8 cells in pre-quantized mode
  double attention_fwd_ms = 0, attention_bwd_ms = 0;  // per layer
  bool attention_measured = false;  // cuDNN's fused attention timed on this GPU; false: modelled
  std::string attention_source;     // how attention was measured or modelled, in words
  std::string attention_shape;      // describe(AttentionShape)
  double attention_ms() const { return attention_fwd_ms + attention_bwd_ms; }
};

struct RunResult {
  Plan plan;
  bool dry_run = false;            // plan only, no cells measured (--dry-run, or nothing could be measured)
  bool dry_run_requested = false;  // dry_run because --dry-run was given
  std::string why_not_measured;    // dry_run: why ("--dry-run", or why no GPU could be used)
  std::optional<DeviceInfo> device;
  TimingConfig timing;
  std::optional<uint64_t> seed;  // --seed of the random operands; nullopt: a file written before it was recorded
  RecipeOptions recipe_options;
  GemmOptions gemm_options;  // --algo, --num-sms, kernel tracing (core/results/kernels.hpp)
  std::vector<Mode> modes;
  std::vector<Precision> precisions;
  // cells[mode][gemm][precision], indices into modes / plan.gemms / precisions: the cells of
  // providers[0].
  std::vector<std::vector<std::vector<Cell>>> cells;
  // Kernel providers (core/providers/provider.hpp), in --provider order. provider_cells[i - 1] holds the
  // cells of providers[i] (i >= 1), shaped as `cells`. A file without "providers": cuBLASLt only.
  std::vector<std::string> providers{"cublaslt"};
  std::vector<std::vector<std::vector<std::vector<Cell>>>> provider_cells;
  std::vector<std::string> notes;
  std::optional<StepContextInfo> step_context;  // what ran between timed iterations (a step context)
  StepOptions step_options;                     // --recompute, --param-storage, ... (core/step/step_options.hpp)
  std::optional<StepResult> step;               // the whole step of a model plan (core/step/step_breakdown.hpp)
  std::string created;  // ISO 8601 UTC
  // --accuracy: accuracy[gemm][i] for accuracy_precisions[i] (may include precisions the GPU
  // cannot time, which are emulated).
  bool has_accuracy = false;
  Dist accuracy_dist = Dist::Normal;
  std::vector<Precision> accuracy_precisions;
  std::vector<std::vector<AccuracyCell>> accuracy;

  // A gemmscope predict document (timing.method "predicted"): its cells hold predicted times and
  // their bands (Cell::band), nothing measured.
  bool predicted() const { return timing.method == "predicted"; }
  // Sizes `cells` (and provider_cells, one grid per provider after the first) for modes x gemms x
  // precisions, all N/A "not run".
  void allocate_cells();
  const Cell& cell(size_t mode, size_t gemm, size_t prec) const { return cells.at(mode).at(gemm).at(prec); }
  // The cell of providers[provider]; provider 0 is cell().
  const Cell& provider_cell(size_t provider, size_t mode, size_t gemm, size_t prec) const {
    return provider == 0 ? cell(mode, gemm, prec) : provider_cells.at(provider - 1).at(mode).at(gemm).at(prec);
  }
  Cell& provider_cell(size_t provider, size_t mode, size_t gemm, size_t prec) {
    return provider == 0 ? cells.at(mode).at(gemm).at(prec) : provider_cells.at(provider - 1).at(mode).at(gemm).at(prec);
  }
};

// Sums of a model-mode run, per precision (index into RunResult::precisions); std::nullopt when
// any contributing cell is N/A.
struct PrecisionSums {
  // A dense layer (every layer's GEMMs + the dense MLP); in a dense model, every layer.
  std::optional<double> fprop, dgrad, wgrad, fprop_dgrad, total, model_once, full_model;
  // Models with experts: a MoE layer (every layer's GEMMs + router, routed and shared experts).
  std::optional<double> moe_fprop, moe_dgrad, moe_wgrad, moe_total;
  // Per layer, all three passes: attention projections, dense MLP, router, routed experts, shared
  // experts (nullopt where the plan has none or a cell is N/A).
  std::optional<double> attention, dense_mlp, router, routed_experts, shared_experts;
};
// The sums above for one precision from any per-GEMM value (nullopt: that GEMM is N/A): the
// measured report passes each cell's mean, predict its predicted, low and high times, so both sum
// the same scopes (dense layers, MoE layers, the LM head once). Empty for a shapes plan.
using CellValue = std::function<std::optional<double>(size_t gemm)>;
PrecisionSums sum_precision(const Plan& plan, const CellValue& value);

struct Speedup {
  Precision num, den;
  std::optional<double> value;  // den time / num time (how much faster `num` is)
  std::string name() const;     // "FP8Current vs BF16"
};
struct ModeSummary {
  std::vector<PrecisionSums> sums;  // per precision
  std::vector<Speedup> speedups;
  bool has_model_once = false;
};
ModeSummary summarize_mode(const RunResult& r, size_t mode);

// Speedups printed for a run: every precision vs BF16, then NVFP4 vs MXFP8 when both ran.
std::vector<std::pair<Precision, Precision>> speedup_pairs(const std::vector<Precision>& precs);

double tflops(const Gemm& g, double ms);

}  // namespace gs

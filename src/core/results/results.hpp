// What a run produced, independent of how it was measured: its settings and axes (device, timing,
// plan, modes, precisions, providers, ranks) and its records (core/results/records.hpp), one per
// measured, modelled or predicted quantity. Reports, JSON, charts and comparisons read only this,
// mostly through the grid views (cell, provider_cell) over the GEMM records.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/results/cell.hpp"
#include "core/results/kernels.hpp"
#include "core/results/parallel_run.hpp"
#include "core/results/records.hpp"
#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/util/text_util.hpp"
#include "core/recipes/recipe.hpp"
#include "core/plan/step_model.hpp"
#include "core/step/step_breakdown.hpp"

namespace gs {


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

// Largest --step-other-ms accepted (ms per layer): far above any real layer's non-GEMM time; the
// bound of every time of a step context read from a file.
constexpr double kMaxStepOtherMs = 1e4;

// The step context as the engine ran it (core/plan/step_model.hpp): per average layer. The
// engine's interface (Engine::step_context); a run holds it as records
// (core/results/step_context_records.hpp: step_context_view() rebuilds it).
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

// One process of a run with several (fleet mode, MPI): who it was and what it ran on. Its
// records are those with its index as key.rank, its step context among them.
struct RankInfo {
  std::string label;   // "GPU 1 (NVIDIA H100 80GB HBM3) on host-a"
  std::string host;    // empty where the run did not record it
  int rank = -1;       // the launcher's rank (MPI), -1 without one
  std::optional<DeviceInfo> device;
  std::string created;
  std::vector<std::string> notes;
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
  // Kernel providers (core/providers/provider.hpp), in --provider order: providers[0]'s cells are
  // the report's main columns. A file without "providers": cuBLASLt only.
  std::vector<std::string> providers{"cublaslt"};
  // The processes of a run with several (fleet mode, MPI): one entry per rank, records keyed by its
  // index. Empty: one process, rank 0, described by the fields above.
  std::vector<RankInfo> ranks;
  // The items of record kinds whose items the plan does not hold, by kind, in item order (GEMM
  // kinds and accuracy: plan.gemms).
  std::map<RecordKind, std::vector<std::string>> item_names;
  // Every measured, modelled or predicted quantity of the run (core/results/records.hpp).
  RecordTable records;
  std::vector<std::string> notes;
  // A file written before Wgrad took the weight's orientation timed its Wgrad cells as the
  // transposed product X^T.dY ([in, out]; the same FLOPs, other cuBLASLt kernels). The reader shows
  // those GEMMs in today's convention (dY^T.X, N x M x K) and sets this; the writer writes them back
  // as measured, and compare notes the difference.
  bool wgrad_transposed = false;
  // What ran between timed iterations (a step context) is records of kinds attention and step-work
  // (core/results/step_context_records.hpp).
  StepOptions step_options;                     // --recompute, --param-storage, ... (core/step/step_options.hpp)
  std::optional<StepResult> step;               // the whole step of a model plan (core/step/step_breakdown.hpp)
  // The parallel step of a layout, or a layout search: its section (the job, the layout); its
  // quantities are records of kinds parallel-step, collective and layout (core/results/parallel_run.hpp).
  std::optional<ParallelRun> parallel;
  std::string created;  // ISO 8601 UTC
  // --accuracy: records of kind accuracy, one per GEMM and accuracy_precisions[i] (which may
  // include precisions the GPU cannot time: those are emulated).
  bool has_accuracy = false;
  Dist accuracy_dist = Dist::Normal;
  std::vector<Precision> accuracy_precisions;

  // A gemmscope predict document (timing.method "predicted"): its cells hold predicted times and
  // their bands (Cell::band), nothing measured.
  bool predicted() const { return timing.method == "predicted"; }
  // The source of the GEMM records the grid views read: predicted in a predict document, else
  // measured.
  Source grid_source() const { return predicted() ? Source::Predicted : Source::Measured; }

  // ---- the GEMM grid, a view over the records ----
  // The key of the cell of GEMM `gemm` (plan.gemms) in modes[mode] and precisions[prec] of
  // providers[provider], rank `rank`, source grid_source().
  RecordKey gemm_key(size_t provider, size_t mode, size_t gemm, size_t prec, uint32_t rank = 0) const;
  // Adds every cell of the grid (each provider, mode, GEMM and precision) as N/A "not run"; a
  // record already there is kept. Call after setting the axes (and timing.method for a prediction).
  void allocate_cells();
  // Whether the grid holds cells (false for a run without modes, GEMMs or precisions, or before
  // allocate_cells).
  bool has_cells() const;
  // std::out_of_range when the grid has no such cell.
  const Cell& cell(size_t mode, size_t gemm, size_t prec) const { return records.at(gemm_key(0, mode, gemm, prec)); }
  Cell& cell(size_t mode, size_t gemm, size_t prec) { return records.at(gemm_key(0, mode, gemm, prec)); }
  // The cell of providers[provider]; provider 0 is cell().
  const Cell& provider_cell(size_t provider, size_t mode, size_t gemm, size_t prec) const {
    return records.at(gemm_key(provider, mode, gemm, prec));
  }
  Cell& provider_cell(size_t provider, size_t mode, size_t gemm, size_t prec) {
    return records.at(gemm_key(provider, mode, gemm, prec));
  }
  // Calls f(provider, mode, gemm, precision, cell) for every cell of the grid, provider-major.
  void for_each_cell(const std::function<void(size_t, size_t, size_t, size_t, const Cell&)>& f) const;

  // ---- --accuracy, a view over the accuracy records ----
  // The record of GEMM `gemm` and accuracy_precisions[i] (measured or emulated), or nullptr.
  const Record* accuracy_record(size_t gemm, size_t i) const;
  AccuracyCell accuracy_cell(size_t gemm, size_t i) const;  // N/A "not run" when there is none
  void set_accuracy(size_t gemm, size_t i, const AccuracyCell& c);
};

// Sums of a model-mode run, per precision (index into RunResult::precisions); std::nullopt when
// any contributing cell is N/A.
// Which sum answers which question: `full_model` is the model's (every layer's GEMMs + the LM
// head, one training step: the lead figure of every report); `average_layer` a layer's, experts
// included (the step estimate's); `total` and its passes a DENSE layer's only (in a MoE model, the
// layers without experts), `moe_total` a MoE layer's.
struct PrecisionSums {
  // A dense layer (every layer's GEMMs + the dense MLP); in a dense model, every layer.
  std::optional<double> fprop, dgrad, wgrad, fprop_dgrad, total;
  // Once per step (the LM head), and the full model: layers x their layer's sum + the LM head.
  std::optional<double> model_once, full_model;
  // The average layer, experts included: (dense layers x `total` + MoE layers x `moe_total`) / layers.
  std::optional<double> average_layer;
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
// The same with the plan's MoE layer count given (counting them walks every layer: a caller that
// sums several precisions counts once).
PrecisionSums sum_precision(const Plan& plan, const CellValue& value, int64_t moe_layers);

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

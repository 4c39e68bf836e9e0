#include "core/gpu/arch_policy.hpp"
#include "core/run/runner.hpp"

#include "core/results/clocks.hpp"
#include "core/providers/provider.hpp"
#include "core/results/repeats.hpp"
#include "core/results/step_context_records.hpp"
#include "core/run/step_run.hpp"
#include "core/util/text_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace gs {

std::string cuda_unavailable_reason(bool driver_library_loads, const std::string& runtime_error) {
  if (!driver_library_loads) return "no NVIDIA driver found (libcuda.so.1 cannot be loaded)";
  return fmt::format("no usable CUDA driver/device ({})", runtime_error);
}

std::string utc_now_iso8601() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

RunResult base_result(const RunRequest& req) {
  RunResult r;
  r.plan = req.plan;
  r.timing = req.options.timing;
  r.seed = req.options.seed;
  r.recipe_options = req.options.recipe;
  r.gemm_options = req.options.gemm;
  r.modes = req.modes;
  r.step_options = req.step;
  r.providers = req.providers.empty() ? std::vector<std::string>{"cublaslt"} : req.providers;
  r.created = utc_now_iso8601();
  if (req.plan.config) r.notes = req.plan.config->notes;  // what the plan leaves out of the model
  for (const Gemm& g : req.plan.gemms)
    if (g.op == Op::Router) {
      r.notes.push_back("Router: BF16 in every recipe (frameworks keep the router out of FP8); its cells in the other "
                        "precision columns are BF16 GEMMs");
      break;
    }
  return r;
}

void add_recipe_notes(RunResult& r) {
  auto has = [&](Precision p) { for (Precision x : r.precisions) if (x == p) return true; return false; };
  const RecipeOptions& o = r.recipe_options;
  if (has(Precision::FP8Delayed))
    r.notes.push_back(fmt::format(
        "FP8Delayed: scales from an amax history of {} (max); the history update runs inside the timed "
        "region (Transformer Engine runs it outside, once per step)", o.amax_history_len));
  if (has(Precision::FP8Current) || has(Precision::FP8Delayed))
    r.notes.push_back(fmt::format("FP8 per-tensor: {} format, {} accumulation",
                                  o.fp8_format == Fp8Format::Hybrid ? "hybrid (E4M3 activations/weights, E5M2 gradients)" : "E4M3",
                                  o.fp8_accum == Accumulation::Auto
                                      ? (r.plan.model_mode ? "fast on Fprop, split on Dgrad/Wgrad (TE defaults)"
                                                           : "fast (standalone shapes count as Fprop; TE uses fast "
                                                             "accumulation on Fprop, split on Dgrad/Wgrad)")
                                  : o.fp8_accum == Accumulation::Fast ? "fast" : "split"));
  if (std::find(r.modes.begin(), r.modes.end(), Mode::Training) != r.modes.end()) {
    r.notes.push_back(
        "training mode: each tensor is quantized once per step into its rowwise and transposed copy, the cost "
        "carried by its first GEMM (X and W: Fprop, dY: Dgrad; Wgrad runs on earlier copies); the per-layer sum is "
        "the step's cost as Transformer Engine quantizes. FP8 recipes write both copies in one fused pass (after the "
        "amax pass for current scaling)");
    if (has(Precision::FP8Current))
      r.notes.push_back(o.producer_amax
                            ? "training mode, FP8Current: norm outputs (QKV, MLP-up X), the activation output (MLP-down X) "
                              "and the activation gradient (MLP-up dY) are cast with the amax their producing kernel "
                              "computed (TE's fused norm/activation + amax; not timed here); every other tensor gets an "
                              "amax pass. --no-producer-amax times an amax pass for every tensor"
                            : "training mode, FP8Current: every tensor gets its own amax pass (--no-producer-amax)");
    if (has(Precision::MXFP8) || has(Precision::NVFP4))
      r.notes.push_back("training mode, MXFP8/NVFP4: the two copies are written by two separate passes (not fused)");
  }
  if (has(Precision::FP8Block) && o.fp8_block_via_mxfp8)
    r.notes.push_back("FP8Block: emulated on this GPU via MXFP8 (1x32 UE8M0 scales, the MXFP8 GEMM kernel), as "
                      "Transformer Engine does on sm_100; TE converts 1x128/128x128 power-of-two scales to that layout, "
                      "we quantize to 1x32 blocks directly, so the kernel is the same but numerics differ slightly. "
                      "Unverified on hardware");
  else if (has(Precision::FP8Block))
    r.notes.push_back(fmt::format("FP8Block: 1x128 activations/gradients, 128x128 weights; Wgrad is 1x128 x 1x128 "
                                  "(sm_90 cuBLASLt has no 2D x 2D); split accumulation; {}; {} scales{}",
                                  o.block_fp8_format == Fp8Format::E4M3 ? "E4M3 for every operand"
                                                                        : "E4M3 activations/weights, E5M2 gradients",
                                  o.fp8_block_pow2_scales ? "power-of-two" : "FP32",
                                  o.block_fp8_format == Fp8Format::E4M3 && o.fp8_block_pow2_scales
                                      ? " (Transformer Engine's Float8BlockScaling defaults)" : ""));
  if (has(Precision::NVFP4) && r.device && r.device->nvfp4_hw_conversion)
    r.notes.push_back(*r.device->nvfp4_hw_conversion
                          ? "NVFP4: FP32 -> E2M1 by the hardware conversion instruction (cvt.rn.satfinite.e2m1x2, "
                            "arch-specific sm_100a/sm_103a code), as Transformer Engine casts there; stochastic "
                            "rounding in software"
                          : "NVFP4: FP32 -> E2M1 by a software encoder (this device runs no arch-specific "
                            "sm_100a/sm_103a code; Transformer Engine uses the hardware conversion there), so the "
                            "cast may be slower than TE's");
  if (has(Precision::MXFP8))
    r.notes.push_back(o.block_fp8_format == Fp8Format::E4M3
                          ? "MXFP8: E4M3 for every operand (Transformer Engine's MXFP8BlockScaling default)"
                          : "MXFP8: E4M3 activations/weights, E5M2 gradients (--block-fp8-format hybrid)");
}

// Cells whose launch gate opened by its timeout (part of the loop ran at the host's launch rate):
// one note naming them, so such a time is never presented silently. Empty when there are none.
std::string gate_timeout_note(const RunResult& r) {
  std::vector<std::string> names;
  for (size_t m = 0; r.has_cells() && m < r.modes.size(); ++m)  // the main provider's cells
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        if (r.cell(m, g, p).ok && r.cell(m, g, p).gate_timed_out)
          names.push_back(fmt::format("{} {} {} {} {}", to_string(r.modes[m]), pass_label(r.plan.gemms[g].pass),
                                      r.plan.gemms[g].label(), r.plan.gemms[g].shape(), to_string(r.precisions[p])));
  if (names.empty()) return {};
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? "; " : "") + names[i];
  if (names.size() > 5) list += fmt::format("; and {} more", names.size() - 5);
  return fmt::format("WARNING: the launch gate opened by its timeout in {} cell(s) (part of their timed loop ran at "
                     "the host's launch rate, so their times may be too high): {}",
                     names.size(), list);
}

// What the grouped GEMMs of a run were measured as (RunResult note, text and JSON).
std::string grouped_note(int streams, bool fused) {
  return fmt::format(
      "grouped GEMMs (MoE experts): one cuBLASLt GEMM per expert, {}, as Transformer Engine's GroupedLinear runs "
      "on Hopper with cuBLAS 13.1; each expert padded to the recipe's alignment; {}; the loop runs behind the "
      "launch gate in chunks (GPU time); dense-equivalent time = one GEMM of the summed padded size, same recipe "
      "and mode (--grouped {})",
      streams == 0 ? "serially on one stream" : fmt::format("dealt round-robin over {} streams", streams),
      fused ? "FP8 expert operands quantized for all experts at once (per operand: an amax pass, one cast, the "
              "delayed-scaling update), as TE GroupedLinear does (--grouped-quant fused; MXFP8/NVFP4 per expert)"
            : "quantization runs per expert, an amax/cast launch per expert tensor (--grouped-quant per-expert)",
      streams == 0 ? std::string("serial") : fmt::format("streams:{}", streams));
}

void add_grouped_note(RunResult& r, int streams) {
  // The note describes cuBLASLt's grouped path: a run without that provider has none of its cells.
  if (std::find(r.providers.begin(), r.providers.end(), kProviderCublasLt) == r.providers.end()) return;
  for (const Gemm& g : r.plan.gemms)
    if (g.grouped()) {
      r.notes.push_back(grouped_note(streams, r.recipe_options.grouped_quant_fused));
      return;
    }
}

// Measured runs with MoE layers: one note per mode and low-precision recipe whose MoE layer is not
// faster than BF16's, saying why from the traffic model (labelled as such): the quantization bytes of
// the expert GEMMs (the expert weights' share of them: every weight is cast once per step), the
// rows per expert, and the Wgrad output traffic every precision pays. Empty when FP8 wins.
std::vector<std::string> moe_fp8_notes(const RunResult& r) {
  std::vector<std::string> out;
  if (!r.plan.has_moe() || r.precisions.empty() || r.precisions[0] != Precision::BF16) return out;
  for (size_t m = 0; m < r.modes.size(); ++m) {
    const ModeSummary s = summarize_mode(r, m);
    const std::optional<double> bf16 = s.sums[0].moe_total;
    if (!bf16) continue;
    for (size_t p = 1; p < r.precisions.size(); ++p) {
      const std::optional<double> t = s.sums[p].moe_total;
      if (!t || *t < *bf16) continue;
      // The expert GEMMs' modelled traffic in this mode: quantization (weights apart) and output.
      double quant = 0, weights = 0, wgrad_out = 0, flops = 0;
      int64_t rows = 0, experts = 0;
      for (const Gemm& g : r.plan.gemms) {
        if (!g.grouped()) continue;
        const Recipe rec = make_recipe(r.precisions[p], g, r.recipe_options);
        const OperandWork a = operand_work(r.modes[m], g, Side::Left, rec, r.recipe_options);
        const OperandWork b = operand_work(r.modes[m], g, Side::Right, rec, r.recipe_options);
        quant += byte_count(rec, g, a, b).quantize;
        if (g.b.role == Role::Weight) weights += byte_count(rec, g, OperandWork(QuantWork::None), b).quantize;
        flops += g.flops();
        if (g.pass == Pass::Wgrad) wgrad_out += output_bytes(rec, g);
        if (g.pass == Pass::Fprop && g.op == Op::ExpertUp) {
          rows = g.m;
          experts = static_cast<int64_t>(g.group.size());
        }
      }
      out.push_back(fmt::format(
          "{} mode, {}: the MoE layer is not faster than BF16 ({:.3f} vs {:.3f} ms). Traffic model of its expert "
          "GEMMs (an estimate, not a measurement): {:.2f} GB of quantization per layer, {:.2f} GB of it expert "
          "weights (each cast once per step), against {:.2f} TFLOP; {} rows over {} experts ({:.0f} per expert) "
          "leave little math per quantized byte. {}More rows per expert (expert parallelism, a larger "
          "micro-batch) or weights cast once per several micro-batches change the answer",
          to_string(r.modes[m]), to_string(r.precisions[p]), *t, *bf16, quant / 1e9, weights / 1e9, flops / 1e12,
          format_thousands(rows), experts, experts ? static_cast<double>(rows) / static_cast<double>(experts) : 0.0,
          r.recipe_options.wgrad_fp32_accumulate
              ? fmt::format("Every precision's expert Wgrad also reads and writes FP32 main gradients ({:.2f} GB "
                            "per layer). ",
                            wgrad_out / 1e9)
              : std::string()));
    }
  }
  return out;
}

}  // namespace

RunResult plan_only(const RunRequest& req) {
  RunResult r = base_result(req);
  r.dry_run = true;
  r.precisions = req.precisions;
  r.allocate_cells();
  add_grouped_note(r, req.options.grouped_streams);
  r.step = plan_step(r);
  return r;
}

RunResult run(Engine& engine, const RunRequest& req, const ProgressFn& progress) {
  RunResult r = base_result(req);
  r.device = engine.device_info();
  const ArchPolicy arch = r.device->arch_policy();
  r.recipe_options.fp8_block_via_mxfp8 = arch.fp8_block_via_mxfp8();  // what the engine does on this device
  for (Precision p : req.precisions) {
    if (!arch.times(p)) {
      r.notes.push_back(fmt::format("{}: skipped, {}", to_string(p), arch.why_not(p)));
      continue;
    }
    r.precisions.push_back(p);
  }
  add_recipe_notes(r);
  if (req.accuracy_only) r.modes.clear();
  r.allocate_cells();
  const size_t n_acc = req.accuracy || req.accuracy_only ? r.plan.gemms.size() * req.precisions.size() : 0;
  const size_t reps = static_cast<size_t>(std::max(1, req.options.timing.repeats));
  const size_t n_prov = r.providers.size();
  const size_t total = reps * n_prov * r.modes.size() * r.plan.gemms.size() * r.precisions.size() + n_acc;
  size_t done = 0;
  if (n_acc) {
    r.has_accuracy = true;
    r.accuracy_dist = req.dist;
    r.accuracy_precisions = req.precisions;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < req.precisions.size(); ++p) {
        const Gemm& x = r.plan.gemms[g];
        if (progress)
          progress(done, total, fmt::format("accuracy {} {} {} {}", pass_label(x.pass), x.label(), x.shape(),
                                            to_string(req.precisions[p])));
        r.set_accuracy(g, p, engine.accuracy(x, req.precisions[p], req.dist));
        ++done;
      }
    for (Precision p : req.precisions)
      if (!arch.times(p))
        r.notes.push_back(fmt::format("{} accuracy is emulated on this GPU (quantize, dequantize, BF16 GEMM with FP32 "
                                      "accumulation); its timing needs compute capability >= {}",
                                      to_string(p), ArchPolicy(ArchPolicy::min_cc(p)).cc_text()));
  }
  if (r.modes.empty()) {
    if (progress) progress(total, total, "done");
    return r;
  }
  if (req.options.timing.gpu_warmup_s > 0) {
    if (progress) progress(0, total, fmt::format("GPU warm-up ({:.1f} s)", req.options.timing.gpu_warmup_s));
    engine.gpu_warmup(req.options.timing.gpu_warmup_s);
  }
  // GEMM-major: every mode and precision of one GEMM is measured back to back, so the ratios a
  // report prints (speedups, quantization overhead) come from measurements minutes apart at most,
  // not from passes over the whole plan with clock and temperature drift in between; the
  // operands of a GEMM are also generated once instead of once per mode.
  // Repeats (--repeats) are interleaved the same way: for each GEMM, repeat 1 of every precision and
  // mode, then repeat 2, ...
  std::vector<Cell> rep_cells;  // the repeats of the current cell
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    // [repeat][provider][precision][mode] of this GEMM: every provider of a cell back to back, so
    // their times are minutes apart at most.
    using Grid = std::vector<std::vector<std::vector<Cell>>>;
    std::vector<Grid> by_rep(reps, Grid(n_prov, std::vector<std::vector<Cell>>(r.precisions.size(),
                                                                                 std::vector<Cell>(r.modes.size()))));
    for (size_t k = 0; k < reps; ++k)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        for (size_t m = 0; m < r.modes.size(); ++m)
          for (size_t v = 0; v < n_prov; ++v) {
            const Gemm& x = r.plan.gemms[g];
            if (progress)
              progress(done, total, fmt::format("{} {} {} {} {}{}{}", to_string(r.modes[m]), pass_label(x.pass), x.label(),
                                                x.shape(), to_string(r.precisions[p]),
                                                n_prov > 1 ? " " + r.providers[v] : std::string(),
                                                reps > 1 ? fmt::format(" (repeat {}/{})", k + 1, reps) : std::string()));
            Cell c = engine.measure(x, r.precisions[p], r.modes[m], r.providers[v]);
            if (c.kernels.provider.empty()) c.kernels.provider = r.providers[v];
            by_rep[k][v][p][m] = std::move(c);
            ++done;
          }
    for (size_t v = 0; v < n_prov; ++v)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        for (size_t m = 0; m < r.modes.size(); ++m) {
          rep_cells.clear();
          for (size_t k = 0; k < reps; ++k) rep_cells.push_back(std::move(by_rep[k][v][p][m]));
          r.provider_cell(v, m, g, p) = reps > 1 ? pool_repeats(rep_cells) : std::move(rep_cells[0]);
        }
  }
  if (const std::optional<StepContextInfo> c = engine.step_context()) set_step_context_records(r, *c);
  else clear_step_context_records(r);
  r.step = measure_step(engine, r);  // the whole step of a model plan (core/run/step_run.hpp)
  for (std::string& w : clock_warnings(r)) r.notes.push_back(std::move(w));
  if (std::string n = gate_timeout_note(r); !n.empty()) r.notes.push_back(std::move(n));
  add_grouped_note(r, req.options.grouped_streams);
  for (const std::string& pv : r.providers)
    if (std::string n = provider_note(pv); !n.empty()) r.notes.push_back(std::move(n));
  for (std::string& n : engine.provider_notes()) r.notes.push_back(std::move(n));
  for (std::string& n : moe_fp8_notes(r)) r.notes.push_back(std::move(n));
  finish_kernel_records(r);
  if (progress) progress(total, total, "done");
  return r;
}

}  // namespace gs

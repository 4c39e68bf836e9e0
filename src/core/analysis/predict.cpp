#include "core/analysis/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "core/util/error.hpp"
#include "core/report/report.hpp"
#include "core/analysis/roofline.hpp"

namespace gs {

using nlohmann::json;

double wave_efficiency(const Gemm& g, int sms) {
  if (sms <= 0) return 1.0;
  const auto tiles_of = [](int64_t m, int64_t n) {
    return ((m + PredictConstants::kTileM - 1) / PredictConstants::kTileM) *
           ((n + PredictConstants::kTileN - 1) / PredictConstants::kTileN);
  };
  int64_t tiles = 0;
  if (g.group_dim == GroupDim::M && !g.group.empty()) {
    for (int64_t rows : g.group) tiles += rows > 0 ? tiles_of(rows, g.n) : 0;
  } else if (g.group_dim == GroupDim::K && !g.group.empty()) {
    tiles = tiles_of(g.m, g.n) * static_cast<int64_t>(g.group.size());  // one output per expert
  } else {
    tiles = tiles_of(g.m, g.n);
  }
  if (tiles <= 0) return 1.0;
  const int64_t waves = (tiles + sms - 1) / sms;
  return static_cast<double>(tiles) / static_cast<double>(waves * sms);
}

namespace {

// Relative uncertainty, low and high side.
struct Band {
  double lo = 0, hi = 0;
};
// The band of `ms` = kernel + overhead, each term with its relative band. An overhead can be
// negative (a mode measured faster than its pre-quantized GEMM): its high side then lowers the time.
std::pair<double, double> band_ms(double kernel, const Band& kb, double overhead, const Band& ob) {
  const auto lo_hi = [](double t, const Band& b) {
    const double x = t * (1 - b.lo), y = t * (1 + b.hi);
    return std::pair{std::min(x, y), std::max(x, y)};
  };
  const auto [k0, k1] = lo_hi(kernel, kb);
  const auto [o0, o1] = lo_hi(overhead, ob);
  return {k0 + o0, k1 + o1};
}

Band quad(std::initializer_list<Band> parts) {
  double lo = 0, hi = 0;
  for (const Band& b : parts) {
    lo += b.lo * b.lo;
    hi += b.hi * b.hi;
  }
  return {std::min(0.95, std::sqrt(lo)), std::sqrt(hi)};
}

// Band terms (docs/predict.md, "Error band").
constexpr Band kSameArch{0.06, 0.06};       // same tensor cores; clocks under a different power/thermal budget
constexpr Band kSameArchTdp{0.12, 0.12};    // same architecture, other TDP per peak (or unknown TDP)
constexpr Band kOtherArch{0.20, 0.20};      // other tensor-core generation and cuBLASLt kernels
constexpr Band kPerTensorSwap{0.05, 0.05};  // FP8 delayed <-> current: the same pre-quantized kernel
constexpr Band kBlockFromTensor{0.05, 0.30};
constexpr Band kMxFromFp8{0.10, 0.25};      // MXFP8 from FP8 per-tensor: scale handling in the kernel
constexpr Band kFp4FromFp8{0.10, 0.80};     // NVFP4 from an FP8 efficiency: FP4 kernels rarely keep it at 2-3x the peak
constexpr Band kOverheadScaled{0.25, 0.25}; // measured overhead scaled by bytes and bandwidth
constexpr Band kOverheadOtherFormat{0.30, 2.0};  // quantization of a format the run did not time (RHT, SR, 2 passes)
constexpr Band kOverheadFromBytes{0.50, 1.0};    // no pre-quantized mode: overhead from bytes alone
constexpr Band kDatasheetKernel{0.25, 0.60};
constexpr Band kDatasheetOverhead{0.50, 2.0};

// The precisions whose measured efficiency stands in for `p`, nearest first.
std::vector<Precision> candidates(Precision p) {
  switch (p) {
    case Precision::BF16: return {Precision::BF16};
    case Precision::FP8Current: return {Precision::FP8Current, Precision::FP8Delayed};
    case Precision::FP8Delayed: return {Precision::FP8Delayed, Precision::FP8Current};
    case Precision::FP8Block: return {Precision::FP8Block, Precision::MXFP8, Precision::FP8Current, Precision::FP8Delayed};
    case Precision::MXFP8: return {Precision::MXFP8, Precision::FP8Current, Precision::FP8Delayed};
    case Precision::NVFP4: return {Precision::NVFP4, Precision::MXFP8, Precision::FP8Current, Precision::FP8Delayed};
  }
  return {p};
}

Band borrow_band(Precision p, Precision from) {
  if (p == from) return {};
  if (p == Precision::NVFP4) return kFp4FromFp8;
  if (p == Precision::MXFP8) return kMxFromFp8;
  if (p == Precision::FP8Block) return from == Precision::MXFP8 ? kMxFromFp8 : kBlockFromTensor;
  return kPerTensorSwap;
}

bool borrowed_precision(Precision p, Precision from) { return p != from; }

double peak_flops(const GpuSpec& s, Precision p) {
  return s.peak(s.arch_policy().peak_format(p))->value * 1e12;
}
double bandwidth(const GpuSpec& s) { return s.bandwidth_gbs->value * 1e9; }
int sms(const GpuSpec& s) { return s.sm_count ? static_cast<int>(s.sm_count->value) : 0; }

RecipeOptions options_for(RecipeOptions o, const GpuSpec& s) {
  o.fp8_block_via_mxfp8 = s.arch_policy().fp8_block_via_mxfp8();
  return o;
}

ByteCount bytes(Precision p, const Gemm& g, Mode m, const RecipeOptions& o) {
  const Recipe r = make_recipe(p, g, o);
  return byte_count(r, g, operand_work(m, g, Side::Left, r, o), operand_work(m, g, Side::Right, r, o));
}

std::optional<size_t> index_of(const std::vector<Mode>& v, Mode m) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == m) return i;
  return std::nullopt;
}
std::optional<size_t> index_of(const std::vector<Precision>& v, Precision p) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == p) return i;
  return std::nullopt;
}

std::string tdp_note(const GpuSpec& s) { return s.tdp_w ? fmt::format("{:.0f} W", s.tdp_w->value) : "unknown TDP"; }

// Same tensor cores but another power budget per unit of peak: clocks under load may differ more.
bool tdp_differs(const GpuSpec& a, const GpuSpec& b) {
  if (!a.tdp_w || !b.tdp_w || !a.peak(PeakFormat::BF16) || !b.peak(PeakFormat::BF16)) return true;
  const double ra = a.tdp_w->value / a.peak(PeakFormat::BF16)->value, rb = b.tdp_w->value / b.peak(PeakFormat::BF16)->value;
  return std::abs(ra / rb - 1) > 0.10;
}

// A prediction that is not a finite positive time (extreme datasheet values) is N/A, never a
// cell that prints inf or nan and that gemmscope's own reader then refuses.
void check_finite(PredictedCell& c) {
  if (!c.ok) return;
  const auto good = [](double v) { return std::isfinite(v) && v >= 1e-9 && v <= 1e9; };  // the reader's range
  if (good(c.ms) && good(c.low_ms) && good(c.high_ms) && std::isfinite(c.kernel_ms) && std::isfinite(c.overhead_ms)) return;
  c = PredictedCell{};
  c.reason = "no finite prediction (the GPU spec's peaks or bandwidth are out of range)";
}

Cell as_cell(const PredictedCell& c) {
  if (!c.ok) return Cell::na(c.reason);
  Stats s;
  s.mean_ms = s.median_ms = c.ms;
  s.min_ms = c.low_ms;
  s.max_ms = c.high_ms;
  s.iters = 0;
  Cell cell = Cell::measured(s);
  cell.band = TimeBand{c.low_ms, c.high_ms};
  return cell;
}

Prediction start(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o, const GpuSpec& target) {
  Prediction pr;
  RunResult& r = pr.result;
  r.plan = plan;
  r.modes = modes;
  r.precisions.assign(std::begin(kAllPrecisions), std::end(kAllPrecisions));
  r.recipe_options = options_for(o, target);
  DeviceInfo d;
  d.name = fmt::format("{} (predicted)", target.name);
  d.cc_major = target.cc_major;
  d.cc_minor = target.cc_minor;
  d.sm_count = sms(target);
  d.memory_bytes = target.memory_bytes ? static_cast<int64_t>(target.memory_bytes->value) : 0;
  d.l2_bytes = target.l2_bytes ? static_cast<int64_t>(target.l2_bytes->value) : 0;
  r.device = d;
  r.timing.iters = 0;
  r.timing.warmup = 0;
  r.timing.gpu_warmup_s = 0;
  r.timing.method = "predicted";
  pr.target = target;
  pr.target_key = target.key;
  pr.target_name = target.name;
  pr.cells.assign(modes.size(), std::vector<std::vector<PredictedCell>>(plan.gemms.size(),
                                                                       std::vector<PredictedCell>(r.precisions.size())));
  return pr;
}

void finish(Prediction& pr) {
  RunResult& r = pr.result;
  r.allocate_cells();
  for (auto& per_mode : pr.cells)  // never an "ok" cell without a finite, positive time and band
    for (auto& per_gemm : per_mode)
      for (PredictedCell& c : per_gemm) check_finite(c);
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) r.cells[m][g][p] = as_cell(pr.cells[m][g][p]);
  r.notes = pr.assumptions;
}

// The run's time-weighted compute efficiency (fraction of peak incl. wave quantization) of
// precision `p` in the pre-quantized mode over its compute-bound GEMMs; used for the compute roof
// of GEMMs that were memory-bound on the source.
double compute_efficiency(const RunResult& run, size_t pq, size_t pi, const GpuSpec& src) {
  double c = 0, t = 0;
  const Precision p = run.precisions[pi];
  const RecipeOptions o = run.recipe_options;
  for (size_t g = 0; g < run.plan.gemms.size(); ++g) {
    const Cell& cell = run.cell(pq, g, pi);
    if (!cell.ok) continue;
    const Gemm& x = run.plan.gemms[g];
    const double comp = x.flops() / peak_flops(src, p) / wave_efficiency(x, sms(src));
    const double mem = bytes(p, x, Mode::PreQuantized, o).gemm / bandwidth(src);
    if (comp < mem) continue;
    c += comp;
    t += cell.stats.mean_ms * 1e-3;
  }
  return t > 0 ? c / t : PredictConstants::kComputePrior;
}

}  // namespace

Prediction predict_from_run(const RunResult& run, const std::string& run_name, const GpuSpec& source, const GpuSpec& target) {
  if (run.dry_run || run.modes.empty() || run.precisions.empty())
    throw UsageError(fmt::format("{} has no measurements to predict from ({})", run_name,
                                 run.dry_run ? "a dry run / plan only" : "no timed modes"));
  const RecipeOptions os = options_for(run.recipe_options, source), ot = options_for(run.recipe_options, target);
  Prediction pr = start(run.plan, run.modes, run.recipe_options, target);
  pr.source_key = source.key;
  pr.source_device = run.device ? run.device->name : source.name;
  const bool same_gpu = source.key == target.key;
  const bool same_arch = source.arch == target.arch;
  const Band gpu_band = same_gpu ? Band{} : !same_arch ? kOtherArch : tdp_differs(source, target) ? kSameArchTdp : kSameArch;
  const std::optional<size_t> pq = index_of(run.modes, Mode::PreQuantized);
  std::vector<std::string> borrowed_notes;

  for (size_t mi = 0; mi < run.modes.size(); ++mi) {
    const Mode mode = run.modes[mi];
    for (size_t g = 0; g < run.plan.gemms.size(); ++g) {
      const Gemm& x = run.plan.gemms[g];
      for (size_t pi = 0; pi < pr.result.precisions.size(); ++pi) {
        const Precision p = pr.result.precisions[pi];
        PredictedCell& out = pr.cells[mi][g][pi];
        if (std::string why = cannot_run(target, p); !why.empty()) {
          out.reason = why;
          continue;
        }
        // The nearest precision the run measured (in the kernel-only mode when there is one).
        std::optional<size_t> src;
        for (Precision c : candidates(p)) {
          const auto ci = index_of(run.precisions, c);
          if (!ci || !cannot_run(source, c).empty()) continue;
          const size_t km = pq ? *pq : mi;
          if (run.cell(km, g, *ci).ok && run.cell(mi, g, *ci).ok) {
            src = ci;
            break;
          }
        }
        if (!src) {
          out.reason = fmt::format("the run has no measured cell to derive {} from (needs one of:", to_string(p));
          for (Precision c : candidates(p)) out.reason += fmt::format(" {}", to_string(c));
          out.reason += ")";
          continue;
        }
        const Precision ps = run.precisions[*src];
        const Cell& mode_cell = run.cell(mi, g, *src);
        double cv = mode_cell.stats.mean_ms > 0 ? mode_cell.stats.stdev_ms / mode_cell.stats.mean_ms : 0;
        // Source kernel time and quantization overhead.
        double t_kernel = 0, ov_src = 0;
        bool overhead_measured = true;
        const double qb_src = bytes(ps, x, mode, os).quantize;
        if (pq) {
          const Cell& kc = run.cell(*pq, g, *src);
          t_kernel = kc.stats.mean_ms * 1e-3;
          cv = std::max(cv, kc.stats.mean_ms > 0 ? kc.stats.stdev_ms / kc.stats.mean_ms : 0);
          ov_src = mode_cell.stats.mean_ms * 1e-3 - t_kernel;  // signed: noise where nothing is quantized
        } else {
          overhead_measured = false;
          const double t = mode_cell.stats.mean_ms * 1e-3;
          ov_src = std::min(0.8 * t, qb_src / (PredictConstants::kMemEff * bandwidth(source)));
          t_kernel = t - ov_src;
        }
        // Kernel on the target, at the peak of the precision the GEMM really runs in (the router,
        // and the LM head under --lm-head-precision bf16, run BF16 in every column).
        const Precision ks = make_recipe(ps, x, os).precision, kt = make_recipe(p, x, ot).precision;
        const double comp_s = x.flops() / peak_flops(source, ks) / wave_efficiency(x, sms(source));
        const double mem_s = bytes(ps, x, Mode::PreQuantized, os).gemm / bandwidth(source);
        const double comp_t = x.flops() / peak_flops(target, kt) / wave_efficiency(x, sms(target));
        const double mem_t = bytes(p, x, Mode::PreQuantized, ot).gemm / bandwidth(target);
        double kernel_t = 0;
        if (comp_s >= mem_s) {
          const double eff = comp_s / t_kernel;
          kernel_t = std::max(comp_t / eff, mem_t / PredictConstants::kMemEff);
          out.basis = fmt::format("{} {:.1f}% of {} {} peak", to_string(ks), 100 * x.flops() / peak_flops(source, ks) / t_kernel,
                                  source.key, to_string(source.arch_policy().peak_format(ks)));
        } else {
          const double mem_eff = mem_s / t_kernel;
          const double ce = pq ? compute_efficiency(run, *pq, *src, source) : PredictConstants::kComputePrior;
          kernel_t = std::max(mem_t / mem_eff, comp_t / ce);
          out.basis = fmt::format("{} memory-bound on {}: {:.1f}% of its bandwidth", to_string(ps), source.key, 100 * mem_eff);
        }
        // Quantization overhead on the target.
        double ov_t = 0;
        if (mode != Mode::PreQuantized) {
          const double qb_t = bytes(p, x, mode, ot).quantize;
          // Signed: where the mode cell ran faster than the kernel-only cell (noise, clock drift),
          // the measured difference is carried as it is, not rounded up to zero.
          if (qb_src > 0) ov_t = ov_src * (qb_t / qb_src) * (bandwidth(source) / bandwidth(target));
          else if (qb_t > 0) ov_t = qb_t / (PredictConstants::kMemEff * bandwidth(target));
          else if (!borrowed_precision(kt, ks)) ov_t = ov_src;  // nothing quantized: the mode's own difference (noise)
          ov_t = std::max(ov_t, -0.5 * kernel_t);
        }
        // A GEMM that runs BF16 in both columns keeps its own (BF16) efficiency: nothing borrowed.
        const bool borrowed = borrowed_precision(kt, ks);
        const Band kb = quad({gpu_band, borrow_band(kt, ks), {cv, cv}});
        const Band ob = !overhead_measured ? kOverheadFromBytes
                        : (borrowed && ArchPolicy(100).peak_format(p) != ArchPolicy(100).peak_format(ps)) ? kOverheadOtherFormat
                        : same_gpu ? Band{cv, cv} : kOverheadScaled;
        out.ok = true;
        out.borrowed = borrowed;
        out.kernel_ms = kernel_t * 1e3;
        out.overhead_ms = ov_t * 1e3;
        out.ms = out.kernel_ms + out.overhead_ms;
        std::tie(out.low_ms, out.high_ms) = band_ms(out.kernel_ms, kb, out.overhead_ms, ob);
        if (borrowed) {
          const std::string n = fmt::format(
              "{} on {} is predicted with the {} efficiency measured on {} (the run has no {} cell for it): assumed "
              "to reach the same fraction of {}'s {} peak as {} reached of {}'s {} peak",
              to_string(p), target.key, to_string(ps), source.key, to_string(p), target.key,
              to_string(target.arch_policy().peak_format(p)), to_string(ps), source.key,
              to_string(source.arch_policy().peak_format(ps)));
          if (std::find(borrowed_notes.begin(), borrowed_notes.end(), n) == borrowed_notes.end()) borrowed_notes.push_back(n);
        }
      }
    }
  }
  auto& a = pr.assumptions;
  a.push_back(fmt::format("PREDICTED, not measured: {} ({}) from a run on {} ({}), {}; model and band: docs/predict.md",
                          target.name, target.key, pr.source_device, source.key, run_name));
  a.push_back(fmt::format("the target is assumed to run each GEMM at the same fraction of its datasheet dense peak as "
                          "the source did (both under their power limits: {} {} vs {} {}), after removing the source's "
                          "and applying the target's wave quantization ({}x{} output tiles over {} vs {} SMs)",
                          source.key, tdp_note(source), target.key, tdp_note(target), PredictConstants::kTileM,
                          PredictConstants::kTileN, sms(source) ? std::to_string(sms(source)) : "unknown",
                          sms(target) ? std::to_string(sms(target)) : "unknown"));
  if (pq)
    a.push_back(fmt::format("quantizing-mode overheads: the source's measured overhead (mode minus pre-quantized) times the "
                            "modelled quantization bytes (target recipe / source recipe) times the bandwidth ratio "
                            "{:.0f} / {:.0f} GB/s",
                            source.bandwidth_gbs->value, target.bandwidth_gbs->value));
  else
    a.push_back(fmt::format("the run has no pre-quantized mode: the source's quantization overhead is estimated from "
                            "the modelled bytes at {:.0f}% of its datasheet bandwidth (wider band)",
                            100 * PredictConstants::kMemEff));
  for (const std::string& n : borrowed_notes) a.push_back(n);
  if (target.arch_policy().times(Precision::MXFP8))
    a.push_back("MXFP8/NVFP4 quantization (two passes each, NVFP4's Hadamard transform and stochastic rounding) is "
                "modelled by its bytes only; where the run did not time it the band is wide on the slow side");
  if (same_gpu) a.push_back("source and target are the same GPU model: the band is the run's own timing spread");
  if (run.timing.step_context()) {
    // The source's clocks were a training step's (--step-other-ms): the efficiency carried over is
    // that of a step, and the prediction says so in its notes and JSON.
    pr.result.timing.step_other_ms = run.timing.step_other_ms;
    pr.result.timing.step_gap_ms_per_gflop = run.timing.step_gap_ms_per_gflop;
    pr.result.timing.step_context_kind = run.timing.step_context_kind;
    a.push_back(fmt::format("the source run timed its GEMMs in a training step's power context (--step-context {}{} "
                            "on {}): the efficiency carried to the target is a step's, not back to back",
                            to_string(run.timing.step_context_kind),
                            run.timing.step_other_ms > 0 ? fmt::format(", --step-other-ms {:g} ms per layer",
                                                                       run.timing.step_other_ms)
                                                         : std::string(),
                            source.key));
  }
  pr.result.created = run.created;
  pr.result.seed = run.seed;
  finish(pr);
  return pr;
}

Prediction predict_datasheet_only(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o,
                                  const GpuSpec& target) {
  Prediction pr = start(plan, modes, o, target);
  pr.datasheet_only = true;
  const RecipeOptions ot = options_for(o, target);
  for (size_t mi = 0; mi < modes.size(); ++mi)
    for (size_t g = 0; g < plan.gemms.size(); ++g)
      for (size_t pi = 0; pi < pr.result.precisions.size(); ++pi) {
        const Precision p = pr.result.precisions[pi];
        const Gemm& x = plan.gemms[g];
        PredictedCell& out = pr.cells[mi][g][pi];
        if (std::string why = cannot_run(target, p); !why.empty()) {
          out.reason = why;
          continue;
        }
        const Precision kt = make_recipe(p, x, ot).precision;  // BF16 for the router (and the LM head by default)
        const double comp = x.flops() / peak_flops(target, kt) / wave_efficiency(x, sms(target));
        const ByteCount bc = bytes(p, x, modes[mi], ot);
        const double kernel = std::max(comp / PredictConstants::kComputePrior, bc.gemm / bandwidth(target) / PredictConstants::kMemEff);
        const double ov = bc.quantize / (PredictConstants::kMemEff * bandwidth(target));
        out.ok = true;
        out.kernel_ms = kernel * 1e3;
        out.overhead_ms = ov * 1e3;
        out.ms = out.kernel_ms + out.overhead_ms;
        // The prior is a BF16/FP8 observation: block-scaled formats carry the same extra
        // uncertainty as when a run's FP8 efficiency is borrowed for them.
        const Band kb = quad({kDatasheetKernel, borrow_band(kt, kt == Precision::BF16 ? kt : Precision::FP8Current)});
        std::tie(out.low_ms, out.high_ms) = band_ms(out.kernel_ms, kb, out.overhead_ms, kDatasheetOverhead);
        out.basis = "datasheet only";
      }
  pr.assumptions.push_back(fmt::format(
      "PREDICTED from the datasheet only (no measured run): {} ({}); model and band: docs/predict.md", target.name, target.key));
  pr.assumptions.push_back(fmt::format(
      "every compute-bound GEMM is assumed to reach {:.0f}% of the dense datasheet peak (H100 BF16 measured 67-73% on "
      "the 5B GEMMs, README), streaming passes {:.0f}% of the datasheet bandwidth; band -{:.0f}%/+{:.0f}% on the kernel (wider for MXFP8/NVFP4), "
      "-{:.0f}%/+{:.0f}% on quantization",
      100 * PredictConstants::kComputePrior, 100 * PredictConstants::kMemEff, 100 * kDatasheetKernel.lo,
      100 * kDatasheetKernel.hi, 100 * kDatasheetOverhead.lo, 100 * kDatasheetOverhead.hi));
  finish(pr);
  return pr;
}

namespace {

// The sums of one mode and precision, predicted time and both ends of its band, over the same
// scopes as the measured report (sum_precision: dense layers, MoE layers, the LM head once). A
// shapes plan sums all of its GEMMs into `total` and `full_model`. Sums add the cells' bands
// (fully correlated).
struct PredSums {
  PrecisionSums ms, lo, hi;
};
PredSums pred_sums(const Prediction& pr, size_t m, size_t p) {
  const RunResult& r = pr.result;
  auto value = [&](double PredictedCell::*f) {
    return [&pr, m, p, f](size_t g) -> std::optional<double> {
      const PredictedCell& c = pr.cells[m][g][p];
      return c.ok ? std::optional<double>(c.*f) : std::nullopt;
    };
  };
  PredSums s;
  if (r.plan.model_mode) {
    s.ms = sum_precision(r.plan, value(&PredictedCell::ms));
    s.lo = sum_precision(r.plan, value(&PredictedCell::low_ms));
    s.hi = sum_precision(r.plan, value(&PredictedCell::high_ms));
    return s;
  }
  for (auto [out, f] : {std::pair{&s.ms, &PredictedCell::ms}, std::pair{&s.lo, &PredictedCell::low_ms},
                        std::pair{&s.hi, &PredictedCell::high_ms}}) {
    std::optional<double> t = 0.0;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      const PredictedCell& c = pr.cells[m][g][p];
      if (!c.ok) t.reset();
      if (t) *t += c.*f;
    }
    out->total = out->full_model = t;
  }
  return s;
}

using Field = std::optional<double> PrecisionSums::*;
std::string val(const PredSums& s, Field f) { return print::format_ms(s.ms.*f); }
// The full model's total, in longer times: one decimal.
std::string total_val(const PredSums& s, Field f) { return s.ms.*f ? fmt::format("{:.1f}", *(s.ms.*f)) : "N/A"; }
// "12.07-16.50"; whole milliseconds from 100 ms on, so that a full model's band fits its column.
std::string band(const PredSums& s, Field f) {
  if (!(s.lo.*f) || !(s.hi.*f)) return "N/A";
  const int digits = *(s.hi.*f) >= 100 ? 0 : 2;
  return fmt::format("{:.{}f}-{:.{}f}", *(s.lo.*f), digits, *(s.hi.*f), digits);
}
json band_json(const PredSums& s, Field f) {
  return s.ms.*f && s.lo.*f && s.hi.*f ? json{{"ms", *(s.ms.*f)}, {"low_ms", *(s.lo.*f)}, {"high_ms", *(s.hi.*f)}}
                                       : json(nullptr);
}

}  // namespace

void add_prediction(print::Document& d, const Prediction& pr) {
  const RunResult& r = pr.result;
  d.title(fmt::format("PREDICTED GEMM times on {} [{}]", pr.target_name, pr.target_key), 2);
  d.line(pr.datasheet_only ? "Basis: the target's datasheet only (no measured run): widest band"
                           : fmt::format("Basis: a measured run on {} [{}] and both datasheets; nothing measured on the target",
                                         pr.source_device, pr.source_key));
  d.line("Every number below is a prediction with its band (low-high), not a measurement.");
  if (r.plan.model_mode) {
    const ModelConfig& c = *r.plan.config;
    d.line(fmt::format("Model: {} (hidden={}, intermediate={}, {}, layers={}, M={})", c.name, c.hidden_size,
                       c.intermediate_size, heads_text(c, true), c.num_hidden_layers, c.tokens()));
  }
  std::vector<std::string> reasons;
  auto note = [&](const std::string& why) {
    auto it = std::find(reasons.begin(), reasons.end(), why);
    if (it == reasons.end()) {
      reasons.push_back(why);
      return reasons.size();
    }
    return static_cast<size_t>(it - reasons.begin()) + 1;
  };
  const bool moe = r.plan.has_moe();
  const int64_t n_moe = r.plan.moe_layers(), n_dense = r.plan.dense_layers();
  bool lm_head = false;
  for (const Gemm& g : r.plan.gemms) lm_head |= g.scope == Scope::Model;
  // Every table: a label 28 wide, then each precision 12 wide.
  const auto table = [&](const std::string& label) {
    std::vector<print::Column> cols = {{label, print::Align::Left, 28}};
    for (Precision p : r.precisions) cols.push_back({to_string(p), print::Align::Right, 12});
    return print::Table(std::move(cols), print::Table::Layout::Fixed);
  };
  for (size_t m = 0; m < r.modes.size(); ++m) {
    d.rule('=', print::kReportWidth);
    d.line(fmt::format("Mode: {} (predicted)", to_string(r.modes[m])));
    print::Table per_gemm = table("Predicted ms per GEMM");
    per_gemm.add_header();
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      const Gemm& x = r.plan.gemms[g];
      std::vector<print::Cell> row = {r.plan.model_mode ? fmt::format("{} {}", pass_label(x.pass), x.label()) : x.label()};
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const PredictedCell& c = pr.cells[m][g][p];
        row.emplace_back(c.ok ? fmt::format("{:.3f}{}", c.ms, c.borrowed ? "*" : "") : fmt::format("N/A[{}]", note(c.reason)));
      }
      per_gemm.add_row(std::move(row));
    }
    if (moe)
      per_gemm.add_note(fmt::format("MLP rows run in the {} dense layers only; Router, Expert and Shared rows in the {} MoE "
                                    "layers only; LM Head once per step; the others in every layer.",
                                    n_dense, n_moe));
    d.table(std::move(per_gemm));
    std::vector<PredSums> sums;
    for (size_t p = 0; p < r.precisions.size(); ++p) sums.push_back(pred_sums(pr, m, p));
    // The sums: groups of rows, each under its line (the table's header stays markdown's).
    std::optional<print::Table> group;
    const auto start = [&](const std::string& what) {
      if (group) d.table(std::move(*group));
      d.line(what);
      group = table("");
    };
    auto row = [&](const std::string& what, auto get) {
      std::vector<print::Cell> cells = {what};
      for (size_t p = 0; p < r.precisions.size(); ++p) cells.emplace_back(get(sums[p]));
      group->add_row(std::move(cells));
    };
    auto value_row = [&](const std::string& what, Field f) { row(what, [f](const PredSums& s) { return val(s, f); }); };
    auto band_row = [&](Field f) { row("  band (low-high)", [f](const PredSums& s) { return band(s, f); }); };
    if (!r.plan.model_mode) {
      start("Predicted per-layer GEMM time (ms) (sum of all GEMMs):");
      value_row("  Per-layer total", &PrecisionSums::total);
      band_row(&PrecisionSums::total);
    } else {
      d.line("Predicted per-layer GEMM time (ms):");
      if (!moe || n_dense > 0) {
        if (moe) start(fmt::format("Dense layer ({} of {}):", n_dense, r.plan.layers()));
        else group = table("");  // a dense model's layer rows follow the line above
        value_row("  Fprop", &PrecisionSums::fprop);
        value_row("  Dgrad", &PrecisionSums::dgrad);
        value_row("  Wgrad", &PrecisionSums::wgrad);
        value_row("  Per-layer total", &PrecisionSums::total);
        band_row(&PrecisionSums::total);
      }
      if (moe) {
        start(fmt::format("MoE layer ({} of {}):", n_moe, r.plan.layers()));
        value_row("  Fprop", &PrecisionSums::moe_fprop);
        value_row("  Dgrad", &PrecisionSums::moe_dgrad);
        value_row("  Wgrad", &PrecisionSums::moe_wgrad);
        value_row("  Per-layer total", &PrecisionSums::moe_total);
        band_row(&PrecisionSums::moe_total);
        start("Per layer, 3 passes:");
        value_row("  Attention projections", &PrecisionSums::attention);
        if (n_dense > 0) value_row("  Dense MLP", &PrecisionSums::dense_mlp);
        value_row("  Router (BF16)", &PrecisionSums::router);
        value_row("  Routed experts", &PrecisionSums::routed_experts);
        if (r.plan.config->moe.shared_experts > 0) value_row("  Shared experts", &PrecisionSums::shared_experts);
      }
      if (lm_head) {
        start("Once per step:");
        value_row("  LM Head (3 passes)", &PrecisionSums::model_once);
      }
      if (moe)
        start(fmt::format("Predicted full model ({} dense + {} MoE layers{}):", n_dense, n_moe, lm_head ? " + LM head" : ""));
      else
        start(fmt::format("Predicted full model ({} layers{}):", r.plan.layers(), lm_head ? " + LM head" : ""));
      row("  Total GEMM time (ms)", [](const PredSums& s) { return total_val(s, &PrecisionSums::full_model); });
      band_row(&PrecisionSums::full_model);
    }
    d.table(std::move(*group));
    const auto bf = index_of(r.precisions, Precision::BF16);
    const auto& bfs = bf ? sums[*bf].ms.full_model : std::optional<double>();
    if (bfs) {
      std::string sp = fmt::format("Predicted speedups vs BF16 ({}):", r.plan.model_mode ? "full model" : "sum of all GEMMs");
      // Each speedup with its band: BF16's low over this precision's high, BF16's high over its low.
      const auto& bf_lo = sums[*bf].lo.full_model;
      const auto& bf_hi = sums[*bf].hi.full_model;
      for (size_t p = 0; p < r.precisions.size(); ++p)
        if (p != *bf && sums[p].ms.full_model && *sums[p].ms.full_model > 0) {
          const auto& lo = sums[p].lo.full_model;
          const auto& hi = sums[p].hi.full_model;
          sp += fmt::format(" {} {}", to_string(r.precisions[p]), print::format_speedup(*bfs / *sums[p].ms.full_model));
          if (bf_lo && bf_hi && lo && hi && *lo > 0 && *hi > 0) sp += fmt::format(" ({:.2f}-{:.2f}x)", *bf_lo / *hi, *bf_hi / *lo);
          sp += ";";
        }
      if (sp.back() == ';') sp.pop_back();
      d.line(sp);
    }
  }
  d.rule('=', print::kReportWidth);
  d.line("Notes (assumptions of this prediction):");
  std::vector<print::Item> notes;
  for (const std::string& a : pr.assumptions) notes.emplace_back(print::Text::split("- " + a, a));
  notes.emplace_back(print::Text::split(
      "* efficiency borrowed from another precision (see above)",
      print::Inline{print::Span{"*", print::Style::Code}, print::Span{" efficiency borrowed from another precision (see above)"}}));
  for (size_t i = 0; i < reasons.size(); ++i) notes.emplace_back(fmt::format("[{}] {}", i + 1, reasons[i]));
  d.list(std::move(notes));
}

std::string render_prediction_text(const Prediction& pr) {
  print::Document d;
  add_prediction(d, pr);
  return print::render(d, print::Format::Text);
}

json prediction_json(const Prediction& pr) {
  const RunResult& r = pr.result;
  json j = to_json(r);
  for (size_t g = 0; g < r.plan.gemms.size(); ++g)
    for (size_t m = 0; m < r.modes.size(); ++m)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const PredictedCell& c = pr.cells[m][g][p];
        json& cell = j["gemms"][g]["results"][to_string(r.modes[m])][to_string(r.precisions[p])];
        cell["predicted"] = true;
        if (!c.ok) continue;
        cell["kernel_ms"] = c.kernel_ms;
        cell["overhead_ms"] = c.overhead_ms;
        cell["basis"] = c.basis;
        cell["borrowed_efficiency"] = c.borrowed;
      }
  // Bands of the sums, per mode and precision: a dense layer (null in a model whose layers all
  // have experts), a MoE layer (models with experts) and the full model (a shapes plan: all GEMMs).
  json bands = json::object(), moe_bands = json::object(), full_bands = json::object();
  const bool moe = r.plan.has_moe(), dense = !moe || r.plan.dense_layers() > 0;
  for (size_t m = 0; m < r.modes.size(); ++m) {
    json pm = json::object(), pmoe = json::object(), pfull = json::object();
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const PredSums s = pred_sums(pr, m, p);
      const char* name = to_string(r.precisions[p]);
      pm[name] = dense ? band_json(s, &PrecisionSums::total) : json(nullptr);
      if (moe) pmoe[name] = band_json(s, &PrecisionSums::moe_total);
      pfull[name] = band_json(s, &PrecisionSums::full_model);
    }
    bands[to_string(r.modes[m])] = pm;
    if (moe) moe_bands[to_string(r.modes[m])] = pmoe;
    full_bands[to_string(r.modes[m])] = pfull;
  }
  j["roofline"] = roofline_json(r, RooflineContext{&pr.target, ""});
  j["prediction"] = {{"predicted", true},
                     {"target", pr.target_key},
                     {"target_name", pr.target_name},
                     {"source", pr.datasheet_only ? json(nullptr) : json(pr.source_key)},
                     {"source_device", pr.datasheet_only ? json(nullptr) : json(pr.source_device)},
                     {"datasheet_only", pr.datasheet_only},
                     {"per_layer", bands},
                     {"full_model", full_bands},
                     {"assumptions", pr.assumptions}};
  if (moe) j["prediction"]["moe_layer"] = moe_bands;
  return j;
}

}  // namespace gs

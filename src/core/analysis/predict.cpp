#include "core/analysis/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "core/util/error.hpp"
#include "core/report/report.hpp"
#include "core/report/report_whole_step.hpp"
#include "core/analysis/roofline.hpp"
#include "core/analysis/step_transfer.hpp"

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
  // How the prediction was formed (docs/predict.md), written with the record.
  cell.set("kernel_ms", c.kernel_ms);
  cell.set("overhead_ms", c.overhead_ms);
  cell.set("basis", c.basis);
  cell.set("band_basis", c.band_basis);
  cell.set("size_class", std::string(size_class_name(c.size_class)));
  cell.set("size_x", c.x);
  cell.set("borrowed_efficiency", c.borrowed);
  return cell;
}

void set_cell(PredictedCell& out, const CellPrediction& c) {
  out.ok = true;
  out.kernel_ms = c.kernel_s * 1e3;
  out.overhead_ms = c.overhead_s * 1e3;
  out.ms = out.kernel_ms + out.overhead_ms;
  out.low_ms = c.low_s * 1e3;
  out.high_ms = c.high_s * 1e3;
  out.basis = c.basis;
  out.band_basis = c.band_basis;
  out.borrowed = c.borrowed;
  out.from_prior = c.from_prior;
  out.x = c.x;
  out.size_class = c.size_class;
}

// A column the target's architecture cannot run is an N/A cell with the reason; one it can run
// but whose dense peak the database lacks is refused (UsageError naming the field): never a number
// made up, never inf.
std::string column_reason(const GpuSpec& t, Precision p) {
  if (!t.arch_policy().times(p)) return cannot_run(t, p);
  required_peak_flops(t, p, fmt::format("the {} column (leave it out with --precisions)", to_string(p)));
  return "";
}

// Each cell of `pr` ([mode][gemm][precision]) in a column the target can run: f(mode, gemm,
// precision index, the cell); a column it cannot run gets the reason in every cell.
template <class F>
void for_each_runnable_cell(Prediction& pr, const GpuSpec& target, F f) {
  for (size_t mi = 0; mi < pr.cells.size(); ++mi)
    for (size_t g = 0; g < pr.cells[mi].size(); ++g)
      for (size_t pi = 0; pi < pr.cells[mi][g].size(); ++pi) {
        PredictedCell& out = pr.cells[mi][g][pi];
        if (std::string why = column_reason(target, pr.result.precisions[pi]); !why.empty()) {
          out.reason = why;
          continue;
        }
        f(mi, g, pi, out);
      }
}

// `note` added to `notes` once (empty: nothing).
void add_note(std::vector<std::string>& notes, const std::string& note) {
  if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
}

Prediction start(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o, const GpuSpec& target,
                 const std::vector<Precision>& precisions) {
  Prediction pr;
  RunResult& r = pr.result;
  r.plan = plan;
  r.modes = modes;
  r.precisions = precisions.empty() ? std::vector<Precision>(std::begin(kAllPrecisions), std::end(kAllPrecisions)) : precisions;
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
      for (size_t p = 0; p < r.precisions.size(); ++p) r.cell(m, g, p) = as_cell(pr.cells[m][g][p]);
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
    const Precision k = make_recipe(p, x, o).precision;
    const double comp = x.flops() / required_peak_flops(src, k, "the measured run") / wave_efficiency(x, sms(src));
    const double mem = bytes(p, x, Mode::PreQuantized, o).gemm / bandwidth(src);
    if (comp < mem) continue;
    c += comp;
    t += cell.stats.mean_ms * 1e-3;
  }
  return t > 0 ? c / t : PredictConstants::kComputePrior;
}

}  // namespace

Prediction predict_from_run(const RunResult& run, const std::string& run_name, const GpuSpec& source, const GpuSpec& target,
                            const PredictData& data, const std::vector<Precision>& precisions) {
  if (run.dry_run || run.modes.empty() || run.precisions.empty())
    throw UsageError(fmt::format("{} has no measurements to predict from ({})", run_name,
                                 run.dry_run ? "a dry run / plan only" : "no timed modes"));
  if (!run.ranks.empty())
    throw UsageError(fmt::format("{} holds {} ranks (a fleet file): predict from one GPU's run", run_name, run.ranks.size()));
  const RecipeOptions os = options_for(run.recipe_options, source), ot = options_for(run.recipe_options, target);
  Prediction pr = start(run.plan, run.modes, run.recipe_options, target, precisions);
  pr.source_key = source.key;
  pr.source_device = run.device ? run.device->name : source.name;
  const bool same_gpu = source.key == target.key;
  pr.transfer = transfer_kind(source, target);
  const std::optional<size_t> pq = index_of(run.modes, Mode::PreQuantized);
  std::vector<std::string> borrowed_notes;
  // The run's quantization overheads split into a fixed part per GEMM and a byte-driven part, per
  // quantizing mode and measured precision (overhead_fit.hpp).
  std::vector<std::vector<OverheadFit>> fits(run.modes.size(), std::vector<OverheadFit>(run.precisions.size()));
  std::vector<double> ceff(run.precisions.size(), -1.0);  // the run's compute efficiency per precision, once
  if (pq)
    for (size_t mi = 0; mi < run.modes.size(); ++mi)
      for (size_t pi = 0; pi < run.precisions.size() && run.modes[mi] != Mode::PreQuantized; ++pi) {
        std::vector<std::pair<double, double>> pts;
        for (size_t g = 0; g < run.plan.gemms.size(); ++g) {
          const Cell& mc = run.cell(mi, g, pi);
          const Cell& kc = run.cell(*pq, g, pi);
          const double qb = bytes(run.precisions[pi], run.plan.gemms[g], run.modes[mi], os).quantize;
          if (mc.ok && kc.ok && qb > 0) pts.emplace_back(qb, (mc.stats.mean_ms - kc.stats.mean_ms) * 1e-3);
        }
        fits[mi][pi] = fit_overhead(pts);
      }

  for_each_runnable_cell(pr, target, [&](size_t mi, size_t g, size_t pi, PredictedCell& out) {
    const Mode mode = run.modes[mi];
    const Gemm& x = run.plan.gemms[g];
    const Precision p = pr.result.precisions[pi];
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
      return;
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
    if (pq && ceff[*src] < 0) ceff[*src] = compute_efficiency(run, *pq, *src, source);
    const MeasuredCell mc{.column = ps, .kernel_s = t_kernel, .overhead_s = ov_src,
                          .overhead_measured = overhead_measured, .cv = cv, .fit = pq ? &fits[mi][*src] : nullptr,
                          .compute_efficiency = pq ? ceff[*src] : 0.0};
    const CellPrediction c = predict_cell_from_run(x, mode, p, mc, os, ot, source, target, data);
    set_cell(out, c);
    const std::string borrowed_note =
        !c.borrowed ? std::string()
                    : fmt::format("{} on {} is predicted from the {} cells measured on {} (the run has no {} cell): the "
                                  "kernel follows {}'s published prior on {} (docs/predict.md)",
                                  to_string(p), target.key, to_string(ps), source.key, to_string(p), to_string(p),
                                  target.arch);
    for (const std::string& n : {borrowed_note, c.note}) add_note(borrowed_notes, n);
  });
  auto& a = pr.assumptions;
  a.push_back(fmt::format("PREDICTED, not measured: {} ({}) from a run on {} ({}), {}; model and band: docs/predict.md",
                          target.name, target.key, pr.source_device, source.key, run_name));
  a.push_back(fmt::format(
      "GEMM kernels: the fraction of the dense datasheet peak each GEMM reached on {} relative to the published prior of "
      "its format and size class (data/priors.json), carried to the target's prior for its format and size class: all "
      "of that ratio within a GPU generation, half of it (in log terms) across generations, the band spanning none to "
      "all of it; the source's wave quantization removed and the target's applied ({}x{} output tiles over {} vs {} SMs)",
      source.key, PredictConstants::kTileM, PredictConstants::kTileN, sms(source) ? std::to_string(sms(source)) : "unknown",
      sms(target) ? std::to_string(sms(target)) : "unknown"));
  if (pq)
    a.push_back(fmt::format("quantizing-mode overheads: the source's measured overhead (mode minus pre-quantized), its "
                            "fixed part per GEMM (fitted over the run's GEMMs) carried unchanged and the rest scaled by the "
                            "modelled quantization bytes (target recipe / source recipe) and the bandwidth ratio "
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
  carry_step(run, source, target, pr.result, pr.assumptions);  // the whole step, when the run has one
  pr.result.notes = pr.assumptions;
  return pr;
}

Prediction predict_datasheet_only(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o,
                                  const GpuSpec& target, const PredictData& data, const std::vector<Precision>& precisions) {
  Prediction pr = start(plan, modes, o, target, precisions);
  pr.datasheet_only = true;
  pr.transfer = Transfer::DatasheetOnly;
  const RecipeOptions ot = options_for(o, target);
  std::vector<std::string> notes;
  for_each_runnable_cell(pr, target, [&](size_t mi, size_t g, size_t pi, PredictedCell& out) {
    const CellPrediction c = predict_cell_datasheet(plan.gemms[g], modes[mi], pr.result.precisions[pi], ot, target, data);
    set_cell(out, c);
    add_note(notes, c.note);
  });
  pr.assumptions.push_back(fmt::format(
      "PREDICTED from the datasheet only (no measured run): {} ({}); model and band: docs/predict.md", target.name, target.key));
  pr.assumptions.push_back(fmt::format(
      "every compute-bound GEMM is assumed to reach the published prior of its format and size class on {} GPUs "
      "(data/priors.json), streaming passes {:.0f}% of the datasheet bandwidth; the band is the measured errors of "
      "datasheet-only predictions of gemmscope's own runs (data/predict_errors.json), with the prior's spread where those "
      "were measured on another generation",
      target.arch, 100 * PredictConstants::kMemEff));
  for (const std::string& n : notes) pr.assumptions.push_back(n);
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

// Per recipe (precision column): the widest relative band of its full-model totals over the modes,
// and what the band of its largest GEMM is made of.
struct RecipeBand {
  Precision precision = Precision::BF16;
  double lo = 0, hi = 0;  // relative
  std::string basis;
};
std::vector<RecipeBand> recipe_bands(const Prediction& pr) {
  const RunResult& r = pr.result;
  std::vector<RecipeBand> out;
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    RecipeBand b;
    b.precision = r.precisions[p];
    bool any = false;
    for (size_t m = 0; m < r.modes.size(); ++m) {
      const PredSums s = pred_sums(pr, m, p);
      const auto& t = s.ms.full_model;
      if (!t || !(*t > 0) || !s.lo.full_model || !s.hi.full_model) continue;
      any = true;
      b.lo = std::max(b.lo, 1 - *s.lo.full_model / *t);
      b.hi = std::max(b.hi, *s.hi.full_model / *t - 1);
    }
    double best = -1;
    for (size_t m = 0; m < r.modes.size() && best < 0; ++m)
      for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
        const PredictedCell& c = pr.cells[m][g][p];
        if (c.ok && r.plan.gemms[g].flops() > best) {
          best = r.plan.gemms[g].flops();
          b.basis = c.band_basis;
        }
      }
    if (any) out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

void add_prediction(print::Document& d, const Prediction& pr) {
  const RunResult& r = pr.result;
  d.title(fmt::format("PREDICTED GEMM times on {} [{}]", pr.target_name, pr.target_key), 2);
  d.line(pr.datasheet_only ? "Basis: DATASHEET ONLY (no measured run): the target's datasheet and the published priors; widest band"
                           : fmt::format("Basis: a measured run on {} [{}] and both datasheets; nothing measured on the target",
                                         pr.source_device, pr.source_key));
  d.line("Every number below is a prediction with its band (low-high), not a measurement.");
  if (r.plan.model_mode) {
    const ModelConfig& c = *r.plan.config;
    d.line(fmt::format("Model: {} (hidden={}, intermediate={}, {}, layers={}, M={})", c.name, c.hidden_size,
                       c.intermediate_size, heads_text(c, true), c.num_hidden_layers, c.tokens()));
  }
  if (r.step) add_step_block(d, r);  // the run's whole step carried to the target (step_transfer.hpp)
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
      if (sp.back() == ';') {
        sp.pop_back();
        d.line(sp);  // nothing to print where BF16 is the only column the target runs
      }
    }
  }
  d.rule('=', print::kReportWidth);
  d.line(pr.datasheet_only ? "Bands per recipe (datasheet only: no measured run behind these numbers):"
                           : "Bands per recipe (the widest over the modes, of the full model's total):");
  std::vector<print::Item> rb;
  for (const RecipeBand& b : recipe_bands(pr))
    rb.emplace_back(fmt::format("{}: -{:.0f}%/+{:.0f}%; largest GEMM's band: {}", to_string(b.precision), 100 * b.lo,
                                100 * b.hi, b.basis));
  d.list(std::move(rb));
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
  json j = to_json(r);  // the cells are records of source "predicted", with their band and basis (as_cell)
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
  json recipe_json = json::object();
  for (const RecipeBand& b : recipe_bands(pr))
    recipe_json[to_string(b.precision)] = {{"low_pct", 100 * b.lo}, {"high_pct", 100 * b.hi}, {"basis", b.basis}};
  j["roofline"] = roofline_json(r, RooflineContext{&pr.target, ""});
  j["prediction"] = {{"predicted", true},
                     {"target", pr.target_key},
                     {"target_name", pr.target_name},
                     {"source", pr.datasheet_only ? json(nullptr) : json(pr.source_key)},
                     {"source_device", pr.datasheet_only ? json(nullptr) : json(pr.source_device)},
                     {"datasheet_only", pr.datasheet_only},
                     {"label", pr.datasheet_only ? "datasheet only" : "from a measured run"},
                     {"transfer", to_string(pr.transfer)},
                     {"recipe_bands", recipe_json},
                     {"per_layer", bands},
                     {"full_model", full_bands},
                     {"assumptions", pr.assumptions}};
  if (moe) j["prediction"]["moe_layer"] = moe_bands;
  return j;
}

}  // namespace gs

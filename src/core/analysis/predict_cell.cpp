#include "core/analysis/predict_cell.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/analysis/predict.hpp"
#include "core/util/error.hpp"

namespace gs {

namespace {

// Band terms that are assumptions, not measurements (docs/predict.md, "Error band"): used where no
// prior or no measured error exists, each named in the band's basis.
const RelBand kSameArchAssumed{0.06, 0.06, 0, "assumed +-6% (no measured same-architecture errors)"};
const RelBand kOtherArchNoPrior{0.20, 0.20, 0, "assumed +-20% (no prior: other tensor-core generation)"};
const RelBand kOverheadScaled{0.25, 0.25, 0, "overhead +-25% (scaled across generations, not measured)"};
const RelBand kOverheadOtherFormat{0.30, 2.0, 0, "overhead -30%/+200% (a quantization the run did not time)"};
const RelBand kOverheadFromBytes{0.50, 1.0, 0, "overhead -50%/+100% (estimated from bytes)"};
const RelBand kDatasheetNoPrior{0.25, 0.60, 0, "assumed -25%/+60% on the kernel (no prior)"};
const RelBand kDatasheetOverhead{0.50, 2.0, 0, "overhead -50%/+200% (datasheet only)"};

// Where a borrowed format has no prior, the old assumptions: how far the borrowed efficiency may be
// off, mostly on the slow side.
RelBand borrow_without_prior(PriorFormat t, PriorFormat s) {
  if (t == s) return {};
  if (t == PriorFormat::NVFP4) return {0.10, 0.80, 0, "assumed -10%/+80% (NVFP4 from an FP8 efficiency, no prior)"};
  if (t == PriorFormat::MXFP8) return {0.10, 0.25, 0, "assumed -10%/+25% (MXFP8 from FP8, no prior)"};
  if (t == PriorFormat::FP8Block) return {0.05, 0.30, 0, "assumed -5%/+30% (block from per-tensor FP8, no prior)"};
  return {0.05, 0.05, 0, "assumed +-5% (another format's efficiency, no prior)"};
}

double bandwidth(const GpuSpec& s) { return s.bandwidth_gbs->value * 1e9; }
int sms(const GpuSpec& s) { return s.sm_count ? static_cast<int>(s.sm_count->value) : 0; }

ByteCount bytes_of(Precision p, const Gemm& g, Mode m, const RecipeOptions& o) {
  const Recipe r = make_recipe(p, g, o);
  return byte_count(r, g, operand_work(m, g, Side::Left, r, o), operand_work(m, g, Side::Right, r, o));
}

// Absolute band of kernel + overhead: each term relative to the part it applies to (the total, the
// kernel, the overhead), combined in quadrature of absolute deviations.
struct Terms {
  std::vector<RelBand> total, kernel, overhead;
};
void apply(CellPrediction& c, const Terms& t) {
  const double total = c.kernel_s + c.overhead_s, k = c.kernel_s, o = std::abs(c.overhead_s);
  double lo = 0, hi = 0;
  std::string basis;
  const auto add = [&](const std::vector<RelBand>& v, double size) {
    for (const RelBand& b : v) {
      lo += (b.lo * size) * (b.lo * size);
      hi += (b.hi * size) * (b.hi * size);
      if (!b.basis.empty() && basis.find(b.basis) == std::string::npos) basis += (basis.empty() ? "" : " + ") + b.basis;
    }
  };
  add(t.total, total);
  add(t.kernel, k);
  if (o > 0) add(t.overhead, o);
  c.low_s = std::max(0.05 * total, total - std::sqrt(lo));
  c.high_s = total + std::sqrt(hi);
  c.band_basis = basis.empty() ? "none" : basis;
}

RelBand prior_spread(const Prior& p, const char* which) {
  return band_from_efficiency_spread(p.spread_lo, p.spread_hi,
                                     fmt::format("{} prior spread -{:.0f}%/+{:.0f}%", which, 100 * p.spread_lo, 100 * p.spread_hi));
}

}  // namespace

Transfer transfer_kind(const GpuSpec& source, const GpuSpec& target) {
  if (source.key == target.key) return Transfer::SameGpu;
  return source.arch == target.arch ? Transfer::SameArch : Transfer::OtherArch;
}

double required_peak_flops(const GpuSpec& spec, Precision kernel, const std::string& why) {
  const PeakFormat f = spec.arch_policy().peak_format(kernel);
  if (!spec.peak(f))
    throw UsageError(fmt::format("{} has no dense {} peak in the GPU spec database (gpus.json: {} tflops.{} is null); "
                                 "{} needs it",
                                 spec.key, to_string(f), spec.key, to_string(f), why));
  return spec.peak(f)->value * 1e12;
}

CellPrediction predict_cell_from_run(const Gemm& g, Mode mode, Precision column, const MeasuredCell& m,
                                     const RecipeOptions& o_src, const RecipeOptions& o_tgt, const GpuSpec& source,
                                     const GpuSpec& target, const PredictData& data) {
  CellPrediction c;
  const Transfer transfer = transfer_kind(source, target);
  // The precision each GEMM really runs in (the router, and the LM head under --lm-head-precision
  // bf16, run BF16 in every column).
  const Precision ks = make_recipe(m.column, g, o_src).precision, kt = make_recipe(column, g, o_tgt).precision;
  const std::string need = fmt::format("the {} GEMM {}", to_string(kt), g.label());
  const double peak_s = required_peak_flops(source, ks, fmt::format("the measured {} GEMM {}", to_string(ks), g.label()));
  const double peak_t = required_peak_flops(target, kt, need);
  const double comp_s = g.flops() / peak_s / wave_efficiency(g, sms(source));
  const double comp_t = g.flops() / peak_t / wave_efficiency(g, sms(target));
  const double mem_s = bytes_of(ks, g, Mode::PreQuantized, o_src).gemm / bandwidth(source);
  const double mem_t = bytes_of(kt, g, Mode::PreQuantized, o_tgt).gemm / bandwidth(target);
  const PriorFormat fs = prior_format(ks, source.arch_policy()), ft = prior_format(kt, target.arch_policy());
  c.x = size_x(g, kt, o_tgt, target);
  c.size_class = size_class(c.x);
  c.borrowed = ks != kt;
  Terms terms;
  const bool other_arch = transfer == Transfer::OtherArch;
  if (comp_s >= mem_s) {
    const double measured = comp_s / m.kernel_s;  // fraction of the source's peak, its wave quantization out
    double eff = measured;
    c.basis = fmt::format("{} {:.1f}% of {} {} peak", to_string(ks), 100 * g.flops() / peak_s / m.kernel_s, source.key,
                          to_string(source.arch_policy().peak_format(ks)));
    if (transfer != Transfer::SameGpu || c.borrowed) {
      const Prior pt = data.priors ? lookup_prior(*data.priors, ft, target.arch, c.x) : Prior{};
      const Prior ps = data.priors ? lookup_prior(*data.priors, fs, source.arch, size_x(g, ks, o_src, source)) : Prior{};
      if (c.borrowed && fs == ft) {
        // Another precision of the same kernel family (FP8 delayed and current): its cells stand in.
        eff = measured;
        if (transfer != Transfer::SameGpu) eff = pt.found && ps.found ? pt.fraction * measured / ps.fraction : measured;
        terms.kernel.push_back({0.05, 0.05, 0, "assumed +-5% (another precision's cells, the same kernel family)"});
      } else if (pt.found && (ps.found || other_arch || fs != ft)) {
        // The run's deviation from its own prior carried to the target's prior: all of it within a
        // generation (the same kernels, the same power-limited clocks), half of it across (priors.hpp).
        // Without a source prior (its format or size class unpublished) the target's prior is taken
        // as is.
        const CarriedEfficiency ce = carry_efficiency(measured, ps, pt);
        const double r = ps.found ? measured / ps.fraction : 1.0;
        eff = other_arch ? ce.efficiency : pt.fraction * r;
        c.basis += fmt::format("; target prior {}", pt.basis);
        if (!ps.found) c.basis += fmt::format("; no source prior ({}): the target prior taken as is", ps.why_not);
        else c.basis += fmt::format("; source {:.2f}x its prior {:.1f}%, {} carried", r, 100 * ps.fraction,
                                    other_arch ? "half (in log) of that" : "all of that");
        if (other_arch || fs != ft) {
          terms.kernel.push_back(prior_spread(pt, "target"));
          if (ps.found) terms.kernel.push_back(prior_spread(ps, "source"));
        }
        if (other_arch && ps.found)
          terms.kernel.push_back({ce.lo, ce.hi, 0, fmt::format("carried ratio {:.2f}: none to all -{:.0f}%/+{:.0f}%", ce.ratio,
                                                               100 * ce.lo, 100 * ce.hi)});
      } else if (pt.found) {
        // The same format within a generation, the source's size class unpublished: its measured
        // fraction is carried as it is.
        c.basis += fmt::format("; no source prior ({}): the measured fraction carried", ps.why_not);
      } else {
        c.note = fmt::format("no prior for {} on {} ({}): {}", to_string(ft), target.key, pt.why_not, missing_prior_bias(ft, fs));
        terms.kernel.push_back(borrow_without_prior(ft, fs));
        if (other_arch) terms.kernel.push_back(kOtherArchNoPrior);
      }
    }
    c.kernel_s = std::max(comp_t / eff, mem_t / PredictConstants::kMemEff);
  } else {
    const double mem_eff = mem_s / m.kernel_s;
    const double ce = m.compute_efficiency > 0 ? m.compute_efficiency : PredictConstants::kComputePrior;
    c.kernel_s = std::max(mem_t / mem_eff, comp_t / ce);
    c.basis = fmt::format("{} memory-bound on {}: {:.1f}% of its bandwidth", to_string(ks), source.key, 100 * mem_eff);
    if (other_arch) terms.kernel.push_back(kOtherArchNoPrior);
  }
  // Quantization overhead on the target: the run's fixed part per GEMM carried, the rest scaled by
  // the modelled bytes and the bandwidth (overhead_fit.hpp).
  if (mode != Mode::PreQuantized) {
    const double qb_s = bytes_of(m.column, g, mode, o_src).quantize, qb_t = bytes_of(column, g, mode, o_tgt).quantize;
    const double bw_ratio = bandwidth(source) / bandwidth(target);
    const OverheadFit none;
    if (qb_s > 0) {
      c.overhead_s = transfer_overhead(m.fit ? *m.fit : none, m.overhead_s, qb_t / qb_s, bw_ratio);
    } else if (qb_t > 0) {
      c.overhead_s = qb_t / (PredictConstants::kMemEff * bandwidth(target));
    } else if (transfer == Transfer::SameGpu && !c.borrowed) {
      c.overhead_s = m.overhead_s;  // nothing quantized: the run's own mode-to-mode difference, reproduced
    } else if (m.kernel_s > 0 && m.overhead_s != 0) {
      // Nothing quantized (BF16): the same kernel in every mode on the target, the source's
      // mode-to-mode difference (noise) in the band instead of the time.
      const double r = std::abs(m.overhead_s) / m.kernel_s;
      terms.total.push_back({r, r, 0, fmt::format("the run's mode-to-mode difference +-{:.1f}%", 100 * r)});
    }
    c.overhead_s = std::max(c.overhead_s, -0.5 * c.kernel_s);
    if (transfer != Transfer::SameGpu || c.borrowed) {
      const bool other_format = ArchPolicy::newest().peak_format(column) != ArchPolicy::newest().peak_format(m.column);
      if (!m.overhead_measured) terms.overhead.push_back(kOverheadFromBytes);
      else if (c.borrowed || other_format) terms.overhead.push_back(kOverheadOtherFormat);
      else if (other_arch) terms.overhead.push_back(kOverheadScaled);
    }
  }
  // The measured errors of predictions like this one (any transfer but the same GPU's), and the
  // run's own spread.
  if (transfer != Transfer::SameGpu) {
    const RelBand mb = data.errors ? measured_band(*data.errors, Transfer::SameArch, column, c.size_class, target.arch) : RelBand{};
    terms.total.push_back(mb.samples > 0 ? mb : kSameArchAssumed);
  }
  if (m.cv > 0) terms.total.push_back({m.cv, m.cv, 0, fmt::format("the run's spread +-{:.1f}%", 100 * m.cv)});
  apply(c, terms);
  return c;
}

CellPrediction predict_cell_datasheet(const Gemm& g, Mode mode, Precision column, const RecipeOptions& o_tgt,
                                      const GpuSpec& target, const PredictData& data) {
  CellPrediction c;
  const Precision kt = make_recipe(column, g, o_tgt).precision;
  const double peak = required_peak_flops(target, kt, fmt::format("the {} GEMM {}", to_string(kt), g.label()));
  const double comp = g.flops() / peak / wave_efficiency(g, sms(target));
  const ByteCount bc = bytes_of(column, g, mode, o_tgt);
  const PriorFormat ft = prior_format(kt, target.arch_policy());
  c.x = size_x(g, kt, o_tgt, target);
  c.size_class = size_class(c.x);
  const Prior pt = data.priors ? lookup_prior(*data.priors, ft, target.arch, c.x) : Prior{};
  Terms terms;
  double eff = PredictConstants::kComputePrior;
  if (pt.found) {
    eff = pt.fraction;
    c.from_prior = true;
    c.basis = fmt::format("datasheet only; prior {}", pt.basis);
  } else {
    c.basis = fmt::format("datasheet only; no prior ({}): {:.0f}% of peak assumed", pt.why_not, 100 * eff);
    c.note = fmt::format("no prior for {} on {} ({}): every such GEMM is assumed to reach {:.0f}% of the dense peak (an "
                         "H100 BF16 observation); {}",
                         to_string(ft), target.key, pt.why_not, 100 * PredictConstants::kComputePrior,
                         ft == PriorFormat::BF16 || ft == PriorFormat::FP8
                             ? std::string("no known direction of bias")
                             : missing_prior_bias(ft, PriorFormat::FP8));
  }
  c.kernel_s = std::max(comp / eff, bc.gemm / bandwidth(target) / PredictConstants::kMemEff);
  c.overhead_s = bc.quantize / (PredictConstants::kMemEff * bandwidth(target));
  // The measured errors of datasheet-only predictions; on a generation they were not measured on,
  // also the prior's spread.
  const RelBand mb = data.errors ? measured_band(*data.errors, Transfer::DatasheetOnly, column, c.size_class, target.arch) : RelBand{};
  if (mb.samples > 0 && pt.found) {
    terms.total.push_back(mb);
    if (!mb.arch_matched) terms.kernel.push_back(prior_spread(pt, "prior"));
  } else {
    terms.kernel.push_back(pt.found ? prior_spread(pt, "prior") : kDatasheetNoPrior);
    if (mb.samples > 0) terms.total.push_back(mb);
    terms.overhead.push_back(kDatasheetOverhead);
  }
  apply(c, terms);
  c.band_basis = "datasheet only: " + c.band_basis;
  return c;
}

}  // namespace gs

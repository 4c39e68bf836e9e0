#include "core/results/clocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gs {

ClockSummary summarize_clocks(const RunResult& r) {
  ClockSummary s;
  s.precision_mean_mhz.assign(r.precisions.size(), std::nullopt);
  std::vector<double> num(r.precisions.size(), 0.0), den(r.precisions.size(), 0.0);
  std::vector<std::pair<double, double>> all;  // (mhz, weight)
  const size_t modes = r.has_cells() ? r.modes.size() : 0;  // the main provider's cells
  for (size_t m = 0; m < modes; ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok || !c.clock || c.clock->sm_mhz <= 0) continue;
        const double w = std::max(c.stats.mean_ms, 0.0);
        num[p] += w * c.clock->sm_mhz;
        den[p] += w;
        all.emplace_back(c.clock->sm_mhz, w);
      }
  for (size_t p = 0; p < r.precisions.size(); ++p)
    if (den[p] > 0) s.precision_mean_mhz[p] = num[p] / den[p];
  if (all.empty()) return s;
  std::sort(all.begin(), all.end());
  double total = 0;
  for (const auto& x : all) total += x.second;
  double acc = 0;
  for (const auto& x : all) {
    acc += x.second;
    if (acc >= total / 2) { s.steady_mhz = x.first; break; }
  }
  if (!s.steady_mhz) s.steady_mhz = all.back().first;
  auto rate = [&](size_t g, const Cell& c) {  // FLOP per ms of the cell
    return c.stats.mean_ms > 0 && g < r.plan.gemms.size() ? r.plan.gemms[g].flops() / c.stats.mean_ms : 0.0;
  };
  for (size_t m = 0; m < modes; ++m) {
    std::vector<double> best(r.precisions.size(), 0.0);
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        if (r.cell(m, g, p).ok) best[p] = std::max(best[p], rate(g, r.cell(m, g, p)));
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok || !c.clock || !(c.clock->sm_mhz > *s.steady_mhz * (1.0 + kBoostFlag))) continue;
        if (best[p] > 0 && rate(g, c) < kLightShare * best[p]) ++s.light_above;
        else if (c.clock->power_capped()) ++s.capped_above;
        else s.boosted.push_back({m, g, p, c.clock->sm_mhz});
      }
  }
  return s;
}

std::vector<std::string> clock_warnings(const RunResult& r) {
  std::vector<std::string> out;
  const ClockSummary s = summarize_clocks(r);
  std::optional<double> bf16;
  for (size_t p = 0; p < r.precisions.size(); ++p)
    if (r.precisions[p] == Precision::BF16) bf16 = s.precision_mean_mhz[p];
  if (bf16 && *bf16 > 0)
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const auto& mhz = s.precision_mean_mhz[p];
      if (r.precisions[p] == Precision::BF16 || !mhz) continue;
      const double rel = *mhz / *bf16 - 1.0;
      if (std::abs(rel) > kClockSkewWarn)
        out.push_back(fmt::format("clocks: {} ran at a mean SM clock of {:.0f} MHz, {:+.1f}% from BF16's {:.0f} MHz "
                                  "(time-weighted over its cells): its speedup vs BF16 is partly clocks",
                                  to_string(r.precisions[p]), *mhz, 100.0 * rel, *bf16));
    }
  if (!s.boosted.empty()) {
    std::string names;
    for (size_t i = 0; i < s.boosted.size() && i < 3; ++i) {
      const auto& b = s.boosted[i];
      const Gemm& g = r.plan.gemms.at(b.gemm);
      names += fmt::format("{}{} {} {} {} ({} MHz)", i ? "; " : "", to_string(r.modes.at(b.mode)), pass_label(g.pass),
                           g.label(), to_string(r.precisions.at(b.prec)), b.sm_mhz);
    }
    if (s.boosted.size() > 3) names += fmt::format("; and {} more", s.boosted.size() - 3);
    out.push_back(fmt::format("clocks: {} cell(s) sampled more than {:.0f}% above the run's steady clock of {:.0f} MHz "
                              "without the power cap limiting them (a boost transient, e.g. after a host stall; such a "
                              "cell reads faster than training would see): {}",
                              s.boosted.size(), 100.0 * kBoostFlag, *s.steady_mhz, names));
  }
  if (s.capped_above > 0)
    out.push_back(fmt::format("clocks: {} cell(s) ran more than {:.0f}% above the steady clock of {:.0f} MHz at the "
                              "power cap (NVML's power-cap reason active): that is the clock their own power draw allows "
                              "under the cap, not a transient",
                              s.capped_above, 100.0 * kBoostFlag, *s.steady_mhz));
  if (s.light_above > 0)
    out.push_back(fmt::format("clocks: {} light cell(s) (under {:.0f}% of their recipe's best TFLOP/s: small, memory- "
                              "or launch-bound GEMMs that draw less than the power cap allows) ran more than {:.0f}% "
                              "above the steady clock of {:.0f} MHz; that is their own steady state, not a transient",
                              s.light_above, 100.0 * kLightShare, 100.0 * kBoostFlag, *s.steady_mhz));
  return out;
}

}  // namespace gs

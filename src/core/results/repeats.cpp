#include "core/results/repeats.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace gs {

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::optional<Interval> interval95(const std::vector<double>& values) {
  if (values.size() < 3) return std::nullopt;
  for (double x : values)
    if (!std::isfinite(x)) return std::nullopt;
  Interval iv;
  iv.n = static_cast<int>(values.size());
  iv.median = median_of(values);
  constexpr int kResamples = 2000;
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull);  // fixed: the interval is a function of the values
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> medians(kResamples), sample(values.size());
  for (double& m : medians) {
    for (double& x : sample) x = values[pick(rng)];
    m = median_of(sample);
  }
  std::sort(medians.begin(), medians.end());
  iv.lo = medians[static_cast<size_t>(0.025 * kResamples)];
  iv.hi = medians[static_cast<size_t>(0.975 * kResamples) - 1];
  return iv;
}

RunResult repeat_view(const RunResult& r, size_t repeat) {
  RunResult v = r;
  for (size_t m = 0; v.has_cells() && m < v.modes.size(); ++m)  // the main provider's cells
    for (size_t g = 0; g < v.plan.gemms.size(); ++g)
      for (size_t p = 0; p < v.precisions.size(); ++p)
        if (Cell& c = v.cell(m, g, p); c.ok) c.stats.mean_ms = c.repeat_ms.at(repeat);
  return v;
}

Cell pool_repeats(const std::vector<Cell>& reps) {
  if (reps.empty()) return Cell::na("not run");
  for (const Cell& c : reps)
    if (!c.ok) return c;
  const double n = static_cast<double>(reps.size());
  Stats s;
  std::vector<double> medians;
  double within = 0;
  for (const Cell& c : reps) {
    s.mean_ms += c.stats.mean_ms / n;
    medians.push_back(c.stats.median_ms);
    within += c.stats.stdev_ms * c.stats.stdev_ms / n;
    s.iters += c.stats.iters;
  }
  double between = 0;
  for (const Cell& c : reps) between += (c.stats.mean_ms - s.mean_ms) * (c.stats.mean_ms - s.mean_ms) / n;
  s.stdev_ms = std::sqrt(within + between);
  s.median_ms = median_of(medians);
  s.min_ms = reps[0].stats.min_ms;
  s.max_ms = reps[0].stats.max_ms;
  for (const Cell& c : reps) {
    s.min_ms = std::min(s.min_ms, c.stats.min_ms);
    s.max_ms = std::max(s.max_ms, c.stats.max_ms);
  }
  Cell out = Cell::measured(s);
  out.clock = reps[0].clock;
  out.dense_equiv_ms = reps[0].dense_equiv_ms;
  out.kernels = reps[0].kernels;  // kernel records and algorithm of the first repeat
  for (const Cell& c : reps) {
    out.gate_timed_out |= c.gate_timed_out;
    out.repeat_ms.push_back(c.stats.mean_ms);
  }
  return out;
}

std::vector<std::vector<ModeSummary>> repeat_summaries(const RunResult& r) {
  std::vector<std::vector<ModeSummary>> per_rep;  // [repeat][mode]
  const size_t reps = static_cast<size_t>(std::max(0, r.timing.repeats));
  if (reps < 3) return per_rep;
  for (size_t m = 0; r.has_cells() && m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        if (const Cell& c = r.cell(m, g, p); c.ok && c.repeat_ms.size() != reps) return per_rep;
  for (size_t k = 0; k < reps; ++k) {
    const RunResult v = repeat_view(r, k);
    std::vector<ModeSummary> ms;
    for (size_t m = 0; m < r.modes.size(); ++m) ms.push_back(summarize_mode(v, m));
    per_rep.push_back(std::move(ms));
  }
  return per_rep;
}

std::vector<RepeatSummary> summarize_repeats(const RunResult& r) {
  std::vector<RepeatSummary> out;
  const std::vector<std::vector<ModeSummary>> per_rep = repeat_summaries(r);  // [repeat][mode]
  if (per_rep.empty()) return out;
  auto collect = [&](auto get) -> std::optional<Interval> {
    std::vector<double> xs;
    for (const auto& rep : per_rep) {
      const std::optional<double> x = get(rep);
      if (!x) return std::nullopt;
      xs.push_back(*x);
    }
    return interval95(xs);
  };
  for (size_t m = 0; m < r.modes.size(); ++m) {
    RepeatSummary s;
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      s.per_layer_total.push_back(
          collect([&](const std::vector<ModeSummary>& rep) { return rep[m].sums[p].average_layer; }));
      s.full_model.push_back(collect([&](const std::vector<ModeSummary>& rep) { return rep[m].sums[p].full_model; }));
    }
    const size_t n_sp = per_rep[0][m].speedups.size();
    for (size_t i = 0; i < n_sp; ++i)
      s.speedups.push_back(collect([&](const std::vector<ModeSummary>& rep) { return rep[m].speedups[i].value; }));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gs

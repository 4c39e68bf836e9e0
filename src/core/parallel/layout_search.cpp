#include "core/parallel/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "core/parallel/layout_check.hpp"

namespace gs {

namespace {

std::vector<int64_t> powers_of_two_dividing(int64_t n, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= limit && v <= n; v *= 2)
    if (n % v == 0) out.push_back(v);
  return out;
}

std::vector<int64_t> divisors(int64_t n, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= n && v <= limit; ++v)
    if (n % v == 0) out.push_back(v);
  return out;
}

// The rule's kind, for grouping refusals: the text up to the first number or parenthesis.
std::string rule_key(const std::string& why) {
  const size_t cut = why.find_first_of("0123456789(");
  std::string k = cut == std::string::npos ? why : why.substr(0, cut);
  while (!k.empty() && (k.back() == ' ' || k.back() == ':')) k.pop_back();
  return k;
}

std::string gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

// Why `x` is slower than `best`: its step time over the best's, and the cost that grew most.
std::string why_slower(const ParallelStepResult& x, const ParallelStepResult& best) {
  const StageResult& a = x.critical();
  const StageResult& b = best.critical();
  size_t worst = 0;
  double delta = -1e300;
  for (size_t i = 0; i < a.ms.size(); ++i)
    if (a.ms[i] - b.ms[i] > delta) delta = a.ms[i] - b.ms[i], worst = i;
  return fmt::format("{:+.1f}% step time; largest extra: {} +{:.1f} ms", 100 * (x.step_ms / best.step_ms - 1),
                     to_string(static_cast<TimeKind>(worst)), delta);
}

}  // namespace

std::vector<ParallelLayout> enumerate_layouts(const SearchSpace& sp, int64_t domain) {
  const ModelConfig& c = sp.model;
  std::vector<ParallelLayout> out;
  const bool moe = c.moe.enabled();
  for (int64_t tp : powers_of_two_dividing(sp.gpus, domain))
    for (int64_t cp : powers_of_two_dividing(sp.gpus / tp, 16)) {
      if (cp > 1 && c.sequence_length < 4096 * cp / 2) continue;  // context parallelism pays at long sequences only
      for (int64_t pp : divisors(sp.gpus / (tp * cp), c.num_hidden_layers)) {
        if (c.num_hidden_layers % pp != 0) continue;
        const int64_t dp = sp.gpus / (tp * cp * pp);
        std::vector<int64_t> vpps{1};
        if (pp > 1)
          for (int64_t v : divisors(c.num_hidden_layers / pp, sp.max_vpp))
            if (v > 1) vpps.push_back(v);
        std::vector<std::pair<int64_t, int64_t>> experts{{1, 0}};  // (ep, etp)
        if (moe) {
          experts.clear();
          for (int64_t ep : powers_of_two_dividing(c.moe.num_experts, tp * cp * dp)) {
            experts.push_back({ep, 0});                // ETP = TP
            if (tp > 1) experts.push_back({ep, 1});    // experts whole on each rank
          }
        }
        for (int64_t v : vpps)
          for (const auto& [ep, etp] : experts)
            for (int64_t mb : sp.micro_batches) {
              ParallelLayout l = sp.base;
              l.tp = tp, l.cp = cp, l.pp = pp, l.vpp = v, l.dp = dp, l.ep = ep, l.etp = etp;
              l.micro_batch = mb;
              l.global_batch = sp.global_batch;
              out.push_back(l);
            }
      }
    }
  return out;
}

SearchResult search_layouts(const SearchSpace& sp, const ParallelJob& job_in, const CollectiveModel& net,
                            const GpuSpec& gpu, const CostsFn& costs) {
  SearchResult out;
  ParallelJob job = job_in;
  job.model = sp.model;
  std::vector<SearchCandidate> fit, over;
  for (const ParallelLayout& l0 : enumerate_layouts(sp, net.cluster().domain_gpus())) {
    ++out.candidates;
    SearchCandidate cand;
    cand.layout = l0;
    cand.refused = layout_problem(sp.model, l0, sp.gpus);
    if (!cand.refused.empty()) {
      ++out.refused[rule_key(cand.refused)];
      continue;
    }
    auto evaluate = [&](const ParallelLayout& l) {
      job.layout = l;
      const StepCosts sc = costs(l);
      if (out.basis.empty()) out.basis = sc.basis;
      return simulate_parallel_step(job, sc, net, gpu, false);
    };
    cand.result = evaluate(l0);
    cand.evaluated = true;
    if (!cand.result.fits && sp.try_full_recompute && l0.recompute != Recompute::Full) {
      ParallelLayout full = l0;
      full.recompute = Recompute::Full;
      ParallelStepResult again = evaluate(full);
      if (again.fits) {
        cand.layout = full;
        cand.result = std::move(again);
      }
    }
    if (cand.result.fits) fit.push_back(std::move(cand));
    else over.push_back(std::move(cand));
  }
  std::sort(fit.begin(), fit.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
    return std::make_tuple(a.result.step_ms, a.result.peak_memory_bytes) < std::make_tuple(b.result.step_ms, b.result.peak_memory_bytes);
  });
  std::sort(over.begin(), over.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
    return a.result.peak_memory_bytes < b.result.peak_memory_bytes;
  });
  for (size_t i = 1; i < fit.size(); ++i) fit[i].why = why_slower(fit[i].result, fit[0].result);
  for (SearchCandidate& c : over)
    c.why = fmt::format("needs {} on its fullest rank (stage {}), {} usable", gb(c.result.peak_memory_bytes),
                        [&] {
                          int64_t s = 0;
                          for (const StageResult& st : c.result.stages)
                            if (st.memory.total_bytes() >= c.result.peak_memory_bytes) s = st.stage;
                          return s;
                        }(),
                        gb(c.result.usable_memory_bytes));
  out.ranked = std::move(fit);
  out.not_fitting = std::move(over);
  return out;
}

}  // namespace gs

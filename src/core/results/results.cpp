#include "core/results/results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

const char* to_string(Dist d) { return d == Dist::Normal ? "normal" : "outliers"; }

Dist dist_from_string(const std::string& s) {  // any case
  if (iequals(s, "normal")) return Dist::Normal;
  if (iequals(s, "outliers")) return Dist::Outliers;
  throw UsageError(fmt::format("unknown distribution '{}' (normal, outliers)", clip_text(s, 80)));
}

Stats summarize(const std::vector<double>& v) {
  if (v.empty()) throw std::invalid_argument("summarize: no samples");
  Stats s;
  s.iters = static_cast<int>(v.size());
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.min_ms = sorted.front();
  s.max_ms = sorted.back();
  s.median_ms = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_ms = sum / static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - s.mean_ms) * (x - s.mean_ms);
  s.stdev_ms = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  return s;
}

void RunResult::allocate_cells() {
  cells.assign(modes.size(), std::vector<std::vector<Cell>>(
                                 plan.gemms.size(), std::vector<Cell>(precisions.size(), Cell::na("not run"))));
  provider_cells.assign(providers.size() > 1 ? providers.size() - 1 : 0, cells);
}

std::string Speedup::name() const { return fmt::format("{} vs {}", to_string(num), to_string(den)); }

std::vector<std::pair<Precision, Precision>> speedup_pairs(const std::vector<Precision>& precs) {
  std::vector<std::pair<Precision, Precision>> out;
  auto has = [&](Precision p) { return std::find(precs.begin(), precs.end(), p) != precs.end(); };
  if (has(Precision::BF16))
    for (Precision p : precs)
      if (p != Precision::BF16) out.emplace_back(p, Precision::BF16);
  if (has(Precision::NVFP4) && has(Precision::MXFP8)) out.emplace_back(Precision::NVFP4, Precision::MXFP8);
  return out;
}

namespace {

// Sum of `value` over GEMMs matching `pred`; nullopt if any is N/A or none match.
template <class Pred>
std::optional<double> sum_cells(const Plan& plan, const CellValue& value, Pred pred) {
  double total = 0;
  bool any = false;
  for (size_t g = 0; g < plan.gemms.size(); ++g) {
    if (!pred(plan.gemms[g])) continue;
    const std::optional<double> v = value(g);
    if (!v) return std::nullopt;
    total += *v;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

std::optional<double> add(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

}  // namespace

PrecisionSums sum_precision(const Plan& plan, const CellValue& value) { return sum_precision(plan, value, plan.moe_layers()); }

PrecisionSums sum_precision(const Plan& plan, const CellValue& value, int64_t moe_layers) {
  PrecisionSums ps;
  bool has_model_once = false;
  for (const Gemm& g : plan.gemms) has_model_once |= g.scope == Scope::Model;
  const double dense_layers = static_cast<double>(plan.layers() - moe_layers);
  auto layer_pass = [](Pass pass) {
    return [pass](const Gemm& g) { return (g.scope == Scope::Layer || g.scope == Scope::DenseLayer) && g.pass == pass; };
  };
  auto moe_pass = [](Pass pass) {
    return [pass](const Gemm& g) { return (g.scope == Scope::Layer || g.scope == Scope::MoeLayer) && g.pass == pass; };
  };
  ps.fprop = sum_cells(plan, value, layer_pass(Pass::Fprop));
  ps.dgrad = sum_cells(plan, value, layer_pass(Pass::Dgrad));
  ps.wgrad = sum_cells(plan, value, layer_pass(Pass::Wgrad));
  ps.fprop_dgrad = add(ps.fprop, ps.dgrad);
  ps.total = add(ps.fprop_dgrad, ps.wgrad);
  ps.model_once = has_model_once ? sum_cells(plan, value, [](const Gemm& g) { return g.scope == Scope::Model; })
                                 : std::optional<double>(0.0);
  auto ops = [&](std::initializer_list<Op> list) {
    return sum_cells(plan, value, [&](const Gemm& g) {
      return g.scope != Scope::Model && std::find(list.begin(), list.end(), g.op) != list.end();
    });
  };
  ps.attention = ops({Op::Qkv, Op::AttnOut, Op::QDown, Op::QUp, Op::KvDown, Op::KvUp, Op::QProj});
  ps.dense_mlp = ops({Op::MlpUp, Op::MlpDown});
  if (moe_layers > 0) {
    ps.moe_fprop = sum_cells(plan, value, moe_pass(Pass::Fprop));
    ps.moe_dgrad = sum_cells(plan, value, moe_pass(Pass::Dgrad));
    ps.moe_wgrad = sum_cells(plan, value, moe_pass(Pass::Wgrad));
    ps.moe_total = add(add(ps.moe_fprop, ps.moe_dgrad), ps.moe_wgrad);
    ps.router = ops({Op::Router});
    ps.routed_experts = ops({Op::ExpertUp, Op::ExpertDown});
    ps.shared_experts = ops({Op::SharedUp, Op::SharedDown});
  }
  // Full model = dense layers x a dense layer + MoE layers x a MoE layer + the LM head. A dense
  // layer's sum is only needed when the model has dense layers.
  std::optional<double> dense_part = dense_layers > 0 ? (ps.total ? std::optional<double>(*ps.total * dense_layers) : std::nullopt)
                                                      : std::optional<double>(0.0);
  std::optional<double> moe_part = moe_layers > 0 ? (ps.moe_total ? std::optional<double>(*ps.moe_total * static_cast<double>(moe_layers))
                                                                  : std::nullopt)
                                                  : std::optional<double>(0.0);
  ps.full_model = add(add(dense_part, moe_part), ps.model_once);
  if (moe_layers == 0) ps.average_layer = ps.total;  // every layer alike
  else if (dense_layers == 0) ps.average_layer = ps.moe_total;
  else if (const std::optional<double> layers_part = add(dense_part, moe_part))
    ps.average_layer = *layers_part / static_cast<double>(plan.layers());
  return ps;
}

ModeSummary summarize_mode(const RunResult& r, size_t mode) {
  ModeSummary s;
  for (const Gemm& g : r.plan.gemms) s.has_model_once |= g.scope == Scope::Model;
  const int64_t moe_layers = r.plan.moe_layers();  // once: it walks every layer
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    s.sums.push_back(sum_precision(
        r.plan,
        [&](size_t g) -> std::optional<double> {
          const Cell& c = r.cell(mode, g, p);
          return c.ok ? std::optional<double>(c.stats.mean_ms) : std::nullopt;
        },
        moe_layers));
  }
  for (auto [num, den] : speedup_pairs(r.precisions)) {
    Speedup sp{num, den, std::nullopt};
    auto idx = [&](Precision p) { return static_cast<size_t>(std::find(r.precisions.begin(), r.precisions.end(), p) - r.precisions.begin()); };
    const auto& a = s.sums[idx(num)].full_model;
    const auto& b = s.sums[idx(den)].full_model;
    if (a && b && *a > 0) sp.value = *b / *a;
    s.speedups.push_back(sp);
  }
  return s;
}

double tflops(const Gemm& g, double ms) { return ms > 0 ? g.flops() / (ms * 1e-3) / 1e12 : 0.0; }

const char* to_string(L2State l) { return l2_names().name(l); }

const EnumNames<L2State>& l2_names() {
  static const EnumNames<L2State> n{{{L2State::Warm, {"warm"}}, {L2State::Cold, {"cold"}}}};
  return n;
}

}  // namespace gs

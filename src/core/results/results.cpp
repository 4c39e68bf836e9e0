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

RecordKey RunResult::gemm_key(size_t provider, size_t mode, size_t gemm, size_t prec, uint32_t rank) const {
  const Gemm& g = plan.gemms.at(gemm);
  RecordKey k;
  k.kind = gemm_kind(g);
  k.item = static_cast<uint32_t>(gemm);
  k.pass = g.pass;
  k.precision = precisions.at(prec);
  k.mode = modes.at(mode);
  k.provider = static_cast<uint32_t>(provider);
  k.rank = rank;
  k.source = grid_source();
  return k;
}

void RunResult::allocate_cells() {
  records.reserve(records.size() + providers.size() * modes.size() * plan.gemms.size() * precisions.size());
  // GEMM-major, as a run measures them: every mode, precision and provider of one GEMM together.
  for (size_t g = 0; g < plan.gemms.size(); ++g)
    for (size_t m = 0; m < modes.size(); ++m)
      for (size_t p = 0; p < precisions.size(); ++p)
        for (size_t v = 0; v < providers.size(); ++v)
          if (const RecordKey k = gemm_key(v, m, g, p); !records.find(k)) records.add(k, Cell::na("not run"));
}

bool RunResult::has_cells() const {
  return !modes.empty() && !plan.gemms.empty() && !precisions.empty() && !providers.empty() &&
         records.find(gemm_key(0, 0, 0, 0)) != nullptr;
}

void RunResult::for_each_cell(const std::function<void(size_t, size_t, size_t, size_t, const Cell&)>& f) const {
  if (!has_cells()) return;
  for (size_t v = 0; v < providers.size(); ++v)
    for (size_t m = 0; m < modes.size(); ++m)
      for (size_t g = 0; g < plan.gemms.size(); ++g)
        for (size_t p = 0; p < precisions.size(); ++p) f(v, m, g, p, provider_cell(v, m, g, p));
}

namespace {

RecordKey accuracy_key(const RunResult& r, size_t gemm, size_t i, Source s) {
  RecordKey k;
  k.kind = RecordKind::Accuracy;
  k.item = static_cast<uint32_t>(gemm);
  k.pass = r.plan.gemms.at(gemm).pass;
  k.precision = r.accuracy_precisions.at(i);
  k.source = s;
  return k;
}

}  // namespace

const Record* RunResult::accuracy_record(size_t gemm, size_t i) const {
  if (const Record* rec = records.find(accuracy_key(*this, gemm, i, Source::Measured))) return rec;
  return records.find(accuracy_key(*this, gemm, i, Source::Emulated));
}

AccuracyCell RunResult::accuracy_cell(size_t gemm, size_t i) const {
  const Record* rec = accuracy_record(gemm, i);
  if (!rec) return AccuracyCell::na("not run");
  if (!rec->value.ok) return AccuracyCell::na(rec->value.reason);
  AccuracyCell a;
  a.ok = true;
  a.rel_error = rec->value.number("rel_error").value_or(0);
  a.emulated = rec->key.source == Source::Emulated;
  return a;
}

void RunResult::set_accuracy(size_t gemm, size_t i, const AccuracyCell& c) {
  Cell v = Cell::na(c.reason);
  if (c.ok) {
    v.ok = true;
    v.set("rel_error", c.rel_error);
  }
  // One record per GEMM and precision: measured, or emulated (quantize, dequantize, a wider GEMM).
  const Source s = c.ok && c.emulated ? Source::Emulated : Source::Measured;
  if (const Record* old = accuracy_record(gemm, i); old && old->key.source != s)
    throw std::logic_error("set_accuracy: " + old->key.describe() + " is there already");
  records.put(accuracy_key(*this, gemm, i, s), std::move(v));
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

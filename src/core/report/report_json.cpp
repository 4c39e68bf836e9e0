#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <type_traits>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/providers/deepgemm_cells.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_fields.hpp"
#include "core/io/output_paths.hpp"
#include "core/model/model_fields.hpp"
#include "core/report/record_json.hpp"
#include "core/report/report.hpp"

#include "core/results/clocks.hpp"
#include "core/providers/provider.hpp"
#include "core/run/settings.hpp"
#include "core/results/repeats.hpp"
#include "core/results/step_context_records.hpp"
#include "core/run/step_context.hpp"
#include "core/report/report_step.hpp"
#include "core/report/report_attention.hpp"
#include "core/report/parallel_record.hpp"
#include "core/report/step_record.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

namespace {

// A Wgrad GEMM in the other orientation: X^T.dY ([in, out], operand a the activation) <-> dY^T.X
// ([out, in], operand a the gradient); m and n swap, k (the tokens) stays.
constexpr const char* kWgradTransposedNote =
    "Wgrad cells timed as the transposed product X^T.dY ([in, out]: this file was written before Wgrad took the "
    "weight's orientation): the same FLOPs, other cuBLASLt kernels; their shapes are shown in today's N x M x K";

Gemm transposed_wgrad(Gemm g) {
  std::swap(g.m, g.n);
  std::swap(g.a, g.b);
  return g;
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// "N/A reasons" of a set of cells, grouped by reason in order of appearance: "fprop QKV Proj,
// dgrad QKV Proj: reason" (up to two GEMMs named) or "12 GEMMs: reason", joined by "; ". The
// charts print it under their N/A markers.
std::string na_summary(const std::vector<std::pair<const Gemm*, const Cell*>>& na) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // reason, GEMMs
  for (const auto& [g, c] : na) {
    const std::string what = g->pass == Pass::Shape ? g->label() : fmt::format("{} {}", to_string(g->pass), g->label());
    const std::string why = c->reason.empty() ? "n/a" : c->reason;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& gr) { return gr.first == why; });
    if (it == groups.end()) {
      groups.emplace_back(why, std::vector<std::string>{});
      it = std::prev(groups.end());
    }
    it->second.push_back(what);
  }
  std::string out;
  for (const auto& [why, whats] : groups) {
    std::string head = whats.size() <= 2 ? whats.front() + (whats.size() == 2 ? ", " + whats.back() : std::string())
                                         : fmt::format("{} GEMMs", whats.size());
    out += (out.empty() ? "" : "; ") + head + ": " + why;
  }
  return out;
}

// One chart quantity: a weighted sum of cells' mean times (null when any is n/a), the spread of
// the sum (root-sum-square of weight x stdev over the cells that ran), and for a prediction the
// band (the cells' band ends summed the same way; null when a cell has none). Sums run in the
// order the GEMMs are added.
struct ChartSum {
  std::optional<double> ms = 0.0, low = 0.0, high = 0.0;
  double ss = 0;  // summed variances
  std::vector<std::pair<const Gemm*, const Cell*>> na;
  void add(const Gemm& g, const Cell& c, double w) {
    if (!c.ok) {
      ms = low = high = std::nullopt;
      na.emplace_back(&g, &c);
      return;
    }
    if (ms) *ms += w * c.stats.mean_ms;
    ss += std::pow(w * c.stats.stdev_ms, 2);
    if (c.band && low) {
      *low += w * c.band->low_ms;
      *high += w * c.band->high_ms;
    } else {
      low = high = std::nullopt;
    }
  }
  double spread() const { return std::sqrt(ss); }
};

json na_json(const std::vector<std::pair<const Gemm*, const Cell*>>& na) {
  return {{"gemms", na.size()}, {"summary", na_summary(na)}};
}

// {"ms", "spread_ms"} and, for a prediction, {"low_ms", "high_ms"} of a sum; "na" when cells are n/a.
json sum_json(const ChartSum& s, bool predicted, bool with_na = true) {
  json j = {{"ms", opt(s.ms)}, {"spread_ms", s.ms ? json(s.spread()) : json(nullptr)}};
  if (predicted && s.ms && s.low && s.high) {
    j["low_ms"] = *s.low;
    j["high_ms"] = *s.high;
  }
  if (with_na && !s.na.empty()) j["na"] = na_json(s.na);
  return j;
}

// The model chart's numbers for one mode and precision: one layer of the GEMMs every layer runs
// (scope "layer"), per op (Fprop + Dgrad, Wgrad) in plan order, their sum, spread and band; with
// LM-head GEMMs (scope "model") also their time over the layers and the layer with it.
json layer_json(const RunResult& r, size_t v, size_t m, size_t p) {
  const Plan& plan = r.plan;
  const bool predicted = r.predicted();
  std::vector<Op> ops;
  for (const Gemm& g : plan.gemms)
    if (g.scope == Scope::Layer && std::find(ops.begin(), ops.end(), g.op) == ops.end()) ops.push_back(g.op);
  json jops = json::object();
  std::optional<double> total = 0.0;
  ChartSum layer;  // every layer cell, in plan order (spread, band, n/a)
  for (size_t g = 0; g < plan.gemms.size(); ++g)
    if (plan.gemms[g].scope == Scope::Layer) layer.add(plan.gemms[g], r.provider_cell(v, m, g, p), 1.0);
  for (Op op : ops) {
    ChartSum fd, wg;
    for (size_t g = 0; g < plan.gemms.size(); ++g) {
      const Gemm& x = plan.gemms[g];
      if (x.scope != Scope::Layer || x.op != op) continue;
      (x.pass == Pass::Wgrad ? wg : fd).add(x, r.provider_cell(v, m, g, p), 1.0);
    }
    jops[to_string(op)] = {{"fprop_dgrad_ms", opt(fd.ms)}, {"wgrad_ms", opt(wg.ms)}};
    total = total && fd.ms && wg.ms ? std::optional<double>(*total + *fd.ms + *wg.ms) : std::nullopt;
  }
  json j = sum_json(layer, predicted);
  j["ms"] = opt(total);  // the stacked segments' sum
  j["ops"] = jops;
  bool has_lm = false;
  for (const Gemm& g : plan.gemms) has_lm |= g.scope == Scope::Model;
  if (has_lm) {
    const double w = 1.0 / static_cast<double>(plan.layers());
    ChartSum lm, with = layer;
    with.ms = total;
    for (size_t g = 0; g < plan.gemms.size(); ++g)
      if (plan.gemms[g].scope == Scope::Model) {
        lm.add(plan.gemms[g], r.provider_cell(v, m, g, p), 1.0);
        with.add(plan.gemms[g], r.provider_cell(v, m, g, p), w);
      }
    j["lm_head_ms"] = lm.ms ? json(*lm.ms / static_cast<double>(plan.layers())) : json(nullptr);
    with.ms = total && lm.ms ? std::optional<double>(*total + *lm.ms / static_cast<double>(plan.layers())) : std::nullopt;
    j["with_lm_head"] = sum_json(with, predicted, false);
  }
  return j;
}

// The experts chart's numbers for one mode and precision: the grouped expert GEMMs of one MoE
// layer, per pass and summed, with their spread and band.
json experts_json(const RunResult& r, size_t v, size_t m, size_t p) {
  const Plan& plan = r.plan;
  ChartSum all;
  std::optional<double> total = 0.0;
  json j = json::object();
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    ChartSum part;
    bool any = false;
    for (size_t g = 0; g < plan.gemms.size(); ++g)
      if (plan.gemms[g].grouped() && plan.gemms[g].pass == pass) {
        part.add(plan.gemms[g], r.provider_cell(v, m, g, p), 1.0);
        any = true;
      }
    if (!any) continue;
    j[fmt::format("{}_ms", to_string(pass))] = opt(part.ms);
    total = total && part.ms ? std::optional<double>(*total + *part.ms) : std::nullopt;
  }
  for (size_t g = 0; g < plan.gemms.size(); ++g)
    if (plan.gemms[g].grouped()) all.add(plan.gemms[g], r.provider_cell(v, m, g, p), 1.0);
  json s = sum_json(all, r.predicted());
  s["ms"] = opt(total);
  j.update(s);
  return j;
}

// "totals": per mode and precision, the time a chart takes its speedups from (a model run's full
// model, the sum of a shapes run's GEMMs), its spread (root-sum-square of the cells' stdevs, each
// times the times its GEMM counts) and, for a prediction, its band (the cells' band ends summed
// the same way); the n/a cells grouped by reason; in model runs one layer per op ("layer"), in
// runs with experts the grouped expert GEMMs ("experts"). The chart script reads these instead of
// summing cells itself. `v`: the kernel provider whose cells are summed (0: the first).
json totals_json(const RunResult& r, size_t v) {
  const Plan& plan = r.plan;
  const auto weight = [&](const Gemm& g) -> double {
    switch (g.scope) {
      case Scope::Layer: return static_cast<double>(plan.layers());
      case Scope::DenseLayer: return static_cast<double>(plan.dense_layers());
      case Scope::MoeLayer: return static_cast<double>(plan.moe_layers());
      case Scope::Model: return 1.0;
      case Scope::Shape: return 1.0;
    }
    return 0.0;
  };
  // A sum over the plan of a per-GEMM value: the full model's (sum_precision) or every GEMM once.
  const auto total = [&](const CellValue& value) -> std::optional<double> {
    if (plan.model_mode) return sum_precision(plan, value).full_model;
    double sum = 0;
    for (size_t g = 0; g < plan.gemms.size(); ++g) {
      const std::optional<double> x = value(g);
      if (!x) return std::nullopt;
      sum += *x;
    }
    return sum;
  };
  bool has_layer = false, has_experts = false;
  for (const Gemm& g : plan.gemms) {
    has_layer |= g.scope == Scope::Layer;
    has_experts |= g.grouped();
  }
  json out = json::object();
  out["scope"] = plan.model_mode ? "full_model" : "all_gemms";
  for (size_t m = 0; m < r.modes.size(); ++m) {
    json jm = json::object();
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const auto cell_of = [&](size_t g) -> const Cell& { return r.provider_cell(v, m, g, p); };
      const std::optional<double> ms =
          total([&](size_t g) { return cell_of(g).ok ? std::optional<double>(cell_of(g).stats.mean_ms) : std::nullopt; });
      double ss = 0;
      std::vector<std::pair<const Gemm*, const Cell*>> na;
      for (size_t g = 0; g < plan.gemms.size(); ++g) {
        if (cell_of(g).ok)
          ss += std::pow(weight(plan.gemms[g]) * cell_of(g).stats.stdev_ms, 2);
        else
          na.emplace_back(&plan.gemms[g], &cell_of(g));
      }
      json jp = {{"ms", opt(ms)}, {"spread_ms", ms ? json(std::sqrt(ss)) : json(nullptr)}};
      if (r.predicted()) {
        const auto end = [&](double TimeBand::*f) {
          return total([&](size_t g) {
            const Cell& c = cell_of(g);
            return c.ok && c.band ? std::optional<double>((*c.band).*f) : std::nullopt;
          });
        };
        const auto lo = end(&TimeBand::low_ms), hi = end(&TimeBand::high_ms);
        if (ms && lo && hi) {
          jp["low_ms"] = *lo;
          jp["high_ms"] = *hi;
        }
      }
      if (!na.empty()) jp["na"] = na_json(na);
      if (plan.model_mode && has_layer) jp["layer"] = layer_json(r, v, m, p);
      if (has_experts) jp["experts"] = experts_json(r, v, m, p);
      jm[to_string(r.precisions[p])] = jp;
    }
    out[to_string(r.modes[m])] = jm;
  }
  return out;
}

// "totals" of a run with times, and "provider_totals" (the same per kernel provider after the first).
void write_totals(json& j, const RunResult& r) {
  if (r.dry_run || r.modes.empty()) return;
  j["totals"] = totals_json(r, 0);
  if (r.providers.size() > 1) {
    json pt = json::object();
    for (size_t v = 1; v < r.providers.size(); ++v) pt[r.providers[v]] = totals_json(r, v);
    j["provider_totals"] = pt;
  }
}

// Experts and MLA of a config (schema /2; absent for dense models and plain attention).
// The model-field table's rows of `section` (core/model/model_fields.hpp), as the config stores them.
void model_fields_json(json& j, const ModelConfig& c, std::string_view section) {
  for (const ModelField& f : model_fields())
    if (section == f.section) j[f.key] = f.value_in(c);
}

void moe_mla_json(json& j, const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (m.enabled()) {
    j["moe"] = {{"sparse_step", m.sparse_step},
                {"dense_layer_list", m.dense_layer_list},
                {"expert_parallel_source", m.parallel_source},
                {"routing", m.routing},
                {"capacity_factor", m.capacity_factor},
                {"moe_layers", moe_layer_count(c)}};
    model_fields_json(j["moe"], c, "config.moe");
    j["moe"]["expert_intermediate_size"] = expert_ffn(c);  // what the plan used: the default resolved
  }
  if (c.mla.enabled()) {
    j["mla"] = json::object();
    model_fields_json(j["mla"], c, "config.mla");
  }
}

// Rows per expert averaged over all experts (0 without experts).
double mean_rows(const Routing& r) {
  if (r.counts.empty()) return 0;
  return static_cast<double>(std::accumulate(r.counts.begin(), r.counts.end(), int64_t{0})) / static_cast<double>(r.counts.size());
}

json routing_json(const Routing& r) {
  return {{"routing", r.spec.text()},        {"seed", r.seed},
          {"experts", r.experts},            {"top_k", r.top_k},
          {"tokens", r.tokens},              {"expert_parallel", r.expert_parallel},
          {"capacity_factor", r.capacity_factor}, {"capacity", r.capacity},
          {"dropped", r.dropped},            {"counts", r.counts},
          {"rank_rows", r.rank_rows},        {"busiest_rank", r.busiest_rank},
          {"local_experts", r.local_experts()}, {"mean_rows", mean_rows(r)},
          {"max_over_mean", r.max_over_mean()}, {"empty_experts", r.empty_experts()}};
}

json config_json(const ModelConfig& c) {
  json j = {{"name", c.name},
            {"gated_mlp", c.gated_mlp},
            {"vocab_size_padded", padded_vocab(c)},
            {"source", c.source},
            {"notes", c.notes},
            {"micro_batch_from", c.micro_batch_from},
            {"sequence_from", c.sequence_from},
            {"tokens", c.tokens()}};
  model_fields_json(j, c, "config");
  // What the plan used: the defaults resolved.
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.head_dimension();
  return j;
}

json interval_json(const std::optional<Interval>& iv) {
  if (!iv) return nullptr;
  return {{"median", iv->median}, {"lo", iv->lo}, {"hi", iv->hi}, {"n", iv->n}};
}

// --repeats: medians and 95% intervals of the per-layer totals, full model and speedups.
json intervals_json(const RunResult& r, const ModeSummary& ms, const RepeatSummary& rs) {
  json pl = json::object(), full = json::object(), sp = json::array();
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    pl[to_string(r.precisions[p])] = interval_json(rs.per_layer_total[p]);
    full[to_string(r.precisions[p])] = interval_json(rs.full_model[p]);
  }
  for (size_t i = 0; i < rs.speedups.size() && i < ms.speedups.size(); ++i)
    sp.push_back({{"name", ms.speedups[i].name()}, {"interval", interval_json(rs.speedups[i])}});
  return {{"per_layer_total", pl}, {"full_model", full}, {"speedups", sp}};
}

// Written: /3 (records). Read: /3, /2 (grouped GEMMs, experts, MLA; cells inside each GEMM) and
// /1 (files from before MoE, all dense): docs/json-schema.md says how they map.
constexpr const char* kSchema = "gemmscope.result/3";
constexpr const char* kSchemaV2 = "gemmscope.result/2";
constexpr const char* kSchemaV1 = "gemmscope.result/1";

// The model-field table's rows of `section` from its object `obj` (`where` names it): as written,
// range left to validate().
void read_model_fields(const json& obj, ModelConfig& c, std::string_view section, const std::string& where) {
  for (const ModelField& f : model_fields())
    if (section == f.section)
      f.value(c) = f.required ? need<int64_t>(obj, f.key, where) : get_or<int64_t>(obj, f.key, where, f.absent);
}

// "X.Y" as written by to_json (device versions, compute capability): parse_version_xy, the
// parser gpus.json uses too (sscanf's %d overflowed on "3000000.0", and major * 1000 an int).
std::pair<int, int> version_parts(const std::string& s, const std::string& what, int max_major, int max_minor) {
  return parse_version_xy(s, what, max_major, max_minor);
}

bool is_positive_int(const json& v) {
  return (v.is_number_unsigned() || v.is_number_integer()) && v.get<int64_t>() > 0;
}

// ---- the document's parts, each one description for both directions ---------------------------

// CUDA versions as 1000 * major + 10 * minor (12080 is "12.8"), written "12.8".
Field<DeviceInfo> cuda_version(const char* key, int DeviceInfo::*m) {
  return custom<DeviceInfo>(
      key, [=](const DeviceInfo& d, json& o) { o[key] = fmt::format("{}.{}", d.*m / 1000, (d.*m % 1000) / 10); },
      [=](const json& o, DeviceInfo& d, const std::string& where) {
        const auto [a, b] = version_parts(get_or<std::string>(o, key, where, "0.0"), fmt::format("{}.{}", where, key),
                                          999999, 99);
        d.*m = a * 1000 + b * 10;
      });
}

const Fields<DeviceInfo>& device_fields() {
  static const Fields<DeviceInfo> t = {
      custom<DeviceInfo>(
          "name", [](const DeviceInfo& d, json& o) { o["name"] = d.name; },
          [](const json& o, DeviceInfo& d, const std::string& where) { d.name = need<std::string>(o, "name", where); }),
      custom<DeviceInfo>(
          "compute_capability",
          [](const DeviceInfo& d, json& o) { o["compute_capability"] = fmt::format("{}.{}", d.cc_major, d.cc_minor); },
          [](const json& o, DeviceInfo& d, const std::string& where) {
            std::tie(d.cc_major, d.cc_minor) = version_parts(get_or<std::string>(o, "compute_capability", where, "0.0"),
                                                             where + ".compute_capability", 99, 99);
          }),
      integer<DeviceInfo>("sm_count", [](auto& d) -> auto& { return d.sm_count; }),
      integer<DeviceInfo>("memory_bytes", [](auto& d) -> auto& { return d.memory_bytes; }),
      integer<DeviceInfo>("l2_bytes", [](auto& d) -> auto& { return d.l2_bytes; }),
      cuda_version("driver_version", &DeviceInfo::driver_version),
      cuda_version("runtime_version", &DeviceInfo::runtime_version),
      integer<DeviceInfo>("cublaslt_version", [](auto& d) -> auto& { return d.cublaslt_version; }),
  };
  return t;
}

// The "step_context" object of files written before the step context was records (read only:
// core/results/step_context_records.hpp files it as records): what ran between timed iterations,
// per layer (docs/step-context.md), its own figures described as the records' values are.
const Fields<StepContextInfo>& legacy_step_context_fields() {
  static const Fields<StepContextInfo> t = [] {
    constexpr Range kStepMs{0.0, kMaxStepOtherMs, " ms"};
    const auto unwritten = [](const StepContextInfo&, json&) {};
    Fields<StepContextInfo> f = step_context_value_fields();
    const Fields<StepContextInfo> rest = {
        number<StepContextInfo>("other_ms", [](auto& c) -> auto& { return c.other_ms; }, kStepMs),
        number<StepContextInfo>("move_ms", [](auto& c) -> auto& { return c.move_ms; }, kStepMs),
        flag<StepContextInfo>("other_from_user", [](auto& c) -> auto& { return c.other_from_user; }),
        number<StepContextInfo>("cast_ms", [](auto& c) -> auto& { return c.cast_ms; }, kStepMs),
        number<StepContextInfo>("attention_fwd_ms", [](auto& c) -> auto& { return c.attention_fwd_ms; }, kStepMs),
        number<StepContextInfo>("attention_bwd_ms", [](auto& c) -> auto& { return c.attention_bwd_ms; }, kStepMs),
        flag<StepContextInfo>("attention_measured", [](auto& c) -> auto& { return c.attention_measured; }),
        text<StepContextInfo>("attention_source", [](auto& c) -> auto& { return c.attention_source; }, {}, 400),
        text<StepContextInfo>("attention_shape", [](auto& c) -> auto& { return c.attention_shape; }, {}, 200),
    };
    f.insert(f.end(), rest.begin(), rest.end());
    for (Field<StepContextInfo>& x : f) x.write = unwritten;
    return f;
  }();
  return t;
}

// An older file's object o["step_context"] (absent or null: none), read at `where`.
std::optional<StepContextInfo> legacy_step_context(const json& o, const std::string& where) {
  const json* sc = find(o, "step_context");
  if (!sc || sc->is_null()) return std::nullopt;
  if (!sc->is_object()) throw UsageError(where + " must be an object");
  StepContextInfo c;
  read_fields(legacy_step_context_fields(), *sc, c, where);
  return c;
}

// One process of a run with several (RunResult::ranks).
const Fields<RankInfo>& rank_fields() {
  static const Fields<RankInfo> t = {
      text<RankInfo>("label", [](auto& x) -> auto& { return x.label; }, {}, 200),
      text<RankInfo>("host", [](auto& x) -> auto& { return x.host; }, {}, 200),
      integer<RankInfo>("rank", [](auto& x) -> auto& { return x.rank; }),
      text<RankInfo>("created", [](auto& x) -> auto& { return x.created; }),
      object<RankInfo>("device", [](auto& x) -> auto& { return x.device; }, device_fields()),
      custom<RankInfo>(
          "notes", [](const RankInfo& x, json& o) { o["notes"] = x.notes; },
          [](const json& o, RankInfo& x, const std::string& where) {
            if (const json* n = find(o, "notes"); n && !n->is_null()) x.notes = string_list(o, "notes", where);
          }),
  };
  return t;
}
constexpr size_t kMaxRanks = 65536;

// A GEMM of the plan (the items of the GEMM kinds): written with what readers derive from it
// (label, FLOPs, bytes per precision), read back with the plan builder's rules.
json gemm_json(const Gemm& x, size_t id, const RecipeOptions& o) {
  json jg = {{"id", id},
             {"pass", to_string(x.pass)},
             {"op", to_string(x.op)},
             {"label", x.label()},
             {"scope", to_string(x.scope)},
             {"m", x.m},
             {"k", x.k},
             {"n", x.n},
             {"flops", x.flops()},
             {"a", {{"role", to_string(x.a.role)}, {"k_major", x.a.k_major}}},
             {"b", {{"role", to_string(x.b.role)}, {"k_major", x.b.k_major}}}};
  if (x.grouped()) {
    jg["group_dim"] = to_string(x.group_dim);
    jg["group"] = x.group;  // real rows per expert along group_dim; they sum to m or k
  }
  json bytes;
  for (Precision p : kAllPrecisions) {
    const Recipe rec = make_recipe(p, x, o);
    const ByteCount bc = byte_count(rec, x);
    const ByteCount sh = byte_count(rec, x, operand_work(Mode::Training, x, Side::Left, rec, o),
                                    operand_work(Mode::Training, x, Side::Right, rec, o));
    bytes[to_string(p)] = {{"gemm", bc.gemm}, {"quantize", bc.quantize}, {"quantize_shared", sh.quantize}};
  }
  jg["bytes"] = bytes;
  return jg;
}

Gemm read_gemm(const json& g, const std::string& where) {
  if (!g.is_object()) throw UsageError(where + " is not an object");
  const auto text_of = [&](const char* key) {
    const json* v = find(g, key);
    if (!v || !v->is_string()) throw UsageError(fmt::format("{}: \"{}\" must be a string", where, key));
    return v->get<std::string>();
  };
  const auto dim = [&](const char* key) {
    const json* v = find(g, key);
    if (!v || !is_positive_int(*v)) throw UsageError(fmt::format("{}: \"{}\" must be a positive integer", where, key));
    // The plan builders' limit: byte and FLOP counts multiply dimensions in int64.
    constexpr int64_t kMaxGemmDim = int64_t{1} << 24;
    if (v->get<int64_t>() > kMaxGemmDim)
      throw UsageError(fmt::format("{}: \"{}\" must be at most {}, got {}", where, key, kMaxGemmDim, v->get<int64_t>()));
    return v->get<int64_t>();
  };
  const auto operand = [&](const char* side, Operand dflt) {
    const json* o = find(g, side);
    if (!o) return dflt;
    const std::string role = need<std::string>(*o, "role", fmt::format("{}.{}", where, side));
    return Operand{parsed_at(where, role, role_from_string), get_or<bool>(*o, "k_major", fmt::format("{}.{}", where, side), true)};
  };
  const std::string pass = text_of("pass"), op = text_of("op");
  const int64_t m = dim("m"), k = dim("k"), n = dim("n");
  Gemm x{parsed_at(where, pass, pass_from_string), parsed_at(where, op, op_from_string),
         parsed_at(where, text_of("scope"), scope_from_string), m, k, n,
         operand("a", {Role::Activation, true}), operand("b", {Role::Weight, true})};
  if (const json* gd = find(g, "group_dim"); gd && !gd->is_null()) {
    x.group_dim = parsed_at(where, as<std::string>(*gd, where + ".group_dim"), group_dim_from_string);
    const json* grp = find(g, "group");
    if (x.grouped()) {
      if (!grp || !grp->is_array() || grp->empty())
        throw UsageError(fmt::format("{}: a grouped GEMM needs \"group\", a non-empty list of per-expert sizes", where));
      if (grp->size() > static_cast<size_t>(kMaxExperts))
        throw UsageError(fmt::format("{}: \"group\" has {} sizes, more than the {} experts a model may have", where,
                                     grp->size(), kMaxExperts));
      int64_t sum = 0;
      for (size_t i = 0; i < grp->size(); ++i) {
        const int64_t v = as<int64_t>((*grp)[i], fmt::format("{}.group[{}]", where, i));
        if (v < 0) throw UsageError(fmt::format("{}.group[{}] must be >= 0, got {}", where, i, v));
        sum = checked_add(sum, v, where + ": the sum of \"group\"");
        x.group.push_back(v);
      }
      const int64_t want = x.group_dim == GroupDim::M ? x.m : x.k;
      if (sum != want)
        throw UsageError(fmt::format("{}: \"group\" sums to {}, not {} = {}", where, sum, to_string(x.group_dim), want));
    }
  }
  return x;
}

}  // namespace

json to_json(const RunResult& r) {
  json j;
  j["schema"] = kSchema;
  j["tool"] = {{"name", "gemmscope"}, {"version", GEMMSCOPE_VERSION}};
  j["created"] = r.created;
  j["kind"] = r.plan.model_mode ? "model" : "shapes";
  j["dry_run"] = r.dry_run;
  j["dry_run_requested"] = r.dry_run && r.dry_run_requested;
  j["why_not_measured"] = r.dry_run ? json(r.why_not_measured) : json(nullptr);
  j["device"] = nullptr;
  if (r.device) write_fields(device_fields(), *r.device, j["device"] = json::object());
  // The run's settings through the registry (core/run/settings.hpp); the step gap is derived.
  j["timing"] = json::object();
  settings_to_json(r, "timing", j["timing"]);
  if (r.timing.step_other_ms > 0) j["timing"]["step_gap_ms_per_gflop"] = r.timing.step_gap_ms_per_gflop;
  j["recipe_options"] = json::object();
  settings_to_json(r, "recipe_options", j["recipe_options"]);
  if (r.plan.model_mode) {
    j["step_options"] = json::object();
    settings_to_json(r, "step_options", j["step_options"]);
  }
  j["gemm_options"] = gemm_options_to_json(r.gemm_options);
  settings_to_json(r, "", j);  // "precisions", "modes", "providers"
  j["config"] = r.plan.config ? config_json(*r.plan.config) : json(nullptr);
  if (r.plan.config) moe_mla_json(j["config"], *r.plan.config);
  // The plan's GEMMs (the GEMM records' items), the other kinds' items, the ranks, the records.
  j["gemms"] = json::array();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    // As measured: an older file's Wgrad as the transposed product it timed (RunResult::wgrad_transposed).
    const Gemm& x = r.plan.gemms[g];
    j["gemms"].push_back(gemm_json(r.wgrad_transposed && x.pass == Pass::Wgrad ? transposed_wgrad(x) : x, g, r.recipe_options));
  }
  if (!r.item_names.empty()) {
    j["items"] = json::object();
    for (const auto& [kind, names] : r.item_names) j["items"][to_string(kind)] = names;
  }
  if (!r.ranks.empty()) {
    j["ranks"] = json::array();
    for (const RankInfo& x : r.ranks) {
      json o = json::object();
      write_fields(rank_fields(), x, o);
      j["ranks"].push_back(std::move(o));
    }
  }
  j["records"] = records_json(r);
  if (r.has_accuracy) {
    j["accuracy"] = {{"metric", "relative Frobenius error vs FP32 GEMM of the BF16 inputs"}, {"precisions", json::array()}};
    settings_to_json(r, "accuracy", j["accuracy"]);  // "dist"
    for (Precision p : r.accuracy_precisions) j["accuracy"]["precisions"].push_back(to_string(p));
  }
  // What the charts and readers take from one run's cells; a document of several ranks (fleet mode,
  // MPI) has each rank's cells and its own summary ("fleet", core/node/fleet.hpp) instead.
  const bool one_run = r.ranks.empty();
  if (r.plan.model_mode && !r.dry_run && one_run) {
    const std::vector<RepeatSummary> rep = summarize_repeats(r);
    json sum;
    for (size_t m = 0; m < r.modes.size(); ++m) {
      const ModeSummary s = summarize_mode(r, m);
      json pl, once, full;
      for (const char* k : {"fprop", "dgrad", "fprop_dgrad", "wgrad", "total"}) pl[k] = json::object();
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const char* name = to_string(r.precisions[p]);
        const PrecisionSums& ps = s.sums[p];
        pl["fprop"][name] = opt(ps.fprop);
        pl["dgrad"][name] = opt(ps.dgrad);
        pl["fprop_dgrad"][name] = opt(ps.fprop_dgrad);
        pl["wgrad"][name] = opt(ps.wgrad);
        pl["total"][name] = opt(ps.total);
        once[name] = opt(ps.model_once);
        full[name] = opt(ps.full_model);
      }
      json sp = json::array();
      for (const Speedup& x : s.speedups)
        sp.push_back({{"name", x.name()}, {"num", to_string(x.num)}, {"den", to_string(x.den)}, {"value", opt(x.value)}});
      sum[to_string(r.modes[m])] = {{"per_layer", pl}, {"model_once", once}, {"full_model", full}, {"speedups", sp}};
      if (r.plan.has_moe()) {
        json ml;
        for (const char* k : {"fprop", "dgrad", "wgrad", "total", "attention", "dense_mlp", "router", "routed_experts",
                              "shared_experts"})
          ml[k] = json::object();
        for (size_t p = 0; p < r.precisions.size(); ++p) {
          const char* name = to_string(r.precisions[p]);
          const PrecisionSums& ps = s.sums[p];
          ml["fprop"][name] = opt(ps.moe_fprop);
          ml["dgrad"][name] = opt(ps.moe_dgrad);
          ml["wgrad"][name] = opt(ps.moe_wgrad);
          ml["total"][name] = opt(ps.moe_total);
          ml["attention"][name] = opt(ps.attention);
          ml["dense_mlp"][name] = opt(ps.dense_mlp);
          ml["router"][name] = opt(ps.router);
          ml["routed_experts"][name] = opt(ps.routed_experts);
          ml["shared_experts"][name] = opt(ps.shared_experts);
        }
        sum[to_string(r.modes[m])]["per_moe_layer"] = ml;
      }
      if (m < rep.size()) sum[to_string(r.modes[m])]["intervals"] = intervals_json(r, s, rep[m]);
    }
    j["summary"] = sum;
  }
  if (one_run) write_totals(j, r);
  const PlanFlops f = plan_flops(r.plan);
  j["plan"] = {{"flops_per_layer", {{"fprop", f.fprop}, {"dgrad", f.dgrad}, {"wgrad", f.wgrad}, {"total", f.per_layer()}}},
               {"flops_model_once", f.model_once},
               {"flops_full_model", r.plan.model_mode ? f.full_model(r.plan.layers()) : f.per_layer()}};
  if (r.plan.has_moe()) {
    j["plan"]["flops_per_moe_layer"] = {
        {"fprop", f.moe_fprop}, {"dgrad", f.moe_dgrad}, {"wgrad", f.moe_wgrad}, {"total", f.per_moe_layer()}};
    j["plan"]["moe_layers"] = f.moe_layers;
    j["plan"]["dense_layers"] = r.plan.layers() - f.moe_layers;
  }
  if (r.plan.routing) j["plan"]["routing"] = routing_json(*r.plan.routing);
  // Rows padded for alignment in the expert up projection's Fprop, per recipe and provider
  // (core/providers/deepgemm_cells.hpp; derived from the plan, so a reader recomputes it).
  if (const std::vector<PaddingWaste> pw = padding_waste(r); !pw.empty()) {
    json arr = json::array();
    for (const PaddingWaste& w : pw)
      arr.push_back({{"provider", w.provider}, {"precision", to_string(w.precision)}, {"alignment", w.alignment},
                     {"rows", w.rows}, {"waste_rows", w.waste_rows}, {"waste_fraction", w.fraction()}});
    j["plan"]["padding_waste"] = arr;
  }
  if (r.plan.model_mode) {
    // The linear layers only: attention's own matmuls have a key of their own, never in the totals.
    j["plan"]["flops_full_model_includes_attention"] = false;
    if (one_run) j["attention_matmuls"] = attention_matmuls_json(r);
  }
  if (!r.plan.model_mode) {
    double tot = 0;
    for (const Gemm& g : r.plan.gemms) tot += g.flops();
    j["plan"]["flops_full_model"] = tot;
  }
  if (const ClockSummary cs = summarize_clocks(r); one_run && cs.steady_mhz) {
    json mean = json::object();
    for (size_t p = 0; p < r.precisions.size(); ++p)
      mean[to_string(r.precisions[p])] = opt(cs.precision_mean_mhz[p]);
    j["clocks"] = {{"steady_sm_mhz", *cs.steady_mhz}, {"mean_sm_mhz", mean}, {"boosted_cells", cs.boosted.size()},
                   {"capped_above_cells", cs.capped_above}, {"light_above_cells", cs.light_above}};
  }
  // The step context is records (core/results/step_context_records.hpp); the step estimate per
  // layer and mode derived from it, what a user's step gets (report_step.hpp), is written for
  // readers.
  if (one_run && step_context_view(r)) {
    json est = json::object();
    for (size_t m = 0; m < r.modes.size(); ++m) {
      const std::vector<StepEstimate> e = step_estimates(r, m);
      json per = json::object();
      for (size_t p = 0; p < e.size(); ++p)
        per[to_string(r.precisions[p])] = {{"gemm_ms", opt(e[p].gemm_ms)}, {"attention_ms", e[p].attention_ms},
                                           {"other_ms", e[p].other_ms}, {"step_ms", opt(e[p].step_ms())}};
      est[to_string(r.modes[m])] = per;
    }
    j["step_estimate_per_layer"] = est;
  }
  if (r.step) j["step"] = step_record_json(*r.step, r);  // the whole step (core/report/step_record.hpp)
  // The parallel step or the layout search: the job and the layout (its quantities are records).
  if (r.parallel) j["parallel"] = parallel_section_json(*r.parallel);
  j["notes"] = r.notes;
  return j;
}

namespace {

RunResult read_result(const json& j, const std::string& name) {
  if (!j.is_object()) throw UsageError(fmt::format("{} is not a gemmscope result (top level is not an object)", name));
  const json* schema = find(j, "schema");
  const std::string version = schema && schema->is_string() ? schema->get<std::string>() : "";
  if (version != kSchema && version != kSchemaV2 && version != kSchemaV1)
    throw UsageError(fmt::format("{} has schema {}, expected \"{}\" (or \"{}\", \"{}\")", name,
                                 schema ? json_value_hint(*schema) : "(none)", kSchema, kSchemaV2, kSchemaV1));
  const bool records = version == kSchema;  // /1 and /2 hold the cells inside each GEMM
  const json* kind = find(j, "kind");
  const std::string kind_name = kind && kind->is_string() ? kind->get<std::string>() : "";
  if (kind_name != "model" && kind_name != "shapes")
    throw UsageError(fmt::format("{}: \"kind\" must be \"model\" or \"shapes\"", name));
  RunResult r;
  r.plan.model_mode = kind_name == "model";
  const auto top = [&](const char* key) { return fmt::format("{}: {}", name, key); };
  if (const json* v = find(j, "created")) r.created = as<std::string>(*v, top("created"));
  if (const json* v = find(j, "dry_run")) r.dry_run = as<bool>(*v, top("dry_run"));
  // Files written before these fields existed: a dry run counts as requested.
  r.dry_run_requested = r.dry_run;
  if (const json* v = find(j, "dry_run_requested")) r.dry_run_requested = as<bool>(*v, top("dry_run_requested"));
  if (const json* v = find(j, "why_not_measured"); v && !v->is_null())
    r.why_not_measured = as<std::string>(*v, top("why_not_measured"));
  if (const json* d = find(j, "device"); d && !d->is_null()) {
    const std::string where = top("device");
    if (!d->is_object()) throw UsageError(where + " must be an object or null");
    DeviceInfo di;
    read_fields(device_fields(), *d, di, where);
    r.device = di;
  }
  // The run's settings through the registry (core/run/settings.hpp): a key a file lacks takes the
  // value files written before it meant.
  {
    const json* t = find(j, "timing");
    if (t && t->is_null()) t = nullptr;
    settings_from_json(t, "timing", top("timing"), r);
    // Derived from the plan and --step-other-ms.
    if (t) r.timing.step_gap_ms_per_gflop = number_in(*t, "step_gap_ms_per_gflop", top("timing"), 0.0, {0.0, 1e9, " ms/GFLOP"});
    const json* o = find(j, "recipe_options");
    if (o && o->is_null()) o = nullptr;
    settings_from_json(o, "recipe_options", top("recipe_options"), r);
    const json* so = find(j, "step_options");
    if (so && so->is_null()) so = nullptr;
    settings_from_json(so, "step_options", top("step_options"), r);
  }
  if (const json* go = find(j, "gemm_options"); go && !go->is_null()) r.gemm_options = gemm_options_from_json(*go, top("gemm_options"));
  // "precisions", "modes" and "providers" (files without it measured with cuBLASLt only).
  settings_from_json(&j, "", name, r);
  // As the file spells them: the keys of its cells.
  const std::vector<std::string> mode_names = string_list(j, "modes", name);
  const std::vector<std::string> precision_names = string_list(j, "precisions", name);
  if (r.plan.model_mode) {
    const json* cj = find(j, "config");
    if (!cj || !cj->is_object()) throw UsageError(fmt::format("{}: model run without 'config'", name));
    const json& c = *cj;
    const std::string where = top("config");
    // Sizes as the plan builder accepts them (validate): positive (kv heads, head_dim and vocab
    // may be 0 = derived / none), at most 2^24, heads and tensor-parallel splits that divide.
    constexpr int64_t kMaxDim = int64_t{1} << 24;
    const auto size = [&](const char* key, bool required, bool allow_zero, int64_t dflt) {
      const int64_t v = required ? need<int64_t>(c, key, where) : get_or<int64_t>(c, key, where, dflt);
      if (v < 0 || (!allow_zero && v == 0) || v > kMaxDim)
        throw UsageError(fmt::format("{}.{} must be {} {}, got {}", where, key, allow_zero ? "from 0 to" : "from 1 to",
                                     kMaxDim, v));
      return v;
    };
    ModelConfig mc;
    mc.name = get_or<std::string>(c, "name", where, "custom");
    // The model-field table's sizes (core/model/model_fields.cpp). Older files have no
    // make_vocab_size_divisible_by (no padding), source or batch origin.
    for (const ModelField& f : model_fields())
      if (f.section == std::string_view("config")) f.value(mc) = size(f.key, f.required, f.allow_zero, f.absent);
    mc.gated_mlp = get_or<bool>(c, "gated_mlp", where, false);
    // The layout rules the run planned under (core/model/layout_rules.hpp) follow its step context.
    mc.layout = layout_framework(r.timing.step_context_kind);
    // The vocabulary as the file's plan has it: a file written before padding existed (no
    // "vocab_size_padded"), or before Megatron-LM's padding applied at TP 1 too, kept its vocabulary.
    if (mc.vocab_divisible_by == 0) {
      const json* vp = find(c, "vocab_size_padded");
      const int64_t written = vp && vp->is_number_integer() ? vp->get<int64_t>() : mc.vocab_size;
      if (written == mc.vocab_size && padded_vocab(mc) != mc.vocab_size) mc.vocab_divisible_by = 1;
    }
    mc.source = get_or<std::string>(c, "source", where, "");
    mc.micro_batch_from = get_or<std::string>(c, "micro_batch_from", where, "");
    mc.sequence_from = get_or<std::string>(c, "sequence_from", where, "");
    if (const json* n = find(c, "notes"); n && !n->is_null()) mc.notes = string_list(c, "notes", where);
    if (const json* mj = find(c, "moe"); mj && !mj->is_null()) {
      const std::string mw = where + ".moe";
      if (!mj->is_object()) throw UsageError(mw + " must be an object");
      MoeConfig& m = mc.moe;
      read_model_fields(*mj, mc, "config.moe", mw);
      m.sparse_step = get_or<int64_t>(*mj, "sparse_step", mw, 1);
      if (const json* dl = find(*mj, "dense_layer_list"); dl && dl->is_array())
      {
        if (dl->size() > static_cast<size_t>(kMaxLayers))
          throw UsageError(fmt::format("{}.dense_layer_list has {} items, more than the {} layers a model may have", mw,
                                       dl->size(), kMaxLayers));
        for (size_t i = 0; i < dl->size(); ++i) m.dense_layer_list.insert(as<int64_t>((*dl)[i], fmt::format("{}.dense_layer_list[{}]", mw, i)));
      }
      m.parallel_source = get_or<std::string>(*mj, "expert_parallel_source", mw, "");
      m.routing = get_or<std::string>(*mj, "routing", mw, "random");
      m.capacity_factor = get_or<double>(*mj, "capacity_factor", mw, 0.0);
    }
    if (const json* aj = find(c, "mla"); aj && !aj->is_null()) {
      const std::string aw = where + ".mla";
      if (!aj->is_object()) throw UsageError(aw + " must be an object");
      read_model_fields(*aj, mc, "config.mla", aw);
    }
    try {
      validate(mc);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: {}", where, e.what()));
    }
    r.plan.config = mc;
  }
  const json* gemms = find(j, "gemms");
  if (!gemms || !gemms->is_array() || gemms->empty())
    throw UsageError(fmt::format("{}: \"gemms\" must be a non-empty list", name));
  for (size_t gi = 0; gi < gemms->size(); ++gi) {
    Gemm x = read_gemm((*gemms)[gi], fmt::format("{}: gemms[{}]", name, gi));
    // One Wgrad convention, N x M x K (dY^T . X: the gradient as the weight is stored; the dry run and
    // docs/measurement.md): files written before it hold the transposed product X^T . dY (K x M x N,
    // operand a the activation), the same GEMM's FLOPs and time, read as today's.
    if (x.pass == Pass::Wgrad && x.a.role == Role::Activation && x.b.role == Role::Grad) {
      x = transposed_wgrad(x);
      r.wgrad_transposed = true;
    }
    r.plan.gemms.push_back(x);
  }
  // The other axes of the records: the accuracy pass's precisions, the other kinds' items, the ranks.
  if (j.contains("accuracy") && j["accuracy"].is_object()) {
    r.has_accuracy = true;
    settings_from_json(&j["accuracy"], "accuracy", name + ": accuracy", r);  // "dist"
    for (const auto& p : string_list(j["accuracy"], "precisions", name + ": accuracy")) {
      const Precision prec = parsed_at(name + ": accuracy", p, precision_from_string);
      if (std::find(r.accuracy_precisions.begin(), r.accuracy_precisions.end(), prec) != r.accuracy_precisions.end())
        throw UsageError(fmt::format("{}: accuracy: \"precisions\" lists {} twice", name, to_string(prec)));
      r.accuracy_precisions.push_back(prec);
    }
  }
  if (const json* items = find(j, "items"); items && !items->is_null()) {
    if (!items->is_object()) throw UsageError(top("items") + " must be an object");
    for (const auto& [kname, list] : items->items()) {
      const std::string where = fmt::format("{}: items.{}", name, clip_text(kname, 80));
      const std::optional<RecordKind> k = record_kind_names().find(kname);
      if (!k || items_are_gemms(*k)) throw UsageError(where + ": not a record kind with items of its own");
      std::vector<std::string> names = string_list(*items, kname.c_str(), fmt::format("{}: items", name));
      if (names.size() > kMaxRecordItems) throw UsageError(fmt::format("{} has more than {} items", where, kMaxRecordItems));
      for (std::string& n : names) n = clip_text(n, 200);
      r.item_names[*k] = std::move(names);
    }
  }
  // An older file's step context objects by rank, filed as records once the records are read.
  std::map<uint32_t, StepContextInfo> legacy_contexts;
  if (std::optional<StepContextInfo> c = legacy_step_context(j, top("step_context"))) legacy_contexts[0] = *c;
  if (const json* ranks = find(j, "ranks"); ranks && !ranks->is_null()) {
    if (!ranks->is_array() || ranks->empty() || ranks->size() > kMaxRanks)
      throw UsageError(fmt::format("{}: \"ranks\" must be a list of 1 to {} objects", name, kMaxRanks));
    for (size_t i = 0; i < ranks->size(); ++i) {
      const std::string where = fmt::format("{}: ranks[{}]", name, i);
      if (!(*ranks)[i].is_object()) throw UsageError(where + " is not an object");
      RankInfo x;
      read_fields(rank_fields(), (*ranks)[i], x, where);
      r.ranks.push_back(std::move(x));
      if (std::optional<StepContextInfo> c = legacy_step_context((*ranks)[i], where + ".step_context")) {
        if (legacy_contexts.count(static_cast<uint32_t>(i)))
          throw UsageError(fmt::format("{}: step_context is the top level's too (rank 0's): one of the two", where));
        legacy_contexts[static_cast<uint32_t>(i)] = *c;
      }
    }
  }
  // The records: one list (/3), or the cells inside each GEMM (/1, /2).
  if (records)
    read_records(find(j, "records"), r, name);
  else
    read_legacy_cells(*gemms, r, name, mode_names, precision_names);
  if (r.dry_run) r.allocate_cells();
  if (const json* pj = find(j, "plan"); pj && pj->is_object() && r.plan.config) {
    if (const json* rj = find(*pj, "routing"); rj && rj->is_object()) {
      const std::string rw = top("plan.routing");
      Routing rt;
      rt.spec = parsed_at(rw, need<std::string>(*rj, "routing", rw), parse_routing);
      rt.seed = get_or<uint64_t>(*rj, "seed", rw, 0);
      rt.experts = need<int64_t>(*rj, "experts", rw);
      rt.top_k = need<int64_t>(*rj, "top_k", rw);
      rt.tokens = need<int64_t>(*rj, "tokens", rw);
      rt.expert_parallel = get_or<int64_t>(*rj, "expert_parallel", rw, 1);
      rt.capacity_factor = get_or<double>(*rj, "capacity_factor", rw, 0.0);
      rt.capacity = get_or<int64_t>(*rj, "capacity", rw, 0);
      rt.dropped = get_or<int64_t>(*rj, "dropped", rw, 0);
      const json* counts = find(*rj, "counts");
      if (!counts || !counts->is_array()) throw UsageError(rw + ".counts must be a list");
      if (counts->size() > static_cast<size_t>(kMaxExperts))
        throw UsageError(fmt::format("{}.counts has {} items, more than the {} experts a model may have", rw,
                                     counts->size(), kMaxExperts));
      for (size_t i = 0; i < counts->size(); ++i) rt.counts.push_back(as<int64_t>((*counts)[i], fmt::format("{}.counts[{}]", rw, i)));
      // Validated like a routing file and like what route() returns, then against the config's
      // experts (what the counts are indexed by; the rank split and the batch may be edited).
      check_routing(rt, rw);
      const ModelConfig& mc = *r.plan.config;
      if (rt.experts != mc.moe.num_experts || rt.top_k != mc.moe.top_k)
        throw UsageError(fmt::format("{}: experts {} and top_k {} do not match the config's ({}, {})", rw, rt.experts,
                                     rt.top_k, mc.moe.num_experts, mc.moe.top_k));
      const int64_t l = rt.local_experts();
      rt.rank_rows.assign(static_cast<size_t>(rt.expert_parallel), 0);
      for (int64_t e = 0; e < rt.experts; ++e) rt.rank_rows[static_cast<size_t>(e / l)] += rt.counts[static_cast<size_t>(e)];
      rt.busiest_rank = std::max_element(rt.rank_rows.begin(), rt.rank_rows.end()) - rt.rank_rows.begin();
      r.plan.routing = rt;
    }
  }
  // The step context: records; an older file's "step_context" objects (top level: rank 0; each
  // rank's) become the same records, and a file holding a rank's both ways is refused.
  if (!legacy_contexts.empty()) {
    for (const Record& rec : r.records)
      if (is_step_context_record(rec) && legacy_contexts.count(rec.key.rank))
        throw UsageError(fmt::format("{}: the step_context object of rank {} is what its records hold too: one of the "
                                     "two, not both",
                                     name, rec.key.rank));
    for (const auto& [rank, c] : legacy_contexts) add_step_context_records(r, c, rank);
  }
  check_step_context_records(r, name);
  // The whole step: timing and peak read, the rest derived from what was read above (its kernels
  // are records).
  read_step_record(find(j, "step"), name, r);
  read_parallel_section(find(j, "parallel"), top("parallel"), r);
  if (const json* notes = find(j, "notes"); notes && !notes->is_null()) {
    if (!notes->is_array()) throw UsageError(top("notes") + " must be a list of strings");
    for (size_t i = 0; i < notes->size(); ++i)
      r.notes.push_back(as<std::string>((*notes)[i], fmt::format("{}: notes[{}]", name, i)));
  }
  // Kernel checks as today's rule judges them, not as the writer's did (the LM head's BF16 kernels
  // in FP8 columns were flagged before --lm-head-precision bf16 exempted them).
  if (!r.dry_run) judge_kernel_checks(r);
  if (r.wgrad_transposed) {
    const std::string note = kWgradTransposedNote;
    if (std::find(r.notes.begin(), r.notes.end(), note) == r.notes.end()) r.notes.push_back(note);
  }
  return r;
}

}  // namespace

RunResult from_json(const json& j, const std::string& path) {
  const std::string name = clip_text(path);  // every message starts with it
  try {
    return read_result(j, name);
  } catch (const json::exception& e) {
    // a value of the wrong type where the reader takes a default: "a.json: type must be number, but is string"
    throw UsageError(fmt::format("{}: {}", name, json_error_text(e)));
  }
}

json with_derived_fields(json doc, const RunResult& r) {
  // Mode names: "modes" in the reader's order, and the objects keyed by mode.
  if (const json* modes = find(doc, "modes"); modes && modes->is_array() && modes->size() == r.modes.size()) {
    const json old = *modes;
    const auto rename = [&](json* obj) {
      if (!obj || !obj->is_object()) return;
      for (size_t m = 0; m < r.modes.size(); ++m) {
        const std::string from = old[m].get<std::string>(), to = to_string(r.modes[m]);
        if (from != to && obj->contains(from) && !obj->contains(to)) {
          (*obj)[to] = std::move((*obj)[from]);
          obj->erase(from);
        }
      }
    };
    for (size_t m = 0; m < r.modes.size(); ++m) doc["modes"][m] = to_string(r.modes[m]);
    if (json* gemms = doc.contains("gemms") ? &doc["gemms"] : nullptr; gemms && gemms->is_array())
      for (json& g : *gemms) {
        if (!g.is_object()) continue;
        if (g.contains("results")) rename(&g["results"]);
        if (g.contains("provider_results") && g["provider_results"].is_object())
          for (auto& [name, pm] : g["provider_results"].items()) rename(&pm);
      }
    if (json* recs = doc.contains("records") ? &doc["records"] : nullptr; recs && recs->is_array())
      for (json& rec : *recs)
        if (rec.is_object() && rec.contains("mode") && rec["mode"].is_string())
          for (size_t m = 0; m < r.modes.size(); ++m)
            if (rec["mode"] == old[m]) {
              rec["mode"] = to_string(r.modes[m]);
              break;
            }
    if (doc.contains("summary")) rename(&doc["summary"]);
  }
  // The GEMMs' shapes and operands as the reader has them (an older file's Wgrad in today's N x M x K).
  if (json* gemms = doc.contains("gemms") ? &doc["gemms"] : nullptr;
      gemms && gemms->is_array() && gemms->size() == r.plan.gemms.size())
    for (size_t i = 0; i < r.plan.gemms.size(); ++i) {
      json& g = (*gemms)[i];
      const Gemm& x = r.plan.gemms[i];
      if (!g.is_object() || x.pass != Pass::Wgrad) continue;
      g["m"] = x.m;
      g["k"] = x.k;
      g["n"] = x.n;
      g["a"] = {{"role", to_string(x.a.role)}, {"k_major", x.a.k_major}};
      g["b"] = {{"role", to_string(x.b.role)}, {"k_major", x.b.k_major}};
    }
  doc.erase("totals");
  doc.erase("provider_totals");
  write_totals(doc, r);
  if (r.step) doc["step"] = step_record_json(*r.step, r);
  if (r.plan.routing) {
    if (!doc.contains("plan") || !doc["plan"].is_object()) doc["plan"] = json::object();
    doc["plan"]["routing"] = routing_json(*r.plan.routing);
  }
  return doc;
}

json read_json_file(const std::string& path) { return read_json_file(path, "result file"); }

std::string render_csv(const RunResult& r) {
  // The group columns describe grouped (expert) GEMMs: the grouped dimension, the number of
  // experts and the dense-equivalent time; empty for dense GEMMs. The last column is the kernel
  // provider (core/providers/provider.hpp): one row per provider of the run, in --provider order.
  std::string out = "mode,pass,op,scope,m,k,n,flops,precision,status,mean_ms,median_ms,min_ms,max_ms,stdev_ms,iters,tflops,reason,"
                    "group_dim,groups,dense_equiv_ms,provider\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p)
        for (size_t v = 0; v < r.providers.size(); ++v) {
          const Gemm& x = r.plan.gemms[g];
          const Cell& c = r.provider_cell(v, m, g, p);
          out += fmt::format("{},{},{},{},{},{},{},{:.0f},{},", to_string(r.modes[m]), to_string(x.pass), to_string(x.op),
                             to_string(x.scope), x.m, x.k, x.n, x.flops(), to_string(r.precisions[p]));
          const std::string grouped =
              x.grouped() ? fmt::format("{},{},{}", to_string(x.group_dim), x.group.size(),
                                        c.dense_equiv_ms ? fmt::format("{:.6f}", *c.dense_equiv_ms) : std::string())
                          : std::string(",,");
          if (c.ok)
            out += fmt::format("ok,{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{},{:.2f},,{},{}\n", c.stats.mean_ms,
                               c.stats.median_ms, c.stats.min_ms, c.stats.max_ms, c.stats.stdev_ms, c.stats.iters,
                               tflops(x, c.stats.mean_ms), grouped, r.providers[v]);
          else
            out += fmt::format("n/a,,,,,,,,{},{},{}\n", quote(c.reason), grouped, r.providers[v]);
        }
  return out;
}

}  // namespace gs

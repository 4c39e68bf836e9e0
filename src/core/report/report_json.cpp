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
#include "core/io/output_paths.hpp"
#include "core/model/model_fields.hpp"
#include "core/report/report.hpp"

#include "core/results/clocks.hpp"
#include "core/providers/provider.hpp"
#include "core/run/settings.hpp"
#include "core/results/repeats.hpp"
#include "core/run/step_context.hpp"
#include "core/report/report_step.hpp"
#include "core/report/report_attention.hpp"
#include "core/report/step_record.hpp"

namespace gs {

using nlohmann::json;

namespace {

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
            {"vocab_size_padded", c.padded_vocab()},
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

constexpr size_t kMaxRepeats = 1000;  // --repeats' range; also what a result file may hold

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

json cell_json(const Cell& c, const Gemm& g) {
  if (!c.ok) return {{"status", "n/a"}, {"reason", c.reason}};
  json j = {{"status", "ok"},          {"mean_ms", c.stats.mean_ms},   {"median_ms", c.stats.median_ms},
            {"min_ms", c.stats.min_ms}, {"max_ms", c.stats.max_ms},     {"stdev_ms", c.stats.stdev_ms},
            {"iters", c.stats.iters},   {"tflops", tflops(g, c.stats.mean_ms)}};
  if (c.clock) {
    j["clock"] = {{"sm_mhz", c.clock->sm_mhz}, {"max_sm_mhz", c.clock->max_sm_mhz}, {"reasons", c.clock->reasons}};
    if (c.clock->temp_c) j["clock"]["temp_c"] = *c.clock->temp_c;
    if (c.clock->power_w) j["clock"]["power_w"] = *c.clock->power_w;
  }
  if (c.dense_equiv_ms) {
    j["dense_equiv_ms"] = *c.dense_equiv_ms;
    j["grouping_efficiency"] = *c.dense_equiv_ms / c.stats.mean_ms;
  }
  if (!c.repeat_ms.empty()) j["repeat_ms"] = c.repeat_ms;
  if (c.gate_timed_out) j["gate_timed_out"] = true;
  if (c.band) {
    j["predicted"] = true;
    j["low_ms"] = c.band->low_ms;
    j["high_ms"] = c.band->high_ms;
  }
  kernels_to_json(c.kernels, j);
  return j;
}

// Written: /2 (grouped GEMMs, experts, MLA). Read: /2 and /1 (files from before MoE, all dense).
constexpr const char* kSchema = "gemmscope.result/2";
constexpr const char* kSchemaV1 = "gemmscope.result/1";

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_text(const json::exception& e) {
  std::string msg = e.what();
  const auto p = msg.find("] ");
  return p == std::string::npos ? msg : msg.substr(p + 2);
}

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// The value `v` as a T, or a UsageError "{what} must be ...": `what` names the document and the
// field ("a.json: timing.iters"). Integers must be JSON integers (not 3.0) inside T's range;
// numbers are finite (the parser already refuses numbers that overflow a double).
template <class T>
T as(const json& v, const std::string& what) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw UsageError(fmt::format("{} must be a string", what));
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw UsageError(fmt::format("{} must be true or false", what));
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    const auto bad = [&] {
      return UsageError(fmt::format("{} must be an integer from {} to {}, got {}", what, std::numeric_limits<T>::min(),
                                    std::numeric_limits<T>::max(), json_value_hint(v)));
    };
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw bad();
      return static_cast<T>(x);
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x < 0 ? (std::is_unsigned_v<T> || x < static_cast<int64_t>(std::numeric_limits<T>::min()))
                : static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        throw bad();
      return static_cast<T>(x);
    }
    throw bad();
  } else {
    static_assert(std::is_same_v<T, double>);
    // The parser refuses numbers that overflow a double; a document built in memory may hold
    // NaN or infinity, which no field means.
    if (!v.is_number()) throw UsageError(fmt::format("{} must be a number", what));
    if (!std::isfinite(v.get<double>())) throw UsageError(fmt::format("{} must be a finite number", what));
    return v.get<double>();
  }
}

// obj[key] as a T (see as<T>); `where` names the document and the object: "a.json: config".
template <class T>
T need(const json& obj, const char* key, const std::string& where) {
  const json* v = find(obj, key);
  if (!v) throw UsageError(fmt::format("{} has no '{}'", where, key));
  return as<T>(*v, fmt::format("{}.{}", where, key));
}

// obj[key] as a T, or `dflt` when obj has no such key.
template <class T>
T get_or(const json& obj, const char* key, const std::string& where, T dflt) {
  const json* v = find(obj, key);
  return v ? as<T>(*v, fmt::format("{}.{}", where, key)) : dflt;
}

// The model-field table's rows of `section` from its object `obj` (`where` names it): as written,
// range left to validate().
void read_model_fields(const json& obj, ModelConfig& c, std::string_view section, const std::string& where) {
  for (const ModelField& f : model_fields())
    if (section == f.section)
      f.value(c) = f.required ? need<int64_t>(obj, f.key, where) : get_or<int64_t>(obj, f.key, where, f.absent);
}

// The strings of list `key`; it may be empty (an --accuracy-only run has no modes).
std::vector<std::string> string_list(const json& j, const char* key, const std::string& name) {
  const json* v = find(j, key);
  const auto bad = [&] { return UsageError(fmt::format("{}: \"{}\" must be a list of strings", name, key)); };
  if (!v || !v->is_array()) throw bad();
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad();
    out.push_back(s.get<std::string>());
  }
  return out;
}

// obj[key] (or `dflt` when absent) as a number inside [lo, hi]: times and other measured values,
// where a value like 5e-324 ms or 1e308 ms is not a measurement (a ratio of two of them is inf
// or nan, and every verdict on it would be wrong).
double number_in(const json& obj, const char* key, const std::string& where, double dflt, double lo, double hi,
                 const char* unit) {
  const std::string what = fmt::format("{}.{}", where, key);
  const double v = get_or<double>(obj, key, where, dflt);
  if (!(v >= lo && v <= hi))
    throw UsageError(fmt::format("{} must be from {:g} to {:g}{}, got {}", what, lo, hi, unit, json(v).dump()));
  return v;
}

// Times in a result, in milliseconds: 1 ps (far below any kernel, but above the denormals whose
// ratios overflow) to about 11.6 days.
constexpr double kMinMs = 1e-9, kMaxMs = 1e9;

// "X.Y" as written by to_json (device versions, compute capability): parse_version_xy, the
// parser gpus.json uses too (sscanf's %d overflowed on "3000000.0", and major * 1000 an int).
std::pair<int, int> version_parts(const std::string& s, const std::string& what, int max_major, int max_minor) {
  return parse_version_xy(s, what, max_major, max_minor);
}

bool is_positive_int(const json& v) {
  return (v.is_number_unsigned() || v.is_number_integer()) && v.get<int64_t>() > 0;
}

// One timing cell; `where` names it ("a.json: gemms[2].results.training.BF16").
Cell read_cell(const json& c, const std::string& where) {
  const json* status = find(c, "status");
  const std::string s = status && status->is_string() ? status->get<std::string>() : "";
  if (s != "ok" && s != "n/a") throw UsageError(where + ": a cell must be an object with status \"ok\" or \"n/a\"");
  if (s == "n/a") return Cell::na(get_or<std::string>(c, "reason", where, "n/a"));
  const json* mean = find(c, "mean_ms");
  if (!mean || !mean->is_number() || !std::isfinite(mean->get<double>()) || !(mean->get<double>() > 0))
    throw UsageError(where + ": status \"ok\" needs a positive number mean_ms");
  Stats st;
  st.mean_ms = number_in(c, "mean_ms", where, 0, kMinMs, kMaxMs, " ms");
  st.median_ms = number_in(c, "median_ms", where, st.mean_ms, kMinMs, kMaxMs, " ms");
  st.min_ms = number_in(c, "min_ms", where, st.mean_ms, kMinMs, kMaxMs, " ms");
  st.max_ms = number_in(c, "max_ms", where, st.mean_ms, kMinMs, kMaxMs, " ms");
  st.stdev_ms = number_in(c, "stdev_ms", where, 0.0, 0.0, kMaxMs, " ms");
  st.iters = get_or<int>(c, "iters", where, 0);
  Cell cell = Cell::measured(st);
  if (const json* de = find(c, "dense_equiv_ms"); de && !de->is_null()) cell.dense_equiv_ms = as<double>(*de, where + ".dense_equiv_ms");
  cell.gate_timed_out = get_or<bool>(c, "gate_timed_out", where, false);
  if (const json* rep = find(c, "repeat_ms"); rep && !rep->is_null()) {
    if (!rep->is_array() || rep->size() > kMaxRepeats)
      throw UsageError(fmt::format("{}.repeat_ms must be a list of at most {} times", where, kMaxRepeats));
    for (const json& x : *rep) {
      // The bounds of mean_ms: a denormal time would make interval ratios infinite.
      if (!x.is_number() || !(x.get<double>() >= kMinMs && x.get<double>() <= kMaxMs))
        throw UsageError(fmt::format("{}.repeat_ms must hold times from {:g} to {:g} ms", where, kMinMs, kMaxMs));
      cell.repeat_ms.push_back(x.get<double>());
    }
  }
  if (const json* ck = find(c, "clock"); ck && ck->is_object()) {
    const std::string cw = where + ".clock";
    ClockSample cs;
    cs.sm_mhz = get_or<int>(*ck, "sm_mhz", cw, 0);
    cs.max_sm_mhz = get_or<int>(*ck, "max_sm_mhz", cw, 0);
    cs.reasons = get_or<uint64_t>(*ck, "reasons", cw, 0);
    if (find(*ck, "temp_c")) cs.temp_c = static_cast<int>(number_in(*ck, "temp_c", cw, 0, -50, 200, " C"));
    if (find(*ck, "power_w")) cs.power_w = number_in(*ck, "power_w", cw, 0, 0, 100000, " W");
    cell.clock = cs;
  }
  // A predicted cell's band (low_ms <= mean_ms <= high_ms; min_ms / max_ms hold it too, and stand
  // in for a file without low_ms / high_ms).
  if (const json* pr = find(c, "predicted"); pr && !pr->is_null()) {
    if (!pr->is_boolean()) throw UsageError(where + ".predicted must be true or false");
    if (pr->get<bool>()) {
      TimeBand b;
      b.low_ms = number_in(c, "low_ms", where, st.min_ms, kMinMs, kMaxMs, " ms");
      b.high_ms = number_in(c, "high_ms", where, st.max_ms, kMinMs, kMaxMs, " ms");
      if (!b.contains(st.mean_ms))
        throw UsageError(fmt::format("{}: a predicted cell's band low_ms..high_ms ({}..{}) must hold its mean_ms ({})",
                                     where, b.low_ms, b.high_ms, st.mean_ms));
      cell.band = b;
    }
  }
  cell.kernels = kernels_from_json(c, where);
  return cell;
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
  if (r.device) {
    const DeviceInfo& d = *r.device;
    j["device"] = {{"name", d.name},
                   {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                   {"sm_count", d.sm_count},
                   {"memory_bytes", d.memory_bytes},
                   {"l2_bytes", d.l2_bytes},
                   {"driver_version", fmt::format("{}.{}", d.driver_version / 1000, (d.driver_version % 1000) / 10)},
                   {"runtime_version", fmt::format("{}.{}", d.runtime_version / 1000, (d.runtime_version % 1000) / 10)},
                   {"cublaslt_version", d.cublaslt_version}};
  } else {
    j["device"] = nullptr;
  }
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
  const RecipeOptions& o = r.recipe_options;
  j["gemm_options"] = gemm_options_to_json(r.gemm_options);
  settings_to_json(r, "", j);  // "precisions", "modes", "providers"
  j["config"] = r.plan.config ? config_json(*r.plan.config) : json(nullptr);
  if (r.plan.config) moe_mla_json(j["config"], *r.plan.config);
  j["gemms"] = json::array();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    json jg = {{"id", g},
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
    if (!r.dry_run) {
      json res;
      for (size_t m = 0; m < r.modes.size(); ++m) {
        json jm = json::object();
        for (size_t p = 0; p < r.precisions.size(); ++p) jm[to_string(r.precisions[p])] = cell_json(r.cell(m, g, p), x);
        res[to_string(r.modes[m])] = jm;
      }
      jg["results"] = res;
      // providers[1..] (core/providers/provider.hpp): {"cutlass": {mode: {precision: cell}}}.
      if (r.providers.size() > 1) {
        json pr = json::object();
        for (size_t v = 1; v < r.providers.size(); ++v) {
          json pm = json::object();
          for (size_t m = 0; m < r.modes.size(); ++m) {
            json jm = json::object();
            for (size_t p = 0; p < r.precisions.size(); ++p)
              jm[to_string(r.precisions[p])] = cell_json(r.provider_cell(v, m, g, p), x);
            pm[to_string(r.modes[m])] = jm;
          }
          pr[r.providers[v]] = pm;
        }
        jg["provider_results"] = pr;
      }
    }
    if (r.has_accuracy) {
      json acc = json::object();
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const AccuracyCell& c = r.accuracy[g][p];
        acc[to_string(r.accuracy_precisions[p])] =
            c.ok ? json{{"status", "ok"}, {"rel_error", c.rel_error}, {"emulated", c.emulated}}
                 : json{{"status", "n/a"}, {"reason", c.reason}};
      }
      jg["accuracy"] = acc;
    }
    j["gemms"].push_back(jg);
  }
  if (r.has_accuracy) {
    j["accuracy"] = {{"metric", "relative Frobenius error vs FP32 GEMM of the BF16 inputs"}, {"precisions", json::array()}};
    settings_to_json(r, "accuracy", j["accuracy"]);  // "dist"
    for (Precision p : r.accuracy_precisions) j["accuracy"]["precisions"].push_back(to_string(p));
  }
  if (r.plan.model_mode && !r.dry_run) {
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
  write_totals(j, r);
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
    j["attention_matmuls"] = attention_matmuls_json(r);
  }
  if (!r.plan.model_mode) {
    double tot = 0;
    for (const Gemm& g : r.plan.gemms) tot += g.flops();
    j["plan"]["flops_full_model"] = tot;
  }
  if (const ClockSummary cs = summarize_clocks(r); cs.steady_mhz) {
    json mean = json::object();
    for (size_t p = 0; p < r.precisions.size(); ++p)
      mean[to_string(r.precisions[p])] = opt(cs.precision_mean_mhz[p]);
    j["clocks"] = {{"steady_sm_mhz", *cs.steady_mhz}, {"mean_sm_mhz", mean}, {"boosted_cells", cs.boosted.size()},
                   {"capped_above_cells", cs.capped_above}, {"light_above_cells", cs.light_above}};
  }
  if (r.step_context) {
    const StepContextInfo& c = *r.step_context;
    json sc = {{"kind", to_string(c.kind)},
               {"framework", step_context_framework(c.kind)},
               {"stream_gb_per_s", c.stream_gb_per_s},
               {"efficiency", c.efficiency},
               {"other_ms", c.other_ms},
               {"move_ms", c.move_ms},
               {"move_gb_per_s", c.move_gb_per_s},
               {"other_from_user", c.other_from_user},
               {"cast_ms", c.cast_ms},
               {"attention_fwd_ms", c.attention_fwd_ms},
               {"attention_bwd_ms", c.attention_bwd_ms},
               {"attention_measured", c.attention_measured},
               {"attention_source", c.attention_source},
               {"attention_shape", c.attention_shape}};
    // The step estimate per layer and mode: what a user's step gets (report_step.hpp).
    json est = json::object();
    for (size_t m = 0; m < r.modes.size(); ++m) {
      const std::vector<StepEstimate> e = step_estimates(r, m);
      json per = json::object();
      for (size_t p = 0; p < e.size(); ++p)
        per[to_string(r.precisions[p])] = {{"gemm_ms", opt(e[p].gemm_ms)}, {"attention_ms", e[p].attention_ms},
                                           {"other_ms", e[p].other_ms}, {"step_ms", opt(e[p].step_ms())}};
      est[to_string(r.modes[m])] = per;
    }
    sc["step_estimate_per_layer"] = est;
    j["step_context"] = sc;
  }
  if (r.step) j["step"] = step_record_json(*r.step, r);  // the whole step (core/report/step_record.hpp)
  j["notes"] = r.notes;
  return j;
}

namespace {

RunResult read_result(const json& j, const std::string& name) {
  if (!j.is_object()) throw UsageError(fmt::format("{} is not a gemmscope result (top level is not an object)", name));
  const json* schema = find(j, "schema");
  if (!schema || !schema->is_string() || (schema->get<std::string>() != kSchema && schema->get<std::string>() != kSchemaV1))
    throw UsageError(fmt::format("{} has schema {}, expected \"{}\" (or \"{}\")", name,
                                 schema ? json_value_hint(*schema) : "(none)", kSchema, kSchemaV1));
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
    di.name = need<std::string>(*d, "name", where);
    std::tie(di.cc_major, di.cc_minor) = version_parts(get_or<std::string>(*d, "compute_capability", where, "0.0"),
                                                       where + ".compute_capability", 99, 99);
    di.sm_count = get_or<int>(*d, "sm_count", where, 0);
    di.memory_bytes = get_or<int64_t>(*d, "memory_bytes", where, 0);
    di.l2_bytes = get_or<int64_t>(*d, "l2_bytes", where, 0);
    // CUDA versions as 1000 * major + 10 * minor (12080 is "12.8").
    const auto ver = [&](const char* key) {
      const auto [a, b] = version_parts(get_or<std::string>(*d, key, where, "0.0"), fmt::format("{}.{}", where, key),
                                        999999, 99);
      return a * 1000 + b * 10;
    };
    di.driver_version = ver("driver_version");
    di.runtime_version = ver("runtime_version");
    di.cublaslt_version = get_or<int64_t>(*d, "cublaslt_version", where, 0);
    r.device = di;
  }
  // The run's settings through the registry (core/run/settings.hpp): a key a file lacks takes the
  // value files written before it meant.
  {
    const json* t = find(j, "timing");
    if (t && t->is_null()) t = nullptr;
    settings_from_json(t, "timing", top("timing"), r);
    // Derived from the plan and --step-other-ms.
    if (t) r.timing.step_gap_ms_per_gflop = number_in(*t, "step_gap_ms_per_gflop", top("timing"), 0.0, 0.0, 1e9, " ms/GFLOP");
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
    if (!find(c, "vocab_size_padded") && mc.tensor_parallel > 1 && mc.vocab_divisible_by == 0)
      mc.vocab_divisible_by = 1;  // written before padding existed: the vocabulary as it was
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
  r.cells.assign(r.modes.size(), {});  // filled per GEMM below; a dry run gets all "not run" at the end
  r.provider_cells.assign(r.providers.size() - 1, std::vector<std::vector<std::vector<Cell>>>(r.modes.size()));
  // One mode's cells of one GEMM, in "precisions" order. Every cell in the object is checked, also
  // those of precisions the file does not list; the listed ones are read.
  const auto read_cell_row = [&](const json& cells, const std::string& where) {
    std::map<std::string, Cell> by_precision;
    for (auto it = cells.begin(); it != cells.end(); ++it)
      by_precision.emplace(it.key(), read_cell(it.value(), fmt::format("{}.{}", where, clip_text(it.key(), 80))));
    std::vector<Cell> row;
    for (const std::string& pname : precision_names) {
      const auto c = by_precision.find(pname);
      if (c == by_precision.end()) throw UsageError(fmt::format("{} has no {} cell", where, pname));
      const std::vector<double>& rep = c->second.repeat_ms;
      if (!rep.empty() && rep.size() != static_cast<size_t>(r.timing.repeats))
        throw UsageError(fmt::format("{}.{}.repeat_ms has {} times but timing.repeats is {}", where, pname, rep.size(),
                                     r.timing.repeats));
      row.push_back(c->second);
    }
    return row;
  };
  for (size_t gi = 0; gi < gemms->size(); ++gi) {
    const json& g = (*gemms)[gi];
    const std::string where = fmt::format("{}: gemms[{}]", name, gi);
    if (!g.is_object()) throw UsageError(where + " is not an object");
    const auto text = [&](const char* key) {
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
    const std::string pass = text("pass"), op = text("op");
    const int64_t m = dim("m"), k = dim("k"), n = dim("n");
    Gemm x{parsed_at(where, pass, pass_from_string), parsed_at(where, op, op_from_string),
           parsed_at(where, text("scope"), scope_from_string), m, k, n,
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
    if (!r.dry_run) {
      // One object per mode, keyed by the mode as "modes" spells it. Every cell in it is checked,
      // also those of precisions the file does not list; the listed ones are read.
      const json* res = find(g, "results");
      if (!res || (!r.modes.empty() && !res->is_object()))
        throw UsageError(fmt::format("{} has no \"results\" (not a measured run?)", where));
      for (size_t mi = 0; mi < r.modes.size(); ++mi) {
        const std::string& mname = mode_names[mi];
        const json* cells = find(*res, mname.c_str());
        if (!cells || !cells->is_object())
          throw UsageError(fmt::format("{}.results has no object for mode \"{}\"", where, mname));
        r.cells[mi].push_back(read_cell_row(*cells, where + ".results." + mname));
      }
      // providers[1..]: "provider_results" holds their cells, shaped as "results".
      if (r.providers.size() > 1) {
        const json* pr = find(g, "provider_results");
        if (!pr || !pr->is_object()) throw UsageError(fmt::format("{} has no \"provider_results\" object", where));
        for (size_t v = 1; v < r.providers.size(); ++v) {
          const std::string pw = fmt::format("{}.provider_results.{}", where, r.providers[v]);
          const json* pm = find(*pr, r.providers[v].c_str());
          if (!pm || !pm->is_object()) throw UsageError(pw + " must be an object");
          for (size_t mi = 0; mi < r.modes.size(); ++mi) {
            const json* cells = find(*pm, mode_names[mi].c_str());
            if (!cells || !cells->is_object())
              throw UsageError(fmt::format("{} has no object for mode \"{}\"", pw, mode_names[mi]));
            r.provider_cells[v - 1][mi].push_back(read_cell_row(*cells, pw + "." + mode_names[mi]));
          }
        }
      }
    }
    r.plan.gemms.push_back(x);
  }
  if (r.dry_run) r.allocate_cells();
  if (j.contains("accuracy") && j["accuracy"].is_object()) {
    r.has_accuracy = true;
    settings_from_json(&j["accuracy"], "accuracy", name + ": accuracy", r);  // "dist"
    for (const auto& p : string_list(j["accuracy"], "precisions", name + ": accuracy")) {
      const Precision prec = parsed_at(name + ": accuracy", p, precision_from_string);
      if (std::find(r.accuracy_precisions.begin(), r.accuracy_precisions.end(), prec) != r.accuracy_precisions.end())
        throw UsageError(fmt::format("{}: accuracy: \"precisions\" lists {} twice", name, to_string(prec)));
      r.accuracy_precisions.push_back(prec);
    }
    r.accuracy.assign(r.plan.gemms.size(), std::vector<AccuracyCell>(r.accuracy_precisions.size()));
    for (size_t gi = 0; gi < r.plan.gemms.size(); ++gi) {
      const json& g = (*gemms)[gi];
      const std::string where = fmt::format("{}: gemms[{}].accuracy", name, gi);
      const json* acc = find(g, "accuracy");
      if (!acc) throw UsageError(fmt::format("{}: gemms[{}] has no accuracy", name, gi));
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const json* c = find(*acc, to_string(r.accuracy_precisions[p]));
        if (!c) throw UsageError(fmt::format("{} has no {} cell", where, to_string(r.accuracy_precisions[p])));
        AccuracyCell& a = r.accuracy[gi][p];
        const std::string cw = fmt::format("{}.{}", where, to_string(r.accuracy_precisions[p]));
        if (!c->is_object()) throw UsageError(cw + " must be an object");
        if (get_or<std::string>(*c, "status", cw, "") == "ok") {
          a.ok = true;
          a.rel_error = need<double>(*c, "rel_error", cw);
          if (!(a.rel_error >= 0)) throw UsageError(fmt::format("{}.rel_error must be >= 0, got {}", cw, a.rel_error));
          a.emulated = get_or<bool>(*c, "emulated", cw, false);
        } else {
          a.reason = get_or<std::string>(*c, "reason", cw, "n/a");
        }
      }
    }
  }
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
  if (const json* sc = find(j, "step_context"); sc && !sc->is_null()) {
    const std::string where = top("step_context");
    if (!sc->is_object()) throw UsageError(where + " must be an object");
    StepContextInfo c;
    try {
      c.kind = step_context_from_string(get_or<std::string>(*sc, "kind", where, "none"));
    } catch (const UsageError&) {
      throw UsageError(where + ".kind must be one of te, eager, compile, none");
    }
    c.stream_gb_per_s = number_in(*sc, "stream_gb_per_s", where, 0.0, 0.0, 1e6, " GB/s");
    c.efficiency = number_in(*sc, "efficiency", where, 0.0, 0.0, 100.0, "");
    c.other_ms = number_in(*sc, "other_ms", where, 0.0, 0.0, kMaxStepOtherMs, " ms");
    c.move_ms = number_in(*sc, "move_ms", where, 0.0, 0.0, kMaxStepOtherMs, " ms");
    c.move_gb_per_s = number_in(*sc, "move_gb_per_s", where, 0.0, 0.0, 1e6, " GB/s");
    c.other_from_user = get_or<bool>(*sc, "other_from_user", where, false);
    c.cast_ms = number_in(*sc, "cast_ms", where, 0.0, 0.0, kMaxStepOtherMs, " ms");
    c.attention_fwd_ms = number_in(*sc, "attention_fwd_ms", where, 0.0, 0.0, kMaxStepOtherMs, " ms");
    c.attention_bwd_ms = number_in(*sc, "attention_bwd_ms", where, 0.0, 0.0, kMaxStepOtherMs, " ms");
    c.attention_measured = get_or<bool>(*sc, "attention_measured", where, false);
    c.attention_source = clip_text(get_or<std::string>(*sc, "attention_source", where, ""), 400);
    c.attention_shape = clip_text(get_or<std::string>(*sc, "attention_shape", where, ""), 200);
    r.step_context = c;
  }
  // The whole step: its kernels, timing and peak read, the rest derived from what was read above.
  read_step_record(find(j, "step"), top("step"), r);
  if (const json* notes = find(j, "notes"); notes && !notes->is_null()) {
    if (!notes->is_array()) throw UsageError(top("notes") + " must be a list of strings");
    for (size_t i = 0; i < notes->size(); ++i)
      r.notes.push_back(as<std::string>((*notes)[i], fmt::format("{}: notes[{}]", name, i)));
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
    if (doc.contains("summary")) rename(&doc["summary"]);
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

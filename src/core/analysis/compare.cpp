#include "core/analysis/compare.hpp"
#include "core/run/settings.hpp"
#include "core/providers/provider.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "core/util/error.hpp"
#include "core/report/report.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

namespace {

// What compare needs of a result besides a valid document: times.
void require_times(const RunResult& r, const std::string& name) {
  if (r.dry_run && !r.dry_run_requested && !r.why_not_measured.empty())
    throw UsageError(fmt::format("{} holds no results to compare: nothing could be measured ({})", name,
                                 clip_text(r.why_not_measured, 160)));
  if (r.dry_run) throw UsageError(fmt::format("{} is a dry run: it holds no results to compare", name));
  if (r.modes.empty()) throw UsageError(fmt::format("{}: \"modes\" must be a non-empty list of strings", name));
  if (r.precisions.empty())
    throw UsageError(fmt::format("{}: \"precisions\" must be a non-empty list of strings", name));
  if (!r.ranks.empty())  // a fleet document: `gemmscope compare` takes it rank by rank (cmd_compare.cpp)
    throw UsageError(fmt::format("{} holds {} ranks (a fleet file): compare its runs one by one", name, r.ranks.size()));
}

const char* kind_of(const RunResult& r) { return r.plan.model_mode ? "model" : "shapes"; }

template <class T>
std::vector<std::string> names(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const T& x : v) out.push_back(to_string(x));
  return out;
}

size_t index_of(const std::vector<std::string>& v, const std::string& x) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

// "fprop qkv 15872x4096x12288": what dense GEMMs are matched by. A file written before Wgrad took
// the weight's orientation reads in today's shapes (RunResult::wgrad_transposed; a note says the
// problems differ).
std::string gemm_key(const Gemm& g) { return fmt::format("{} {} {}", to_string(g.pass), to_string(g.op), g.shape()); }

// gemm_key, and a grouped GEMM's expert count: "fprop expert_up 8192x4096x28672 (8 experts)".
std::string gemm_name_of(const Gemm& g) {
  return g.grouped() ? fmt::format("{} ({} experts)", gemm_key(g), g.group.size()) : gemm_key(g);
}

// Exact match: the shape and, for grouped GEMMs, every expert's size.
std::string exact_key(const Gemm& g) {
  return g.grouped() ? fmt::format("{} {}:{}", gemm_key(g), to_string(g.group_dim), fmt::join(g.group, ",")) : gemm_key(g);
}

// A grouped GEMM under any routing: pass, op, the grouped dimension, the expert count and the two
// sizes routing does not change.
std::string grouped_key(const Gemm& g) {
  const bool along_m = g.group_dim == GroupDim::M;
  return fmt::format("{} {} {}:{} {}x{}", to_string(g.pass), to_string(g.op), to_string(g.group_dim), g.group.size(),
                     along_m ? g.k : g.m, g.n);
}

std::string group_rows(const std::vector<int64_t>& grp) {
  if (grp.empty()) return "none";
  const auto [lo, hi] = std::minmax_element(grp.begin(), grp.end());
  int64_t sum = 0;
  for (int64_t v : grp) sum += v;
  return fmt::format("{}..{} (sum {})", *lo, *hi, sum);
}

// "rows per expert 983..1071 (sum 8192) vs 900..1100 (sum 8192)", or, with the same range and
// sum, how many experts' rows differ.
std::string group_difference(const Gemm& a, const Gemm& b) {
  std::string what = fmt::format("rows per expert {} vs {}", group_rows(a.group), group_rows(b.group));
  if (group_rows(a.group) == group_rows(b.group) && a.group.size() == b.group.size()) {
    size_t n = 0;
    for (size_t e = 0; e < a.group.size(); ++e) n += a.group[e] != b.group[e];
    what += fmt::format(", {} of {} experts differ", n, a.group.size());
  }
  return what;
}

// mean_ms of a cell of providers[provider], nullopt for n/a.
std::optional<double> cell_ms(const RunResult& r, size_t mode, size_t gemm, size_t prec, size_t provider = 0) {
  const Cell& c = r.provider_cell(provider, mode, gemm, prec);
  return c.ok ? std::optional<double>(c.stats.mean_ms) : std::nullopt;
}

// The band of a predicted cell of providers[provider] (nullopt: measured, or n/a).
std::optional<Interval> cell_band(const RunResult& r, size_t mode, size_t gemm, size_t prec, size_t provider = 0) {
  const Cell& c = r.provider_cell(provider, mode, gemm, prec);
  if (!c.ok || !c.band) return std::nullopt;
  return Interval{c.stats.mean_ms, c.band->low_ms, c.band->high_ms, 0};
}

// stdev of a cell of providers[provider], 0 for n/a.
double cell_stdev(const RunResult& r, size_t mode, size_t gemm, size_t prec, size_t provider = 0) {
  const Cell& c = r.provider_cell(provider, mode, gemm, prec);
  return c.ok ? c.stats.stdev_ms : 0.0;
}

// A time compare can judge: positive and finite, and so is every ratio of two such times up to
// the reader's bounds (from_json refuses 5e-324 ms and 1e308 ms). NaN fails every comparison
// below and would read "same"; infinity would read as a regression of "+inf%": refused instead.
void check_time(std::optional<double> ms, const std::string& what, const char* side) {
  if (ms && !(std::isfinite(*ms) && *ms > 0))
    throw UsageError(fmt::format("the {} time of {} ({} ms) is not a positive finite number", side, what, *ms));
}

// What a difference is judged against: each file's spread (same unit as the values) and, when
// both files have them, the 95% intervals over repeats.
struct NoiseInput {
  double a_spread = 0, b_spread = 0;
  std::optional<Interval> a_interval, b_interval;
  std::optional<Interval> a_band, b_band;  // predicted files
};

// What a side's value may be, judged against the other side's band: its own band (a prediction),
// its 95% interval over repeats, or its value +- its spread.
Interval reach(double v, double spread, const std::optional<Interval>& interval, const std::optional<Interval>& band) {
  if (band) return *band;
  if (interval) return *interval;
  return Interval{v, v - spread, v + spread, 0};
}

// One compared value. `higher_is_better`: speedups (B's lower speedup is the regression).
CompareCell make_cell(const std::string& prec, std::optional<double> a, std::optional<double> b, double t,
                      const std::string& what, const NoiseInput& noise = {}, bool higher_is_better = false) {
  check_time(a, what + " " + prec, "A");
  check_time(b, what + " " + prec, "B");
  CompareCell c;
  c.precision = prec;
  c.a_ms = a;
  c.b_ms = b;
  c.a_spread = noise.a_spread;
  c.b_spread = noise.b_spread;
  c.a_interval = noise.a_interval;
  c.b_interval = noise.b_interval;
  c.a_band = noise.a_band;
  c.b_band = noise.b_band;
  if (a && b) {
    c.ratio = *b / *a;
    if (!std::isfinite(*c.ratio) || !(*c.ratio > 0))
      throw UsageError(fmt::format("the ratio B/A of {} {} ({} / {} ms) is not a finite number", what, prec, *b, *a));
    const bool up = *c.ratio > 1.0 + t, down = *a / *b > 1.0 + t;  // B larger / A larger, beyond t
    const bool worse = higher_is_better ? down : up, better = higher_is_better ? up : down;
    c.noise = c.a_interval && c.b_interval ? NoiseBasis::Intervals : NoiseBasis::Spread;
    if (c.a_band || c.b_band) {
      // A prediction: inside its band is never flagged; outside it, the threshold decides.
      c.noise = NoiseBasis::Band;
      c.within_noise = reach(*a, c.a_spread, c.a_interval, c.a_band).overlaps(reach(*b, c.b_spread, c.b_interval, c.b_band));
    } else if (worse || better)
      c.within_noise = c.noise == NoiseBasis::Intervals ? c.a_interval->overlaps(*c.b_interval)
                                                        : std::abs(*b - *a) <= c.a_spread + c.b_spread;
    if (c.within_noise)
      c.verdict = Verdict::Same;
    else if (worse)
      c.verdict = Verdict::Regression;
    else if (better)
      c.verdict = Verdict::Improvement;
    else
      c.verdict = Verdict::Same;
  } else if (a && !b) {
    c.verdict = Verdict::Regression;
  } else if (!a && b) {
    c.verdict = Verdict::Improvement;
  } else {
    c.verdict = Verdict::BothNA;
  }
  return c;
}

// A total of a model run: its value in summarize_mode's sums, and how much each GEMM counts in it
// (0: not at all; the full model counts a layer GEMM once per layer).
struct TotalKind {
  std::string what;
  std::optional<double> (*get)(const PrecisionSums&);
  double (*weight)(const Plan&, const Gemm&);
};

bool is_layer(const Gemm& g, Scope only) { return g.scope == Scope::Layer || g.scope == only; }

const TotalKind kDenseLayer{"per-layer total", [](const PrecisionSums& p) { return p.total; },
                            [](const Plan&, const Gemm& g) { return is_layer(g, Scope::DenseLayer) ? 1.0 : 0.0; }};
const TotalKind kMoeLayer{"MoE-layer total", [](const PrecisionSums& p) { return p.moe_total; },
                          [](const Plan&, const Gemm& g) { return is_layer(g, Scope::MoeLayer) ? 1.0 : 0.0; }};
const TotalKind kRoutedExperts{"MoE layer: routed experts", [](const PrecisionSums& p) { return p.routed_experts; },
                               [](const Plan&, const Gemm& g) {
                                 return g.scope != Scope::Model && (g.op == Op::ExpertUp || g.op == Op::ExpertDown) ? 1.0
                                                                                                                    : 0.0;
                               }};
const TotalKind kFullModel{"full model", [](const PrecisionSums& p) { return p.full_model; },
                           [](const Plan& plan, const Gemm& g) {
                             switch (g.scope) {
                               case Scope::Layer: return static_cast<double>(plan.layers());
                               case Scope::DenseLayer: return static_cast<double>(plan.dense_layers());
                               case Scope::MoeLayer: return static_cast<double>(plan.moe_layers());
                               case Scope::Model: return 1.0;
                               case Scope::Shape: return 0.0;
                             }
                             return 0.0;
                           }};

// The spread of a total: the root-sum-square of the cells' stdevs, each weighted as the total
// weights its cell (n/a cells contribute nothing; the total is n/a then anyway).
double total_spread(const RunResult& r, size_t mode, size_t prec, const TotalKind& k, size_t provider = 0) {
  double ss = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const double w = k.weight(r.plan, r.plan.gemms[g]);
    if (w == 0) continue;
    const Cell& c = r.provider_cell(provider, mode, g, prec);
    if (c.ok) ss += (w * c.stats.stdev_ms) * (w * c.stats.stdev_ms);
  }
  return std::sqrt(ss);
}

// The band of a total of a predicted file: the cells' band ends summed over the same GEMMs
// (sum_precision, as the total), fully correlated as predict adds them. nullopt for a measured
// file or when a cell is n/a.
std::optional<Interval> total_band(const RunResult& r, size_t mode, size_t prec, const TotalKind& k) {
  if (!r.predicted()) return std::nullopt;
  const auto end = [&](double TimeBand::*f) {
    return k.get(sum_precision(r.plan, [&](size_t g) -> std::optional<double> {
      const Cell& c = r.cell(mode, g, prec);
      return c.ok && c.band ? std::optional<double>((*c.band).*f) : std::nullopt;
    }));
  };
  const auto v = k.get(summarize_mode(r, mode).sums.at(prec));
  const auto lo = end(&TimeBand::low_ms), hi = end(&TimeBand::high_ms);
  if (!v || !lo || !hi) return std::nullopt;
  return Interval{*v, *lo, *hi, 0};
}

// The band of a predicted file's speedup num/den (den time / num time) of the full model:
// [den low / num high, den high / num low].
std::optional<Interval> speedup_band(const RunResult& r, size_t mode, const Speedup& sp,
                                     const std::vector<std::string>& precs) {
  if (!sp.value) return std::nullopt;
  const auto bn = total_band(r, mode, index_of(precs, to_string(sp.num)), kFullModel);
  const auto bd = total_band(r, mode, index_of(precs, to_string(sp.den)), kFullModel);
  if (!bn || !bd || !(bn->lo > 0) || !(bn->hi > 0)) return std::nullopt;
  return Interval{*sp.value, bd->lo / bn->hi, bd->hi / bn->lo, 0};
}

// The 95% interval of a value over the repeats (repeat_summaries: [repeat][mode]); nullopt without
// repeats or when a repeat lacks the value.
template <class Get>
std::optional<Interval> repeat_interval(const std::vector<std::vector<ModeSummary>>& reps, size_t mode, Get get) {
  if (reps.empty()) return std::nullopt;
  std::vector<double> xs;
  for (const auto& rep : reps) {
    const std::optional<double> x = get(rep.at(mode));
    if (!x) return std::nullopt;
    xs.push_back(*x);
  }
  return interval95(xs);
}

std::vector<std::string> intersect(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) out.push_back(x);
  return out;
}

std::vector<std::string> minus(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string fmt_ms(double v) { return fmt::format("{:.3f}", v); }

std::string pct(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1.0) * 100.0); }

// A B/A cell: the ratio and its flag. Text marks a regression "R" and an improvement "I";
// markdown spells the flag out (`worse` / `better`: "slower" / "faster" for times, "less" / "more"
// for speedups), strong for a regression, emphasized for an improvement. Within noise: "~".
print::Cell flagged_cell(const CompareCell& c, const char* worse, const char* better) {
  std::string s;
  if (c.ratio)
    s = fmt::format("{:.3f}", *c.ratio);
  else if (c.verdict == Verdict::BothNA)
    s = "n/a";
  else if (c.a_ms)
    s = "ok->n/a";
  else
    s = "n/a->ok";
  if (c.verdict == Verdict::Regression) return print::Cell::marked(s, "R", worse, print::Style::Strong);
  if (c.verdict == Verdict::Improvement) return print::Cell::marked(s, "I", better, print::Style::Emphasis);
  return c.within_noise ? print::Cell::marked(s, "~") : print::Cell(s);
}

// A time's cell (per GEMM, totals).
print::Cell time_cell(const CompareCell& c) { return flagged_cell(c, "slower", "faster"); }

std::string describe_change(const CompareCell& c) {
  if (c.a_ms && c.b_ms) return fmt::format("{} -> {} ms ({})", fmt_ms(*c.a_ms), fmt_ms(*c.b_ms), pct(*c.ratio));
  if (c.a_ms) return fmt::format("{} ms -> n/a", fmt_ms(*c.a_ms));
  return fmt::format("n/a -> {} ms", fmt_ms(*c.b_ms));
}

std::string fmt_speedup(const std::optional<double>& v) { return v ? fmt::format("{:.3f}x", *v) : "n/a"; }

std::string describe_speedup_change(const CompareCell& c) {
  return fmt::format("{} -> {}{}", fmt_speedup(c.a_ms), fmt_speedup(c.b_ms),
                     c.ratio ? fmt::format(" ({})", pct(*c.ratio)) : std::string());
}

// What a total's or speedup's noise was judged by: "+-0.123 / +-0.130" (spreads of A / B) or
// "[20.10, 20.50] / [22.80, 23.10]" (95% intervals); `digits` after the point.
std::string noise_text(const CompareCell& c, int digits) {
  if (!c.a_ms || !c.b_ms) return "-";
  if (c.noise == NoiseBasis::Band) {
    const auto side = [&](const std::optional<Interval>& band, double spread, const std::optional<Interval>& iv) {
      if (band) return fmt::format("band [{:.{}f}, {:.{}f}]", band->lo, digits, band->hi, digits);
      if (iv) return fmt::format("[{:.{}f}, {:.{}f}]", iv->lo, digits, iv->hi, digits);
      return fmt::format("+-{:.{}f}", spread, digits);
    };
    return side(c.a_band, c.a_spread, c.a_interval) + " / " + side(c.b_band, c.b_spread, c.b_interval);
  }
  if (c.noise == NoiseBasis::Intervals)
    return fmt::format("[{:.{}f}, {:.{}f}] / [{:.{}f}, {:.{}f}]", c.a_interval->lo, digits, c.a_interval->hi, digits,
                       c.b_interval->lo, digits, c.b_interval->hi, digits);
  return fmt::format("+-{:.{}f} / +-{:.{}f}", c.a_spread, digits, c.b_spread, digits);
}

// The shape column: "8192x4096x28672", grouped GEMMs with their expert count, and a '*' when B's
// per-expert rows differ.
std::string shape_text(const CompareGemmRow& g) {
  std::string s = fmt::format("{}x{}x{}", g.m, g.k, g.n);
  if (g.experts) s += fmt::format(" ({} experts{})", g.experts, g.group_difference.empty() ? "" : "*");
  return s;
}

std::string gemm_name(const CompareGemmRow& g) { return fmt::format("{} {} {}", g.pass, g.label, shape_text(g)); }

struct Flagged {
  std::string where;  // "per-gemm FP8Current fprop QKV Proj 15872x4096x12288"
  std::string change;
};

void collect(const CompareResult& r, Verdict v, std::vector<Flagged>& out) {
  for (const CompareMode& m : r.modes) {
    for (const CompareTotalRow& t : m.totals)
      for (const CompareCell& c : t.cells)
        if (c.verdict == v) out.push_back({fmt::format("{} {} {}", m.mode, c.precision, t.what), describe_change(c)});
    for (const CompareSpeedupRow& sp : m.speedups)
      if (sp.cell.verdict == v)
        out.push_back({fmt::format("{} speedup {}", m.mode, sp.name), describe_speedup_change(sp.cell)});
    for (const CompareGemmRow& g : m.gemms)
      for (const CompareCell& c : g.cells)
        if (c.verdict == v) out.push_back({fmt::format("{} {} {}", m.mode, c.precision, gemm_name(g)), describe_change(c)});
  }
}

// Strings from the files (and their paths) are printed through printable(): a device name or a
// date cannot move the cursor or add lines.
std::string file_line(const std::string& path, const std::string& dev, const std::string& created) {
  std::string s = path.empty() ? "(in memory)" : printable(path);
  std::vector<std::string> bits;
  if (!dev.empty()) bits.push_back(printable(dev));
  if (!created.empty()) bits.push_back(printable(created));
  if (!bits.empty()) s += " (" + join(bits) + ")";
  return s;
}

// A speedup's B/A cell (its verdict already the other way round: a lower speedup in B regresses).
print::Cell speedup_cell(const CompareCell& c) { return flagged_cell(c, "less", "more"); }

std::string noise_head(const CompareMode& m) {
  if (m.totals_noise == NoiseBasis::Band) return "band / reach A / B";
  return m.totals_noise == NoiseBasis::Intervals ? "95% interval A / B" : "spread A / B";
}

std::string threshold_line(double t) {
  return fmt::format("threshold {:.1f}%: B/A > {:.3f} is a regression, B/A < {:.3f} an improvement (speedups: the "
                     "other way round); a change within noise is not flagged (~)",
                     t * 100.0, 1.0 + t, 1.0 / (1.0 + t));
}

// Which file is a prediction, and how it is judged; empty when both are measured.
std::string predicted_line(const CompareResult& r) {
  if (!r.a_predicted && !r.b_predicted) return "";
  const char* who = r.a_predicted && r.b_predicted ? "A and B are" : r.a_predicted ? "A is" : "B is";
  return fmt::format("{} PREDICTED (gemmscope predict, nothing measured): a value inside a prediction's band is "
                     "within band (~), never a regression; outside it the threshold applies",
                     who);
}

// How "within noise" was decided for the totals and speedups of a mode.
std::string noise_rule_line(NoiseBasis b) {
  if (b == NoiseBasis::Band)
    return "within band (~): a predicted value's band (GEMMs: the cell's; totals: the cells' bands summed; "
           "speedups: [x low / y high, x high / y low]) overlaps the other value +- its stdev or spread (its 95% "
           "interval with repeats, its band when both are predictions): not flagged, whatever the threshold";
  if (b == NoiseBasis::Intervals)
    return "within noise (~): GEMMs |B - A| <= stdev A + stdev B; totals and speedups: the 95% intervals over the "
           "repeats of A and B overlap";
  return "within noise (~): GEMMs |B - A| <= stdev A + stdev B; totals and speedups |B - A| <= spread A + spread B "
         "(root-sum-square of the cells' stdevs as the total weights them; no 95% intervals: --repeats 3 or more "
         "in both runs gives them)";
}

template <class T>
void note_difference(std::vector<std::string>& out, const std::string& what, const T& a, const T& b) {
  if (a == b) return;
  if constexpr (std::is_same_v<T, bool>)
    out.push_back(fmt::format("{}: {} vs {}", what, a ? "true" : "false", b ? "true" : "false"));
  else if constexpr (std::is_same_v<T, std::string>)
    out.push_back(fmt::format("{}: {} vs {}", what, printable(a), printable(b)));
  else
    out.push_back(fmt::format("{}: {} vs {}", what, a, b));
}

// Everything that changes what a time means: the model and batch, the recipes, the timing loop.
std::vector<std::string> differences(const RunResult& a, const RunResult& b) {
  std::vector<std::string> out;
  // The run's top-level settings (core/run/settings.hpp): "providers", whose first gives each file's
  // main cells (core/providers/provider.hpp).
  for (std::string& d : settings_differences(a, b, {""})) out.push_back(std::move(d));
  const auto wgrad_orientation = [](const RunResult& r) -> std::string {
    for (const Gemm& g : r.plan.gemms)
      if (g.pass == Pass::Wgrad) return r.wgrad_transposed ? "X^T.dY [in, out]" : "dY^T.X [out, in]";
    return "";
  };
  if (const std::string x = wgrad_orientation(a), y = wgrad_orientation(b); !x.empty() && !y.empty() && x != y)
    out.push_back(fmt::format("Wgrad orientation: {} vs {} (the same FLOPs; cuBLASLt runs other kernels on the "
                              "transposed problem, so Wgrad times differ by more than noise)", x, y));
  if (a.plan.config && b.plan.config) {
    const ModelConfig &x = *a.plan.config, &y = *b.plan.config;
    note_difference(out, "config.hidden_size", x.hidden_size, y.hidden_size);
    note_difference(out, "config.intermediate_size", x.intermediate_size, y.intermediate_size);
    note_difference(out, "config.num_attention_heads", x.num_attention_heads, y.num_attention_heads);
    note_difference(out, "config.num_key_value_heads", x.kv_heads(), y.kv_heads());
    note_difference(out, "config.head_dim", x.head_dimension(), y.head_dimension());
    note_difference(out, "config.num_hidden_layers", x.num_hidden_layers, y.num_hidden_layers);
    note_difference(out, "config.micro_batch_size", x.micro_batch_size, y.micro_batch_size);
    note_difference(out, "config.sequence_length", x.sequence_length, y.sequence_length);
    note_difference(out, "config.vocab_size", x.vocab_size, y.vocab_size);
    note_difference(out, "config.gated_mlp", x.gated_mlp, y.gated_mlp);
    note_difference(out, "config.tensor_parallel", x.tensor_parallel, y.tensor_parallel);
    // Experts, routing and expert parallelism (docs/moe.md): what the grouped GEMMs' rows depend on.
    const MoeConfig &u = x.moe, &v = y.moe;
    note_difference(out, "config.moe.num_experts", u.num_experts, v.num_experts);
    if (u.enabled() && v.enabled()) {
      note_difference(out, "config.moe.top_k", u.top_k, v.top_k);
      note_difference(out, "config.moe.expert_intermediate_size", expert_ffn(x), expert_ffn(y));
      note_difference(out, "config.moe.shared_experts", u.shared_experts, v.shared_experts);
      note_difference(out, "config.moe.shared_expert_intermediate_size", shared_ffn_total(x), shared_ffn_total(y));
      note_difference(out, "config.moe.moe_layers", moe_layer_count(x), moe_layer_count(y));
      note_difference(out, "config.moe.routing", u.routing, v.routing);
      note_difference(out, "config.moe.expert_parallel", u.expert_parallel, v.expert_parallel);
      note_difference(out, "config.moe.capacity_factor", u.capacity_factor, v.capacity_factor);
    }
  }
  if (a.plan.routing && b.plan.routing) {
    const Routing &u = *a.plan.routing, &v = *b.plan.routing;
    note_difference(out, "plan.routing.seed", u.seed, v.seed);
    note_difference(out, "plan.routing.dropped", u.dropped, v.dropped);
    note_difference(out, "plan.routing.busiest_rank", u.busiest_rank, v.busiest_rank);
    if (u.counts != v.counts && u.experts == v.experts)
      out.push_back(fmt::format("plan.routing.counts: max/mean rows per expert {:.2f} vs {:.2f}, empty experts {} vs {}",
                                u.max_over_mean(), v.max_over_mean(), u.empty_experts(), v.empty_experts()));
  }
  // The run's settings (recipe options, timing, GEMM options, the whole step's): the registry's labels
  // (core/run/settings.hpp).
  for (std::string& d :
       settings_differences(a, b, {"recipe_options", "timing", "gemm_options", "accuracy", "step_options"}))
    out.push_back(std::move(d));
  return out;
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Same: return "same";
    case Verdict::Regression: return "regression";
    case Verdict::Improvement: return "improvement";
    case Verdict::BothNA: return "n/a";
  }
  return "?";
}

RunResult comparable_result(const json& doc, const std::string& name) {
  RunResult r = from_json(doc, name);
  require_times(r, name);
  return r;
}

void validate_result_json(const json& doc, const std::string& name) { comparable_result(doc, name); }

json load_result_json(const std::string& path) {
  json doc = read_json_file(path);
  comparable_result(doc, path);
  return doc;
}

CompareResult compare_results(const RunResult& a, const RunResult& b, const CompareOptions& opt) {
  require_times(a, "A");
  require_times(b, "B");
  if (!(opt.threshold >= 0.0) || opt.threshold >= 1.0)
    throw UsageError(fmt::format("threshold must be in [0, 1) (got {})", opt.threshold));
  CompareResult r;
  r.threshold = opt.threshold;
  r.kind = kind_of(a);
  if (r.kind != kind_of(b))
    throw UsageError(fmt::format("cannot compare a \"{}\" result with a \"{}\" result", r.kind, kind_of(b)));
  if (a.device) r.a_device = a.device->name;
  if (b.device) r.b_device = b.device->name;
  r.a_created = a.created;
  r.b_created = b.created;
  r.differences = differences(a, b);
  r.a_predicted = a.predicted();
  r.b_predicted = b.predicted();
  // A prediction names the GPU it is for ("... (predicted)"); the predicted line says so instead.
  r.different_gpus = a.device && b.device && a.device->name != b.device->name && !r.a_predicted && !r.b_predicted;

  // Modes and precisions by name, in each file's order, whatever modes the files hold.
  const auto modes_a = names(a.modes), modes_b = names(b.modes);
  std::vector<std::string> modes = intersect(modes_a, modes_b);
  r.only_a_modes = minus(modes_a, modes_b);
  r.only_b_modes = minus(modes_b, modes_a);
  if (!opt.mode.empty()) {
    const bool in_a = std::find(modes_a.begin(), modes_a.end(), opt.mode) != modes_a.end();
    const bool in_b = std::find(modes_b.begin(), modes_b.end(), opt.mode) != modes_b.end();
    if (!in_a || !in_b)
      throw UsageError(fmt::format("mode \"{}\" is not in {} (modes of A: {}; of B: {})", opt.mode,
                                   !in_a && !in_b ? "either file" : !in_a ? "A" : "B", join(modes_a), join(modes_b)));
    modes = {opt.mode};
  }
  if (modes.empty())
    throw UsageError(fmt::format("the files have no mode in common (A: {}; B: {})", join(modes_a), join(modes_b)));

  const auto precs_a = names(a.precisions), precs_b = names(b.precisions);
  r.precisions = intersect(precs_a, precs_b);
  r.only_a_precisions = minus(precs_a, precs_b);
  r.only_b_precisions = minus(precs_b, precs_a);
  if (r.precisions.empty())
    throw UsageError(
        fmt::format("the files have no precision in common (A: {}; B: {})", join(precs_a), join(precs_b)));
  // Columns: each common precision of the files' main cells (providers[0] of each), then the same
  // precisions of every other kernel provider both files measured, as "BF16@cutlass".
  struct Column { std::string label; size_t pa, pb, va, vb; };
  std::vector<Column> columns;
  for (const std::string& p : r.precisions) columns.push_back({p, index_of(precs_a, p), index_of(precs_b, p), 0, 0});
  for (size_t va = 0; va < a.providers.size(); ++va) {
    const size_t vb = index_of(b.providers, a.providers[va]);
    if (vb == b.providers.size() || (va == 0 && vb == 0)) continue;
    for (const std::string& p : r.precisions)
      columns.push_back({p + "@" + a.providers[va], index_of(precs_a, p), index_of(precs_b, p), va, vb});
  }
  for (size_t i = r.precisions.size(); i < columns.size(); ++i) r.precisions.push_back(columns[i].label);

  // Match GEMMs by (pass, op, m, k, n) and, for grouped GEMMs, the per-expert sizes; repeated
  // keys pair up in file order. Grouped GEMMs left over pair up by (pass, op, grouped dimension,
  // expert count, the other two sizes): the same expert GEMM under another routing, marked.
  const std::vector<Gemm>& ga = a.plan.gemms;
  const std::vector<Gemm>& gb = b.plan.gemms;
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<bool> a_used(ga.size(), false), b_used(gb.size(), false);
  const auto match = [&](std::string (*key)(const Gemm&), bool grouped_only) {
    std::map<std::string, std::vector<size_t>> b_by_key;
    for (size_t j = 0; j < gb.size(); ++j)
      if (!b_used[j] && (!grouped_only || gb[j].grouped())) b_by_key[key(gb[j])].push_back(j);
    for (size_t i = 0; i < ga.size(); ++i) {
      if (a_used[i] || (grouped_only && !ga[i].grouped())) continue;
      auto& cand = b_by_key[key(ga[i])];
      if (cand.empty()) continue;
      pairs.emplace_back(i, cand.front());
      a_used[i] = b_used[cand.front()] = true;
      cand.erase(cand.begin());
    }
  };
  match(exact_key, false);
  match(grouped_key, true);
  std::sort(pairs.begin(), pairs.end());  // A's order
  for (size_t i = 0; i < ga.size(); ++i)
    if (!a_used[i]) r.unmatched_a.push_back(gemm_name_of(ga[i]));
  for (size_t j = 0; j < gb.size(); ++j)
    if (!b_used[j]) r.unmatched_b.push_back(gemm_name_of(gb[j]));
  if (pairs.empty())
    throw UsageError(fmt::format("the files have no GEMM in common (matched by pass, op, m, k, n){}",
                                 r.differences.empty() ? "" : "; A and B differ in " + join(r.differences, "; ")));
  for (const auto& [i, j] : pairs)
    if (ga[i].group != gb[j].group)
      r.group_differences.push_back(fmt::format("{}: {}", gemm_name_of(ga[i]), group_difference(ga[i], gb[j])));

  // Totals: a dense model's per-layer total; with experts in both files a dense layer's (when
  // either has dense layers), a MoE layer's and its routed experts. A model with experts against
  // one without compares the full model only (its layers are not the same kind).
  std::vector<TotalKind> kinds;
  if (a.plan.model_mode) {
    const bool moe_a = a.plan.has_moe(), moe_b = b.plan.has_moe();
    if (!moe_a && !moe_b) kinds.push_back(kDenseLayer);
    if (moe_a && moe_b) {
      if (a.plan.dense_layers() > 0 || b.plan.dense_layers() > 0) {
        kinds.push_back(kDenseLayer);
        kinds.back().what = "dense-layer total";
      }
      kinds.push_back(kMoeLayer);
      kinds.push_back(kRoutedExperts);
    }
    kinds.push_back(kFullModel);
  }
  // Repeat intervals ([repeat][mode]); both files need them to judge by intervals.
  const auto reps_a = a.plan.model_mode ? repeat_summaries(a) : std::vector<std::vector<ModeSummary>>{};
  const auto reps_b = a.plan.model_mode ? repeat_summaries(b) : std::vector<std::vector<ModeSummary>>{};
  const bool intervals = !reps_a.empty() && !reps_b.empty();

  const double t = opt.threshold;
  for (const std::string& mode : modes) {
    const size_t ma = index_of(modes_a, mode), mb = index_of(modes_b, mode);
    CompareMode cm;
    cm.mode = mode;
    cm.totals_noise = a.predicted() || b.predicted() ? NoiseBasis::Band
                      : intervals                      ? NoiseBasis::Intervals
                                                       : NoiseBasis::Spread;
    for (const auto& [i, j] : pairs) {
      const Gemm& x = ga[i];
      CompareGemmRow row{to_string(x.pass), to_string(x.op), x.label(), x.m, x.k, x.n, x.group.size(), {}, {}};
      if (x.group != gb[j].group) row.group_difference = group_difference(x, gb[j]);
      for (const Column& c : columns) {
        NoiseInput noise;
        noise.a_spread = cell_stdev(a, ma, i, c.pa, c.va);
        noise.b_spread = cell_stdev(b, mb, j, c.pb, c.vb);
        noise.a_band = cell_band(a, ma, i, c.pa, c.va);
        noise.b_band = cell_band(b, mb, j, c.pb, c.vb);
        row.cells.push_back(make_cell(c.label, cell_ms(a, ma, i, c.pa, c.va), cell_ms(b, mb, j, c.pb, c.vb), t,
                                      mode + " " + gemm_key(x), noise));
      }
      cm.gemms.push_back(std::move(row));
    }
    if (a.plan.model_mode) {  // the sums the text report prints, each file over its own GEMMs
      const ModeSummary sa = summarize_mode(a, ma), sb = summarize_mode(b, mb);
      const ProviderSums psa = summarize_providers(a, ma), psb = summarize_providers(b, mb);
      for (const TotalKind& k : kinds) {
        CompareTotalRow row{k.what, {}};
        for (const Column& c : columns) {
          const size_t pa = c.pa, pb = c.pb;
          NoiseInput noise;
          noise.a_spread = total_spread(a, ma, pa, k, c.va);
          noise.b_spread = total_spread(b, mb, pb, k, c.vb);
          if (intervals && c.va == 0 && c.vb == 0) {  // repeat intervals: of the main cells only
            noise.a_interval = repeat_interval(reps_a, ma, [&](const ModeSummary& s) { return k.get(s.sums[pa]); });
            noise.b_interval = repeat_interval(reps_b, mb, [&](const ModeSummary& s) { return k.get(s.sums[pb]); });
          }
          // Bands: a prediction holds one provider's grid (the first).
          noise.a_band = c.va == 0 ? total_band(a, ma, c.pa, k) : std::nullopt;
          noise.b_band = c.vb == 0 ? total_band(b, mb, c.pb, k) : std::nullopt;
          row.cells.push_back(make_cell(c.label, k.get(psa.per_provider[c.va][c.pa]), k.get(psb.per_provider[c.vb][c.pb]),
                                        t, mode + " " + k.what, noise));
        }
        cm.totals.push_back(std::move(row));
      }
      // Speedups of the precisions both files compare (A's order); spread of x/y: relative
      // root-sum-square of the two full models' spreads.
      for (size_t s = 0; s < sa.speedups.size(); ++s) {
        const Speedup& spa = sa.speedups[s];
        const std::string num = to_string(spa.num), den = to_string(spa.den);
        if (index_of(r.precisions, num) == r.precisions.size() || index_of(r.precisions, den) == r.precisions.size())
          continue;
        size_t sbi = 0;
        while (sbi < sb.speedups.size() && sb.speedups[sbi].name() != spa.name()) ++sbi;
        if (sbi == sb.speedups.size()) continue;
        const Speedup& spb = sb.speedups[sbi];
        const auto spread = [&](const RunResult& x, size_t m, const ModeSummary& sx, const Speedup& sp,
                                const std::vector<std::string>& precs) {
          const size_t pn = index_of(precs, num), pd = index_of(precs, den);
          const auto& fn = sx.sums[pn].full_model;
          const auto& fd = sx.sums[pd].full_model;
          if (!sp.value || !fn || !fd) return 0.0;
          const double rn = total_spread(x, m, pn, kFullModel) / *fn, rd = total_spread(x, m, pd, kFullModel) / *fd;
          return *sp.value * std::sqrt(rn * rn + rd * rd);
        };
        NoiseInput noise;
        noise.a_spread = spread(a, ma, sa, spa, precs_a);
        noise.b_spread = spread(b, mb, sb, spb, precs_b);
        noise.a_band = speedup_band(a, ma, spa, precs_a);
        noise.b_band = speedup_band(b, mb, spb, precs_b);
        if (intervals) {
          noise.a_interval = repeat_interval(reps_a, ma, [&](const ModeSummary& x) { return x.speedups.at(s).value; });
          noise.b_interval = repeat_interval(reps_b, mb, [&](const ModeSummary& x) { return x.speedups.at(sbi).value; });
        }
        CompareSpeedupRow row{spa.name(), make_cell(spa.name(), spa.value, spb.value, t, mode + " speedup", noise, true)};
        cm.speedups.push_back(std::move(row));
      }
    }
    r.modes.push_back(std::move(cm));
  }
  const auto count = [&](const CompareCell& c) {
    r.regressions += c.verdict == Verdict::Regression;
    r.improvements += c.verdict == Verdict::Improvement;
  };
  for (const CompareMode& m : r.modes) {
    for (const auto& g : m.gemms)
      for (const auto& c : g.cells) count(c);
    for (const auto& tr : m.totals)
      for (const auto& c : tr.cells) count(c);
    for (const auto& sp : m.speedups) count(sp.cell);
  }
  return r;
}

CompareResult compare_results(const json& a, const json& b, const CompareOptions& opt) {
  return compare_results(comparable_result(a, "A"), comparable_result(b, "B"), opt);
}

CompareResult compare_files(const std::string& a_path, const std::string& b_path, const CompareOptions& opt) {
  const RunResult a = comparable_result(read_json_file(a_path), a_path);
  const RunResult b = comparable_result(read_json_file(b_path), b_path);
  CompareResult r = compare_results(a, b, opt);
  r.a_path = a_path;
  r.b_path = b_path;
  return r;
}

double parse_threshold(const std::string& text) {
  std::string s = trim(text);
  bool percent = false;
  if (!s.empty() && s.back() == '%') {
    percent = true;
    s.pop_back();
  }
  const auto bad = [&] {
    return UsageError(fmt::format("bad threshold '{}': use a percentage (5%) or a fraction (0.05) below 100%", text));
  };
  if (s.empty()) throw bad();
  double v = 0;
  try {
    v = parse_decimal_number(s, "--threshold");  // plain decimal: no 0x10, inf, nan
  } catch (const UsageError&) {
    throw bad();
  }
  if (v < 0) throw bad();
  if (!percent && v >= 1.0)
    throw UsageError(fmt::format("bad threshold '{}': a number without '%' is a fraction below 1 (did you mean {}%?)",
                                 text, trim(text)));
  double frac = percent ? v / 100.0 : v;
  if (frac >= 1.0) throw bad();
  if (frac == 0.0) frac = 0.0;  // -0 prints as "-0.0%" otherwise
  return frac;
}

print::Document compare_document(const CompareResult& r) {
  using print::Inline;
  using print::Only;
  using print::Span;
  using print::Style;
  using print::Text;
  const auto strong_label = [](const char* label, std::string rest) {
    return Inline{Span{label, Style::Strong}, Span{" " + std::move(rest)}};
  };
  // A sentence of a list: markdown starts it with a capital.
  const auto sentence = [](const std::string& s) {
    std::string md = s;
    if (!md.empty() && md[0] >= 'a' && md[0] <= 'z') md[0] = static_cast<char>(md[0] - 'a' + 'A');
    return Text::split(s, md);
  };
  const std::string result = fmt::format("Result: {} regression{}, {} improvement{}", r.regressions,
                                         r.regressions == 1 ? "" : "s", r.improvements, r.improvements == 1 ? "" : "s");

  print::Document d;
  d.heading(Text::split("gemmscope compare (ratio B/A of mean GEMM time: above 1 means B is slower)", "gemmscope compare"));
  std::vector<print::Item> about;
  about.emplace_back(strong_label("A:", file_line(r.a_path, r.a_device, r.a_created)));
  about.emplace_back(strong_label("B:", file_line(r.b_path, r.b_device, r.b_created)));
  for (const auto& x : r.differences) about.emplace_back(strong_label("note:", "A and B differ in " + x));
  if (r.different_gpus)
    about.emplace_back(strong_label("warning:", fmt::format("A and B ran on different GPUs ({} vs {}): the ratios compare "
                                                            "the hardware too",
                                                            printable(r.a_device), printable(r.b_device))));
  about.emplace_back(sentence("kind " + r.kind + ", " + threshold_line(r.threshold)));
  if (!predicted_line(r).empty()) about.emplace_back(predicted_line(r));
  about.emplace_back("precisions compared: " + join(r.precisions), Only::Text);
  about.emplace_back("Cells show B/A of the mean time (above 1: B is slower).", Only::Markdown);
  if (!r.only_a_precisions.empty())
    about.emplace_back(sentence("precisions only in A (not compared): " + join(r.only_a_precisions)));
  if (!r.only_b_precisions.empty())
    about.emplace_back(sentence("precisions only in B (not compared): " + join(r.only_b_precisions)));
  if (!r.only_a_modes.empty()) about.emplace_back(sentence("modes only in A (not compared): " + join(r.only_a_modes)));
  if (!r.only_b_modes.empty()) about.emplace_back(sentence("modes only in B (not compared): " + join(r.only_b_modes)));
  d.list(std::move(about));
  // Markdown leads with the verdict, text ends with it.
  d.paragraph(Inline{Span{result + ".", Style::Strong}}, Only::Markdown);

  using print::Align;
  for (const CompareMode& m : r.modes) {
    // B/A per GEMM: text prints it first, markdown after the totals and speedups.
    std::vector<print::Column> cols = {{"Pass"}, {"Op"}, {"Shape (MxKxN)"}};
    for (const auto& p : r.precisions) cols.push_back({p, Align::Right});
    print::Table gemms(std::move(cols));
    gemms.add_header();
    for (const auto& g : m.gemms) {
      std::vector<print::Cell> row = {g.pass, g.label, shape_text(g)};
      for (const auto& c : g.cells) row.push_back(time_cell(c));
      gemms.add_row(std::move(row));
    }
    d.heading(fmt::format("Mode {}: B/A per GEMM (R = regression, I = improvement)", m.mode), 3, Only::Text);
    d.table(gemms, Only::Text);
    if (!m.totals.empty()) {
      d.heading(Text::split(fmt::format("Mode {}: totals", m.mode), fmt::format("{}: totals", m.mode)), 3);
      print::Table t({{"Total"}, {"Precision"}, {"A ms", Align::Right}, {"B ms", Align::Right}, {"B/A", Align::Right},
                      {noise_head(m), Align::Right}});
      t.add_header();
      for (const auto& tr : m.totals)
        for (const auto& c : tr.cells)
          t.add_row({tr.what, c.precision, c.a_ms ? fmt_ms(*c.a_ms) : "n/a", c.b_ms ? fmt_ms(*c.b_ms) : "n/a",
                     time_cell(c), noise_text(c, 3)});
      d.table(std::move(t));
    }
    if (!m.speedups.empty()) {
      d.heading(Text::split(fmt::format("Mode {}: speedups (full model; B/A below 1 means B gains less)", m.mode),
                            fmt::format("{}: speedups (full model; B/A below 1: B gains less)", m.mode)),
                3);
      print::Table t({{"Speedup"}, {"A", Align::Right}, {"B", Align::Right}, {"B/A", Align::Right},
                      {noise_head(m), Align::Right}});
      t.add_header();
      for (const auto& sp : m.speedups)
        t.add_row({sp.name, fmt_speedup(sp.cell.a_ms), fmt_speedup(sp.cell.b_ms), speedup_cell(sp.cell),
                   noise_text(sp.cell, 3)});
      d.table(std::move(t));
    }
    if (!m.totals.empty() || !m.speedups.empty())
      d.paragraph(Text::split(noise_rule_line(m.totals_noise), noise_rule_line(m.totals_noise) + "."));
    d.heading(fmt::format("{}: B/A per GEMM", m.mode), 3, Only::Markdown);
    d.table(std::move(gemms), Only::Markdown);
  }
  if (!r.group_differences.empty()) {
    d.heading(Text::split("Grouped GEMMs paired although their rows per expert differ (*; the routing differs, so their "
                          "ratios compare different work):",
                          "Grouped GEMMs paired although their rows per expert differ"),
              3);
    d.paragraph("The routing differs (*), so their ratios compare different work.", Only::Markdown);
    d.list({r.group_differences.begin(), r.group_differences.end()});
  }
  if (!r.unmatched_a.empty() || !r.unmatched_b.empty()) {
    d.heading(Text::split("Unmatched GEMMs (not compared):", "Unmatched GEMMs (not compared)"), 3);
    std::vector<print::Item> items;
    for (const auto& s : r.unmatched_a) items.emplace_back(Inline{Span{"only in A: "}, Span{s, Style::Code}});
    for (const auto& s : r.unmatched_b) items.emplace_back(Inline{Span{"only in B: "}, Span{s, Style::Code}});
    d.list(std::move(items));
  }
  for (Verdict v : {Verdict::Regression, Verdict::Improvement}) {
    std::vector<Flagged> f;
    collect(r, v, f);
    if (f.empty()) continue;
    const bool reg = v == Verdict::Regression;
    const std::string title = fmt::format("{} ({})", reg ? "Regressions" : "Improvements", f.size());
    const std::string what =
        reg ? fmt::format("B slower than A, or its speedup lower, by more than {:.1f}% and beyond noise, or n/a in B only",
                          r.threshold * 100)
            : fmt::format("B faster than A, or its speedup higher, by more than {:.1f}% and beyond noise, or n/a in A only",
                          r.threshold * 100);
    // Markdown lists the regressions only.
    const Only only = reg ? Only::Both : Only::Text;
    d.heading(Text::split(title + ": " + what, title), 3, only);
    std::vector<print::Item> items;
    for (const auto& x : f) items.emplace_back(x.where + ": " + x.change);
    d.list(std::move(items), only);
  }
  d.heading(result, 3, Only::Text);
  return d;
}

std::string format_compare_text(const CompareResult& r) { return print::render(compare_document(r), print::Format::Text); }

std::string format_compare_markdown(const CompareResult& r) {
  return print::render(compare_document(r), print::Format::Markdown);
}

}  // namespace gs

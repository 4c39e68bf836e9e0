// Fleet mode's summary (fleet.hpp, docs/node.md).
#include "core/node/fleet.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/report/report.hpp"
#include "core/run/settings.hpp"
#include "core/util/text_util.hpp"

namespace gs {

namespace {

// The first mode's per-layer total of every precision: the average layer's, experts included (a MoE
// model's dense layers alone would misstate it); a shapes run's sum over its shapes. The run is summarised once (not
// once per precision: a fleet file of many GPUs declaring many layers made that GPUs x
// precisions^2 x layers).
std::vector<std::optional<double>> layer_totals(const RunResult& r) {
  std::vector<std::optional<double>> out;
  if (r.plan.model_mode) {
    const ModeSummary ms = summarize_mode(r, 0);
    for (const PrecisionSums& s : ms.sums) out.push_back(s.average_layer);
    return out;
  }
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    double sum = 0;
    bool ok = true;
    for (size_t g = 0; g < r.plan.gemms.size() && ok; ++g) {
      const Cell& c = r.cell(0, g, p);
      ok = c.ok;
      sum += c.ok ? c.stats.mean_ms : 0.0;
    }
    out.push_back(ok ? std::optional<double>(sum) : std::nullopt);
  }
  return out;
}

std::optional<double> median_of(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string plan_key(const RunResult& r) {
  std::string k = r.plan.model_mode && r.plan.config ? r.plan.config->name : "shapes";
  for (const Gemm& g : r.plan.gemms) k += "|" + g.shape();
  return k;
}

}  // namespace

FleetSummary summarize_fleet(const std::vector<FleetRun>& runs, double threshold) {
  if (runs.empty()) throw UsageError("fleet: no GPU runs to summarize");
  if (!(threshold > 0) || !std::isfinite(threshold))
    throw UsageError(fmt::format("fleet: the slow-GPU threshold must be a positive fraction, got {}", threshold));
  FleetSummary s;
  s.threshold = threshold;
  const RunResult& first = runs.front().run;
  s.precisions = first.precisions;
  for (const FleetRun& fr : runs) {
    const RunResult& r = fr.run;
    if (r.dry_run || !r.has_cells())
      throw UsageError(fmt::format("fleet: {} measured nothing{}", fr.label,
                                   r.why_not_measured.empty() ? "" : " (" + clip_text(r.why_not_measured, 160) + ")"));
    if (r.precisions != first.precisions || r.modes != first.modes || plan_key(r) != plan_key(first))
      throw UsageError(fmt::format("fleet: {} ran another plan, precisions or modes than {}", fr.label,
                                   runs.front().label));
  }
  s.mode = to_string(first.modes.at(0));
  for (const FleetRun& fr : runs) {
    FleetGpuSummary g;
    g.label = fr.label;
    double mhz = 0, temp = 0, power = 0;
    int temps = 0, powers = 0;
    for (size_t gi = 0; gi < fr.run.plan.gemms.size(); ++gi)
      for (size_t p = 0; p < fr.run.precisions.size(); ++p) {
        const Cell& c = fr.run.cell(0, gi, p);
        if (!c.ok || !c.clock) continue;
        ++g.clock_cells;
        mhz += c.clock->sm_mhz;
        if (c.clock->temp_c) temp += *c.clock->temp_c, ++temps;
        if (c.clock->power_w) power += *c.clock->power_w, ++powers;
        g.max_sm_mhz = std::max(g.max_sm_mhz, c.clock->max_sm_mhz);
        g.power_capped_cells += c.clock->power_capped();
        g.thermal_cells += c.clock->thermal();
      }
    if (g.clock_cells > 0) g.mean_sm_mhz = mhz / g.clock_cells;
    if (temps > 0) g.mean_temp_c = temp / temps;
    if (powers > 0) g.mean_power_w = power / powers;
    g.layer_ms = layer_totals(fr.run);
    s.gpus.push_back(std::move(g));
  }
  std::vector<double> clocks;
  for (const FleetGpuSummary& g : s.gpus)
    if (g.mean_sm_mhz) clocks.push_back(*g.mean_sm_mhz);
  const std::optional<double> median_clock = median_of(clocks);
  std::vector<double> temps, powers;
  for (const FleetGpuSummary& g : s.gpus) {
    if (g.mean_temp_c) temps.push_back(*g.mean_temp_c);
    if (g.mean_power_w) powers.push_back(*g.mean_power_w);
  }
  const std::optional<double> median_temp = median_of(temps), median_power = median_of(powers);
  for (size_t p = 0; p < s.precisions.size(); ++p) {
    std::vector<double> v;
    for (const FleetGpuSummary& g : s.gpus)
      if (g.layer_ms[p]) v.push_back(*g.layer_ms[p]);
    const std::optional<double> med = median_of(v);
    s.median_ms.push_back(med);
    s.spread.push_back(med && *med > 0 ? std::optional<double>((*std::max_element(v.begin(), v.end()) -
                                                                *std::min_element(v.begin(), v.end())) / *med)
                                       : std::nullopt);
    if (!med || *med <= 0) continue;
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      const FleetGpuSummary& g = s.gpus[i];
      if (!g.layer_ms[p]) continue;
      const double over = *g.layer_ms[p] / *med - 1;
      if (over <= threshold) continue;
      std::string ev = g.mean_sm_mhz && median_clock
                           ? fmt::format("mean SM clock {:.0f} MHz against the median GPU's {:.0f} MHz",
                                         *g.mean_sm_mhz, *median_clock)
                           : std::string("no clock samples");
      if (g.mean_temp_c && median_temp)
        ev += fmt::format("; {:.0f} C against {:.0f} C", *g.mean_temp_c, *median_temp);
      if (g.mean_power_w && median_power)
        ev += fmt::format("; {:.0f} W against {:.0f} W", *g.mean_power_w, *median_power);
      if (g.clock_cells > 0)
        ev += fmt::format("; {} of {} cells power-capped, {} thermally slowed", g.power_capped_cells, g.clock_cells,
                          g.thermal_cells);
      s.slow.push_back({i, p, over, ev});
    }
  }
  return s;
}

std::string render_fleet_text(const FleetSummary& s) {
  std::ostringstream o;
  o << fmt::format("\nFleet: {} GPUs, the same plan on each at once; per-layer GEMM time ({} mode, ms, measured; the average layer, experts included)\n",
                   s.gpus.size(), s.mode);
  o << fmt::format("  {:<44}", "GPU");
  for (Precision p : s.precisions) o << fmt::format(" {:>11}", to_string(p));
  o << fmt::format(" {:>9} {:>6} {:>7} {:>11}\n", "SM MHz", "temp C", "power W", "capped/therm");
  for (const FleetGpuSummary& g : s.gpus) {
    o << fmt::format("  {:<44}", clip_text(g.label, 44));
    for (const auto& v : g.layer_ms) o << (v ? fmt::format(" {:>11.3f}", *v) : fmt::format(" {:>11}", "N/A"));
    o << (g.mean_sm_mhz ? fmt::format(" {:>9.0f}", *g.mean_sm_mhz) : fmt::format(" {:>9}", "-"));
    o << (g.mean_temp_c ? fmt::format(" {:>6.0f}", *g.mean_temp_c) : fmt::format(" {:>6}", "-"));
    o << (g.mean_power_w ? fmt::format(" {:>7.0f}", *g.mean_power_w) : fmt::format(" {:>7}", "-"));
    o << (g.clock_cells ? fmt::format(" {:>5}/{:<5}\n", g.power_capped_cells, g.thermal_cells) : fmt::format(" {:>11}\n", "-"));
  }
  o << fmt::format("  {:<44}", "median");
  for (const auto& v : s.median_ms) o << (v ? fmt::format(" {:>11.3f}", *v) : fmt::format(" {:>11}", "N/A"));
  o << "\n" << fmt::format("  {:<44}", "spread (slowest - fastest) / median");
  for (const auto& v : s.spread) o << (v ? fmt::format(" {:>10.2f}%", *v * 100) : fmt::format(" {:>11}", "N/A"));
  o << "\n";
  if (s.slow.empty()) {
    o << fmt::format("  slower than the median by more than {:.1f}%: none\n", s.threshold * 100);
  } else {
    for (const SlowGpu& w : s.slow)
      o << fmt::format("  SLOW: {} is {:.1f}% slower than the median in {} (threshold {:.1f}%): {}\n",
                       s.gpus[w.gpu].label, w.over_median * 100, to_string(s.precisions[w.precision]),
                       s.threshold * 100, w.evidence);
  }
  return o.str();
}

namespace {

constexpr size_t kMaxFleetGpus = 4096;

// What a fleet document holds once for all its runs.
nlohmann::json shared_settings(const RunResult& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* section : {"timing", "recipe_options", ""}) settings_to_json(r, section, j[section]);
  j["gemm_options"] = gemm_options_to_json(r.gemm_options);
  j["plan"] = plan_key(r);
  j["model_mode"] = r.plan.model_mode;
  j["dry_run"] = r.dry_run;
  std::vector<std::string> acc;
  for (Precision p : r.accuracy_precisions) acc.push_back(to_string(p));
  j["accuracy"] = r.has_accuracy ? nlohmann::json(acc) : nlohmann::json();
  return j;
}

}  // namespace

RunResult merge_ranks(const std::vector<FleetRun>& runs) {
  if (runs.empty()) throw UsageError("fleet: no GPU runs to write");
  if (runs.size() > kMaxFleetGpus) throw UsageError(fmt::format("fleet: more than {} GPUs", kMaxFleetGpus));
  const RunResult& first = runs.front().run;
  const nlohmann::json shared = shared_settings(first);
  RunResult m = first;
  m.records.clear();
  m.device.reset();
  m.notes.clear();
  m.ranks.clear();
  size_t n = 0;
  for (const FleetRun& fr : runs) n += fr.run.records.size();
  m.records.reserve(n);
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i].run;
    if (!r.ranks.empty()) throw UsageError(fmt::format("fleet: {} holds several ranks itself", runs[i].label));
    if (shared_settings(r) != shared)
      throw UsageError(fmt::format("fleet: {} ran another plan or other settings than {}", runs[i].label, runs.front().label));
    m.ranks.push_back({runs[i].label, runs[i].host, runs[i].rank, r.device, r.created, r.notes});
    for (const Record& rec : r.records) {
      RecordKey k = rec.key;
      k.rank = static_cast<uint32_t>(i);
      m.records.add(k, rec.value);
    }
  }
  return m;
}

std::vector<FleetRun> split_ranks(RunResult r) {
  if (r.ranks.empty()) return {FleetRun{"", std::move(r)}};
  RecordTable all = std::move(r.records);
  r.records.clear();
  std::vector<RankInfo> ranks = std::move(r.ranks);
  r.ranks.clear();
  std::vector<FleetRun> out;
  out.reserve(ranks.size());
  for (RankInfo& x : ranks) {
    FleetRun fr{std::move(x.label), r, std::move(x.host), x.rank};
    fr.run.device = std::move(x.device);
    fr.run.created = std::move(x.created);
    fr.run.notes = std::move(x.notes);
    out.push_back(std::move(fr));
  }
  for (const Record& rec : all) {
    RecordKey k = rec.key;
    RunResult& run = out.at(k.rank).run;
    k.rank = 0;
    run.records.add(k, rec.value);
  }
  return out;
}

nlohmann::json fleet_to_json(const std::vector<FleetRun>& runs, const FleetSummary& s) {
  nlohmann::json j = to_json(merge_ranks(runs));
  nlohmann::json f;
  f["threshold"] = s.threshold;
  f["mode"] = s.mode;
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    nlohmann::json g;
    g["label"] = runs[i].label;
    nlohmann::json totals = nlohmann::json::object();
    for (size_t p = 0; p < s.precisions.size(); ++p)
      totals[to_string(s.precisions[p])] = s.gpus[i].layer_ms[p] ? nlohmann::json(*s.gpus[i].layer_ms[p]) : nlohmann::json();
    g["layer_ms"] = totals;
    if (s.gpus[i].mean_sm_mhz) g["mean_sm_mhz"] = *s.gpus[i].mean_sm_mhz;
    if (s.gpus[i].mean_temp_c) g["mean_temp_c"] = *s.gpus[i].mean_temp_c;
    if (s.gpus[i].mean_power_w) g["mean_power_w"] = *s.gpus[i].mean_power_w;
    g["power_capped_cells"] = s.gpus[i].power_capped_cells;
    g["thermal_cells"] = s.gpus[i].thermal_cells;
    g["clock_cells"] = s.gpus[i].clock_cells;
    gpus.push_back(std::move(g));
  }
  f["gpus"] = std::move(gpus);
  nlohmann::json slow = nlohmann::json::array();
  for (const SlowGpu& w : s.slow)
    slow.push_back({{"gpu", s.gpus[w.gpu].label},
                    {"precision", to_string(s.precisions[w.precision])},
                    {"over_median", w.over_median},
                    {"evidence", w.evidence}});
  f["slow"] = std::move(slow);
  j["fleet"] = std::move(f);
  return j;
}

nlohmann::json fleet_chart_json(const FleetSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  nlohmann::json j;
  j["schema"] = "gemmscope-fleet-chart/1";
  j["mode"] = s.mode;
  j["threshold"] = s.threshold;
  nlohmann::json precs = nlohmann::json::array();
  for (Precision p : s.precisions) precs.push_back(to_string(p));
  j["precisions"] = precs;
  nlohmann::json gpus = nlohmann::json::array();
  for (const FleetGpuSummary& g : s.gpus) {
    nlohmann::json ms = nlohmann::json::array();
    for (const auto& v : g.layer_ms) ms.push_back(opt(v));
    gpus.push_back({{"label", g.label},
                    {"layer_ms", ms},
                    {"mean_sm_mhz", opt(g.mean_sm_mhz)},
                    {"mean_temp_c", opt(g.mean_temp_c)},
                    {"mean_power_w", opt(g.mean_power_w)}});
  }
  j["gpus"] = gpus;
  nlohmann::json med = nlohmann::json::array();
  for (const auto& v : s.median_ms) med.push_back(opt(v));
  j["median_ms"] = med;
  nlohmann::json slow = nlohmann::json::array();
  for (const SlowGpu& w : s.slow) slow.push_back({{"gpu", w.gpu}, {"precision", w.precision}, {"over_median", w.over_median}});
  j["slow"] = slow;
  return j;
}

namespace {
constexpr const char* kFleetSchemaV1 = "gemmscope-fleet/1";
}

bool is_fleet_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return false;
  if (j["schema"].get<std::string>() == kFleetSchemaV1) return true;
  return j.contains("ranks") && j["ranks"].is_array() && !j["ranks"].empty();
}

double fleet_threshold(const nlohmann::json& j) {
  const nlohmann::json* f = j.contains("fleet") && j["fleet"].is_object() ? &j["fleet"] : &j;
  return f->contains("threshold") && (*f)["threshold"].is_number() ? (*f)["threshold"].get<double>() : 0.03;
}

std::vector<FleetRun> fleet_from_json(const nlohmann::json& j, const std::string& name) {
  if (!is_fleet_json(j)) throw UsageError(name + ": not a gemmscope fleet file");
  if (j["schema"] != kFleetSchemaV1) {
    // One result document with ranks.
    if (j["ranks"].size() > kMaxFleetGpus) throw UsageError(fmt::format("{}: more than {} GPUs", name, kMaxFleetGpus));
    for (size_t i = 0; i < j["ranks"].size(); ++i) {
      const nlohmann::json& x = j["ranks"][i];
      if (!x.is_object() || !x.contains("label") || !x["label"].is_string())
        throw UsageError(fmt::format("{}: ranks[{}] needs a string \"label\"", name, i));
    }
    RunResult all = from_json(j, name);
    // Each rank becomes a run with its own copy of the plan: bound the copies, so that a small file
    // with many ranks and a large MoE plan cannot take gigabytes.
    size_t plan_size = all.plan.gemms.size() + (all.plan.routing ? all.plan.routing->counts.size() : 0);
    for (const Gemm& g : all.plan.gemms) plan_size += g.group.size();
    constexpr size_t kMaxSplitWork = size_t{1} << 24;
    if (plan_size * all.ranks.size() > kMaxSplitWork)
      throw UsageError(fmt::format("{}: {} ranks of a plan of {} GEMMs and expert groups are too many to read as runs "
                                   "(at most {} ranks x plan size)", name, all.ranks.size(), plan_size, kMaxSplitWork));
    std::vector<FleetRun> runs = split_ranks(std::move(all));
    for (FleetRun& fr : runs) fr.label = printable(fr.label);
    return runs;
  }
  if (!j.contains("gpus") || !j["gpus"].is_array() || j["gpus"].empty())
    throw UsageError(name + ": \"gpus\" must be a non-empty list");
  if (j["gpus"].size() > kMaxFleetGpus) throw UsageError(fmt::format("{}: more than {} GPUs", name, kMaxFleetGpus));
  std::vector<FleetRun> runs;
  size_t i = 0;
  for (const auto& g : j["gpus"]) {
    const std::string where = fmt::format("{}: gpus[{}]", name, i++);
    if (!g.is_object() || !g.contains("label") || !g["label"].is_string() || !g.contains("run"))
      throw UsageError(where + " needs a string \"label\" and a \"run\"");
    FleetRun fr{clip_text(printable(g["label"].get<std::string>()), 200), from_json(g["run"], where)};
    if (g.contains("host") && g["host"].is_string()) fr.host = clip_text(printable(g["host"].get<std::string>()), 200);
    if (g.contains("rank") && g["rank"].is_number_integer()) fr.rank = g["rank"].get<int>();
    runs.push_back(std::move(fr));
  }
  return runs;
}

}  // namespace gs

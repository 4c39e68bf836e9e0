#include "core/analysis/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gs {

using nlohmann::json;

std::optional<RooflinePoint> roofline_point(const GpuSpec& spec, const Gemm& g, Precision p, Mode m,
                                            const RecipeOptions& o, const Cell* cell) {
  RooflinePoint pt;
  pt.format = spec.arch_policy().peak_format(p);
  const auto& peak = spec.peak(pt.format);
  if (!peak || !spec.bandwidth_gbs) return std::nullopt;
  const Recipe rec = make_recipe(p, g, o);
  const ByteCount bc = byte_count(rec, g, operand_work(m, g, Side::Left, rec, o), operand_work(m, g, Side::Right, rec, o));
  pt.flops = g.flops();
  pt.bytes = bc.gemm + bc.quantize;
  pt.intensity = pt.bytes > 0 ? pt.flops / pt.bytes : 0;
  pt.peak_tflops = peak->value;
  const double peak_flops = peak->value * 1e12, bw = spec.bandwidth_gbs->value * 1e9;
  pt.ridge = peak_flops / bw;
  pt.compute_bound = pt.intensity >= pt.ridge;
  pt.roofline_ms = 1e3 * std::max(pt.flops / peak_flops, pt.bytes / bw);
  if (cell && cell->ok && cell->stats.mean_ms > 0) {
    const double achieved = pt.flops / (cell->stats.mean_ms * 1e-3) / 1e12;
    pt.achieved_tflops = achieved;
    pt.pct_peak = 100 * achieved / pt.peak_tflops;
    // A figure above 100% means the sampled clock is not the one the cell ran at (the clock moved
    // between samples): left out rather than printed.
    if (cell->clock && cell->clock->sm_mhz > 0 && spec.boost_clock_mhz) {
      const double at_clock = 100 * achieved / (pt.peak_tflops * cell->clock->sm_mhz / spec.boost_clock_mhz->value);
      if (at_clock <= 100.0) pt.pct_peak_at_clock = at_clock;
    }
  }
  return pt;
}

namespace {

// Per-layer (model runs: the layer-scope GEMMs) or whole-plan efficiency of one mode and precision:
// FLOPs over summed time, as % of peak, and % of the peak at each cell's sampled clock (time-weighted).
struct Efficiency {
  std::optional<double> tflops, pct_peak, pct_peak_at_clock;
};

Efficiency efficiency(const RunResult& r, const GpuSpec& spec, size_t m, size_t p) {
  double flops = 0, ms = 0, peak_ms = 0, clock_ms = 0;  // clock_ms: sum of time x clock/boost
  bool all_clock = spec.boost_clock_mhz.has_value();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    if (r.plan.model_mode && x.scope != Scope::Layer) continue;
    const Cell& c = r.cell(m, g, p);
    if (!c.ok) return {};
    const auto pt = roofline_point(spec, x, r.precisions[p], r.modes[m], r.recipe_options, &c);
    if (!pt) return {};
    flops += pt->flops;
    ms += c.stats.mean_ms;
    peak_ms += pt->flops / (pt->peak_tflops * 1e12) * 1e3;
    if (c.clock && c.clock->sm_mhz > 0 && all_clock) clock_ms += c.stats.mean_ms * c.clock->sm_mhz / spec.boost_clock_mhz->value;
    else all_clock = false;
  }
  if (ms <= 0) return {};
  Efficiency e;
  e.tflops = flops / (ms * 1e-3) / 1e12;
  e.pct_peak = 100 * peak_ms / ms;
  if (all_clock && clock_ms > 0 && 100 * peak_ms / clock_ms <= 100.0) e.pct_peak_at_clock = 100 * peak_ms / clock_ms;
  return e;
}

std::string pct(const std::optional<double>& v) { return v ? fmt::format("{:.1f}%", *v) : "-"; }

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json sourced_json(const std::optional<Sourced>& s) {
  return s ? json{{"value", s->value}, {"source", s->source}} : json(nullptr);
}

}  // namespace

void add_roofline(print::Document& d, const RunResult& r, const RooflineContext& ctx) {
  if (r.dry_run || r.modes.empty()) return;
  d.title("Roofline and % of datasheet peak");
  if (!ctx.spec) {
    d.paragraph(ctx.note);
    return;
  }
  const GpuSpec& s = *ctx.spec;
  std::string sheet = fmt::format("Datasheet: {} ({}); memory {:.0f} GB/s", s.name, s.key, s.bandwidth_gbs->value);
  for (PeakFormat f : kAllPeakFormats)
    if (s.peak(f))
      sheet += fmt::format("; {} {:.0f} TFLOP/s (ridge {:.0f} FLOP/B)", to_string(f), s.peak(f)->value,
                           s.peak(f)->value * 1e12 / (s.bandwidth_gbs->value * 1e9));
  d.line(sheet);
  d.line(s.boost_clock_mhz
             ? fmt::format("Cells: arithmetic intensity (FLOP per byte of the timed region), C/M = compute/memory-bound "
                           "on this GPU, % of peak (% of the peak at the sampled SM clock, peaks assume {:.0f} MHz)",
                           s.boost_clock_mhz->value)
             : "Cells: arithmetic intensity (FLOP per byte of the timed region), C/M = compute/memory-bound on this GPU, "
               "% of peak (no clock for the datasheet peak: % at the sampled clock not computed)");
  for (size_t m = 0; m < r.modes.size(); ++m) {
    d.line(fmt::format("Mode: {}", to_string(r.modes[m])));
    std::vector<print::Column> cols = {{"GEMM", print::Align::Left, 22}};
    for (Precision p : r.precisions) cols.push_back({to_string(p), print::Align::Right, 22});
    print::Table t(std::move(cols), print::Table::Layout::Fixed);
    t.add_header();
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      const Gemm& x = r.plan.gemms[g];
      std::vector<print::Cell> row = {r.plan.model_mode ? fmt::format("{} {}", pass_label(x.pass), x.label()) : x.label()};
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        const auto pt = roofline_point(s, x, r.precisions[p], r.modes[m], r.recipe_options, &c);
        std::string cell = "-";
        if (pt) {
          cell = fmt::format("{:.0f}{} ", pt->intensity, pt->compute_bound ? "C" : "M");
          cell += !c.ok ? "N/A" : pt->pct_peak_at_clock ? fmt::format("{:.1f} ({:.1f})", *pt->pct_peak, *pt->pct_peak_at_clock)
                                                        : fmt::format("{:.1f}", *pt->pct_peak);
        }
        row.emplace_back(std::move(cell));
      }
      t.add_row(std::move(row));
    }
    std::vector<print::Cell> eff = {r.plan.model_mode ? "Per-layer efficiency" : "All GEMMs"};
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const Efficiency e = efficiency(r, s, m, p);
      eff.emplace_back(!e.pct_peak ? std::string("-")
                       : e.pct_peak_at_clock ? fmt::format("{} ({})", pct(e.pct_peak), pct(e.pct_peak_at_clock))
                                             : pct(e.pct_peak));
    }
    t.add_row(std::move(eff));
    d.table(std::move(t));
  }
}

std::string render_roofline_text(const RunResult& r, const RooflineContext& ctx) {
  print::Document d;
  add_roofline(d, r, ctx);
  // A blank line parts the section from the report above it.
  return d.blocks.empty() ? std::string() : "\n" + print::render(d, print::Format::Text);
}

json roofline_json(const RunResult& r, const RooflineContext& ctx) {
  json j;
  if (!ctx.spec) {
    j["gpu"] = nullptr;
    j["note"] = ctx.note;
    return j;
  }
  const GpuSpec& s = *ctx.spec;
  j["gpu"] = s.key;
  j["gpu_name"] = s.name;
  j["memory_bandwidth_gbs"] = sourced_json(s.bandwidth_gbs);
  j["boost_clock_mhz"] = sourced_json(s.boost_clock_mhz);
  j["sm_count"] = sourced_json(s.sm_count);
  json peaks = json::object();
  for (PeakFormat f : kAllPeakFormats) peaks[to_string(f)] = sourced_json(s.peak(f));
  j["peak_tflops"] = peaks;
  j["bytes_model"] = "GEMM operands in their format + scales + BF16 output, plus the mode's quantization passes (byte_count)";
  json cells = json::array();
  json per_layer = json::object();
  for (size_t m = 0; m < r.modes.size(); ++m) {
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell* c = r.dry_run ? nullptr : &r.cell(m, g, p);
        const auto pt = roofline_point(s, r.plan.gemms[g], r.precisions[p], r.modes[m], r.recipe_options, c);
        if (!pt) continue;
        cells.push_back({{"mode", to_string(r.modes[m])},
                         {"gemm", g},
                         {"precision", to_string(r.precisions[p])},
                         {"format", to_string(pt->format)},
                         {"flops", pt->flops},
                         {"bytes", pt->bytes},
                         {"intensity", pt->intensity},
                         {"ridge", pt->ridge},
                         {"bound", pt->compute_bound ? "compute" : "memory"},
                         {"peak_tflops", pt->peak_tflops},
                         {"roofline_ms", pt->roofline_ms},
                         {"achieved_tflops", opt(pt->achieved_tflops)},
                         {"pct_peak", opt(pt->pct_peak)},
                         {"pct_peak_at_clock", opt(pt->pct_peak_at_clock)}});
      }
    if (r.dry_run) continue;
    json pm = json::object();
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const Efficiency e = efficiency(r, s, m, p);
      pm[to_string(r.precisions[p])] = {{"tflops", opt(e.tflops)}, {"pct_peak", opt(e.pct_peak)},
                                        {"pct_peak_at_clock", opt(e.pct_peak_at_clock)}};
    }
    per_layer[to_string(r.modes[m])] = pm;
  }
  j["cells"] = cells;
  j["per_layer"] = per_layer;
  return j;
}

}  // namespace gs

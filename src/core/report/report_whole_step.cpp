#include "core/report/report_whole_step.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/util/error.hpp"

#include "core/report/step_record.hpp"
#include "core/step/step_trace.hpp"

namespace gs {

namespace {

std::string gb(double bytes) { return fmt::format("{:.1f}", bytes * 1e-9); }

std::string pct(std::optional<double> v) { return v ? fmt::format("{:.1f}%", 100 * *v) : "N/A"; }

std::string speedup(std::optional<double> v) { return v ? print::format_speedup(*v) : ""; }

// The precision the details are shown for: BF16 when it ran, else the first.
size_t baseline(const RunResult& r) {
  for (size_t p = 0; p < r.precisions.size(); ++p)
    if (r.precisions[p] == Precision::BF16) return p;
  return 0;
}

// "GEMMs measured; attention measured; other modelled; loss modelled, measured; ..."
std::string sources_line(const StepBreakdown& b) {
  std::string out;
  for (StepCategory c : kAllStepCategories) {
    std::vector<std::string> seen;
    for (const StepGroupResult& g : b.groups) {
      if (g.group.category != c) continue;
      const std::string s = to_string(g.time.source);
      if (std::find(seen.begin(), seen.end(), s) == seen.end()) seen.push_back(s);
    }
    if (seen.empty()) continue;
    std::string list;
    for (const std::string& s : seen) list += (list.empty() ? "" : " and ") + s;
    out += fmt::format("{}{} {}", out.empty() ? "" : "; ", category_label(c), list);
  }
  return out;
}

std::string memory_line(const MemoryBreakdown& m, Precision p, Recompute rc) {
  std::string out = fmt::format(
      "Memory per GPU ({}, modelled): weights {} + grads {} + main params {} + Adam states {}{} + activations {} "
      "(recompute {}) + runtime reserve {} = {} GB",
      to_string(p), gb(m.weights), gb(m.grads), gb(m.main_params), gb(m.optimizer_states),
      m.fp8_copies > 0 ? fmt::format(" + {} weight copies {}", to_string(p), gb(m.fp8_copies)) : std::string(), gb(m.activations), to_string(rc),
      gb(m.reserve), gb(m.total()));
  if (m.device_bytes)
    out += m.fits() ? fmt::format(" of the GPU's {} GB: fits, {} GB to spare", gb(*m.device_bytes), gb(*m.margin()))
                    : fmt::format(" of the GPU's {} GB: does NOT fit, {} GB short", gb(*m.device_bytes), gb(-*m.margin()));
  return out;
}

std::string host_line(const StepBreakdown& b) {
  const HostCost& h = b.host;
  std::string cost =
      h.form == HostForm::CudaGraph
          ? fmt::format("one CUDA graph replay, {:.0f} us (default, not measured)", h.graph_us)
          : fmt::format("{:.1f} us each: the launch {:.1f} us ({}) + {:.1f} us of {} per kernel (default, not measured)",
                        h.per_kernel_us(), h.launch_us, h.launch_measured ? "measured on this GPU" : "default, not measured",
                        h.overhead_us, h.form == HostForm::Compiled ? "Inductor's wrapper" : "framework dispatch");
  std::string out = fmt::format("Host: {} kernel launches per step ({}), {} = {} ms of host time", format_thousands(std::llround(b.launches)),
                                to_string(b.setup.form), cost, print::format_ms(b.host_ms));
  if (b.gpu_ms)
    out += b.host_bound ? fmt::format(": HOST-BOUND, above the GPU's {} ms (the step is the host's; a CUDA graph or "
                                      "torch.compile launches less)",
                                      print::format_ms(b.gpu_ms))
                        : fmt::format(", below the GPU's {} ms (not host-bound)", print::format_ms(b.gpu_ms));
  return out;
}

print::Table step_table(const std::vector<std::pair<std::string, int>>& cols) {
  print::Table t;
  t.layout = print::Table::Layout::Fixed;
  for (size_t i = 0; i < cols.size(); ++i)
    t.columns.push_back({cols[i].first, i == 0 ? print::Align::Left : print::Align::Right, cols[i].second});
  t.add_header();
  return t;
}

}  // namespace

size_t step_block_mode(const RunResult& r) {
  for (size_t m = 0; m < r.modes.size(); ++m)
    if (r.modes[m] == Mode::Training) return m;
  return 0;
}

void add_step_block(print::Document& d, const RunResult& r) {
  if (!r.step || r.step->steps.empty() || r.precisions.empty()) return;
  const size_t m = step_block_mode(r);
  const std::vector<StepBreakdown>& steps = r.step->steps[m];
  const StepBreakdown& base = steps[baseline(r)];
  const char* kind = r.predicted() ? "predicted" : "estimated";
  d.title(fmt::format("Whole training step on {} ({}, {} mode; {} layers, {} tokens):",
                      r.device ? r.device->name : "(no GPU)", step_context_framework(base.setup.framework == StepContextKind::None
                                                                                         ? StepContextKind::TransformerEngine
                                                                                         : base.setup.framework),
                      to_string(r.modes[m]), r.plan.layers(), format_thousands(base.setup.tokens)),
          2);
  d.line(fmt::format("Settings: {}", describe(base.setup.options, base.setup.framework)), 2);
  print::Table t = step_table({{"", 12}, {"step ms", 12}, {"tokens/s", 12}, {"MFU", 8}, {"HFU", 8},
                               {"memory GB", 12}, {"GEMM speedup", 14}, {"step speedup", 14}});
  for (size_t p = 0; p < steps.size(); ++p) {
    const StepBreakdown& b = steps[p];
    const StepSpeedups sp = step_speedups(r, m, p);
    const std::string mem = gb(b.memory.total()) + (b.memory.device_bytes ? (b.memory.fits() ? "" : " NO") : "");
    t.add_row({to_string(r.precisions[p]), print::format_ms(b.step_ms),
               b.tokens_per_s ? format_thousands(std::llround(*b.tokens_per_s)) : "N/A", pct(b.mfu), pct(b.hfu), mem,
               r.precisions[p] == Precision::BF16 ? "" : speedup(sp.gemm),
               r.precisions[p] == Precision::BF16 ? "" : speedup(sp.step)});
  }
  d.table(std::move(t));
  print::Table c = step_table({{"ms per step", 12}, {"GEMMs", 11}, {"attention", 11}, {"other", 10}, {"loss", 9},
                               {"optimizer", 11}, {"recompute", 11}, {"host", 9}});
  for (size_t p = 0; p < steps.size(); ++p) {
    const StepBreakdown& b = steps[p];
    std::vector<print::Cell> row = {to_string(r.precisions[p])};
    for (StepCategory cat : kAllStepCategories) row.push_back(print::format_ms(b.category(cat)));
    row.push_back(print::format_ms(b.host_exposed_ms()));
    c.add_row(std::move(row));
  }
  c.add_note("  host: launch time beyond the GPU's (0 unless host-bound); memory GB: NO = does not fit this GPU");
  d.table(std::move(c));
  if (!base.unknown.empty()) {
    const StepGroupResult* first = nullptr;
    for (const StepGroupResult& g : base.groups)
      if (!g.time.ms) { first = &g; break; }
    d.line(fmt::format("Step time unknown: {} of its groups have no time ({}: {})", base.unknown.size(),
                       first ? first->group.name : "", first ? first->time.how : ""),
           2);
  }
  d.line(fmt::format("Where the times come from ({}): {}", to_string(r.precisions[baseline(r)]), sources_line(base)), 2);
  d.line(fmt::format("The step is {}: each group's time as its source says, the groups back to back on one stream "
                     "(group by group below; docs/step.md)",
                     kind),
         2);
  d.line(host_line(base), 2);
  d.line(memory_line(base.memory, base.setup.precision, base.setup.options.recompute), 2);
  for (size_t p = 0; p < steps.size(); ++p)
    if (p != baseline(r) && steps[p].memory.total() != base.memory.total())
      d.line(fmt::format("Memory per GPU ({}): {} GB{}", to_string(r.precisions[p]), gb(steps[p].memory.total()),
                         steps[p].memory.fp8_copies > 0 ? fmt::format(" (weight copies {} GB; linear inputs saved in its format)",
                                                                      gb(steps[p].memory.fp8_copies))
                                                        : std::string()),
             2);
  d.line(r.step->peak ? fmt::format("MFU/HFU against the dense BF16 peak {:.0f} TFLOP/s ({}); model FLOPs {:.1f} "
                                    "TFLOP per step, Megatron-LM's definition (every linear GEMM x 3 passes + "
                                    "attention's QK^T and PV over the full s x s, no recompute); hardware FLOPs {:.1f}",
                                    r.step->peak->tflops, r.step->peak->source, base.model_flops * 1e-12,
                                    base.hardware_flops * 1e-12)
                      : fmt::format("MFU/HFU: N/A (no datasheet peak for this GPU); model FLOPs {:.1f} TFLOP per step "
                                    "(Megatron-LM's definition), hardware FLOPs {:.1f}",
                                    base.model_flops * 1e-12, base.hardware_flops * 1e-12),
         2);
  for (const std::string& n : base.notes) d.line("Assumed: " + n, 2);
}

void add_step_groups(print::Document& d, const RunResult& r, size_t mode) {
  if (!r.step || mode >= r.step->steps.size() || r.precisions.empty()) return;
  const StepBreakdown& b = r.step->steps[mode][baseline(r)];
  d.title(fmt::format("Whole step, group by group ({}, {} mode): per step", to_string(b.setup.precision), to_string(r.modes[mode])));
  print::Table t = step_table({{"group", 36}, {"runs", 6}, {"GFLOP", 11}, {"GB", 9}, {"launches", 10}, {"ms", 11},
                               {"source", 10}});
  for (const StepGroupResult& g : b.groups)
    t.add_row({g.group.name, fmt::format("{:g}", g.group.count), fmt::format("{:.1f}", g.group.total_flops() * 1e-9),
               fmt::format("{:.2f}", g.group.total_bytes() * 1e-9), format_thousands(std::llround(g.group.total_launches())),
               print::format_ms(g.total_ms()), to_string(g.time.source)});
  t.add_note("  GB: memory traffic of the memory-bound groups (the GEMMs' and attention's are in their cells)");
  d.table(std::move(t));
}

std::string step_plan_text(const RunResult& r) {
  if (!r.step || r.step->steps.empty() || r.precisions.empty()) return {};
  const size_t m = step_block_mode(r);
  const StepBreakdown& b = r.step->steps[m][baseline(r)];
  print::Document d;
  d.line(fmt::format("Whole training step plan ({}, {} mode, {}): FLOPs, bytes and launches per step; a measurement "
                     "times each group (measured or modelled, as the last column says)",
                     step_context_framework(b.setup.framework == StepContextKind::None ? StepContextKind::TransformerEngine
                                                                                  : b.setup.framework),
                     to_string(r.modes[m]), to_string(b.setup.precision)));
  d.line(fmt::format("Settings: {}", describe(b.setup.options, b.setup.framework)), 2);
  print::Table t = step_table({{"group", 36}, {"runs", 6}, {"GFLOP", 11}, {"GB", 9}, {"launches", 10}, {"time from", 40}});
  for (const StepGroupResult& g : b.groups) {
    std::string from;
    switch (g.group.basis) {
      case TimeBasis::GemmCells: from = "GEMM cells (measured)"; break;
      case TimeBasis::Attention: from = "cuDNN attention (measured)"; break;
      case TimeBasis::LayerOther: from = "step context (modelled bytes)"; break;
      case TimeBasis::Casts: from = "step context casts (modelled)"; break;
      case TimeBasis::StepKernel: from = "step kernel (measured, else modelled)"; break;
      case TimeBasis::Bytes: from = "bytes at the stand-in rate (modelled)"; break;
      case TimeBasis::Launches: from = "launch latency (modelled)"; break;
    }
    t.add_row({g.group.name, fmt::format("{:g}", g.group.count), fmt::format("{:.1f}", g.group.total_flops() * 1e-9),
               fmt::format("{:.2f}", g.group.total_bytes() * 1e-9), format_thousands(std::llround(g.group.total_launches())),
               from});
  }
  d.table(std::move(t));
  d.line(fmt::format("Per step: model FLOPs {:.2f} TFLOP (MFU's numerator, Megatron-LM's definition), hardware FLOPs "
                     "{:.2f} TFLOP; {} kernel launches ({} host: about {} ms at the default {:.0f} us per launch, modelled)",
                     b.model_flops * 1e-12, b.hardware_flops * 1e-12, format_thousands(std::llround(b.launches)),
                     to_string(b.setup.form), print::format_ms(b.host_ms), b.host.per_kernel_us()),
         2);
  for (size_t p = 0; p < r.step->steps[m].size(); ++p)
    d.line(memory_line(r.step->steps[m][p].memory, r.precisions[p], b.setup.options.recompute) +
               (r.step->steps[m][p].memory.device_bytes ? "" : " (no GPU: not set against a device's memory)"),
           2);
  for (const std::string& n : b.notes) d.line("Assumed: " + n, 2);
  return print::render(d, print::Format::Text);
}

std::string step_trace_text(const RunResult& r) {
  if (!r.step || !r.step->timed || r.step->steps.empty())
    throw UsageError("--trace needs a measured model run: nothing was timed");
  const size_t m = step_block_mode(r);
  std::vector<TraceTrack> tracks;
  for (size_t p = 0; p < r.step->steps[m].size(); ++p) {
    const std::string process = fmt::format("{} {} step ({}, {})", r.predicted() ? "predicted" : "estimated",
                                            to_string(r.precisions[p]), r.device ? r.device->name : "no GPU",
                                            to_string(r.modes[m]));
    for (TraceTrack& t : step_trace_tracks(r.step->steps[m][p], r.plan, static_cast<int>(p) + 1, process))
      tracks.push_back(std::move(t));
  }
  return chrome_trace(tracks, {{"tool", "gemmscope"},
                               {"model", r.plan.config ? r.plan.config->name : ""},
                               {"what", "the whole training step as gemmscope estimates it: each group's time is "
                                        "measured or modelled as its args' source says"}});
}

}  // namespace gs

#include "core/report/report_step.hpp"

#include <fmt/format.h>

#include "core/results/step_context_records.hpp"

namespace gs {

void add_step_context(print::Document& d, const RunResult& r) {
  const StepContextKind kind = r.timing.step_context_kind;
  if (!r.timing.step_context()) return;
  if (const std::optional<StepContextInfo> sc = step_context_view(r)) {
    const StepContextInfo& c = *sc;
    d.line(fmt::format("Step context: {} (--step-context {}), per layer between timed iterations, outside the samples, "
                       "spread over the GEMMs by FLOPs:",
                       step_context_framework(c.kind), to_string(c.kind)));
    // MoE dispatch and combine run as the gather stand-in: their part, where there is one.
    const std::string moved =
        c.move_ms > 0 ? fmt::format(", of which {:.3f} ms MoE token dispatch and combine, run as a row gather by index "
                                    "({:.0f} GB/s on this GPU: such kernels draw less power than activations)",
                                    c.move_ms, c.move_gb_per_s)
                      : std::string();
    if (c.other_from_user)
      d.line(fmt::format("other kernels {:.3f} ms (--step-other-ms, your step's figure{}); the stand-ins carry its time, "
                         "not its power: where your non-GEMM kernels run far below bandwidth they draw less, and BF16 "
                         "GEMMs at the power cap read high (up to ~8% against an eager PyTorch MoE step; "
                         "docs/step-context.md)",
                         c.memory_ms(), c.move_ms > 0 ? ", split by the modelled bytes" + moved : std::string()),
             2);
    else
      d.line(fmt::format("other kernels {:.3f} ms (modelled: the bytes of norms, activations, residuals and layout "
                         "copies at {:.2f}x the stand-in kernel's {:.0f} GB/s on this GPU{}){}",
                         c.memory_ms(), c.efficiency, c.stream_gb_per_s, moved,
                         c.cast_ms > 0 ? fmt::format("; FP8 casts {:.3f} ms in pre-quantized FP8 cells", c.cast_ms)
                                       : std::string()),
             2);
    if (c.attention_ms() > 0)
      d.line(fmt::format("attention {:.3f} ms forward + {:.3f} ms backward ({}; {})", c.attention_fwd_ms,
                         c.attention_bwd_ms, c.attention_source, c.attention_shape),
             2);
    return;
  }
  // Not measured (a dry run, or a file from before the context was recorded): what would run.
  if (!r.plan.model_mode || !r.plan.config) return;
  if (kind == StepContextKind::None) {
    d.line(fmt::format("Step context: {:g} ms of memory-bound work per layer between timed iterations "
                       "(--step-other-ms)", r.timing.step_other_ms));
    return;
  }
  const StepWorkModel m = step_work_model(r.plan, kind);
  const std::string memory =
      r.timing.step_other_ms > 0
          ? fmt::format("memory-bound kernels for {:g} ms (--step-other-ms)", r.timing.step_other_ms)
          : fmt::format("memory-bound kernels moving {:.2f} GB (modelled{}; FP8 casts {:.2f} GB more in pre-quantized FP8 "
                        "cells)",
                        (m.other_bytes + m.move_bytes) * 1e-9,
                        m.move_bytes > 0 ? fmt::format(", of which {:.2f} GB MoE token dispatch and combine, run as a "
                                                       "row gather by index",
                                                       m.move_bytes * 1e-9)
                                         : std::string(),
                        m.cast_bytes * 1e-9);
  d.line(fmt::format("Step context: {} (--step-context {}) {} between timed iterations, per layer, spread over the "
                     "GEMMs by FLOPs: {}, and attention ({}; {:.2f} TFLOP forward + backward; cuDNN's fused attention, "
                     "timed on the GPU)",
                     step_context_framework(kind), to_string(kind), r.dry_run ? "would run" : "ran", memory,
                     describe(m.attention), (attention_fwd_flops(m.attention) + attention_bwd_flops(m.attention)) * 1e-12));
}

std::string step_context_lines(const RunResult& r) {
  print::Document d;
  add_step_context(d, r);
  return print::render(d, print::Format::Text);
}

std::vector<StepEstimate> step_estimates(const RunResult& r, size_t mode) {
  std::vector<StepEstimate> out;
  const std::optional<StepContextInfo> sc = step_context_view(r);
  if (!sc || !r.plan.model_mode || mode >= r.modes.size()) return out;
  const StepContextInfo& c = *sc;
  const ModeSummary s = summarize_mode(r, mode);
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    StepEstimate e;
    e.gemm_ms = s.sums[p].average_layer;
    e.attention_ms = c.attention_ms();
    e.other_ms = c.memory_ms();
    // Pre-quantized GEMMs leave the FP8 casts out of their time: the step has them.
    if (r.precisions[p] != Precision::BF16 && r.modes[mode] == Mode::PreQuantized) e.other_ms += c.cast_ms;
    out.push_back(e);
  }
  return out;
}

void add_step_estimate(print::Document& d, const RunResult& r, size_t mode) {
  const std::vector<StepEstimate> est = step_estimates(r, mode);
  if (est.empty()) return;
  const StepContextInfo c = *step_context_view(r);  // est holds its figures
  std::optional<size_t> bf16;
  for (size_t p = 0; p < r.precisions.size(); ++p)
    if (r.precisions[p] == Precision::BF16) bf16 = p;
  d.title(fmt::format("Step estimate of the average layer{} (ms): GEMMs measured, attention {}, other work modelled{}",
                      r.plan.has_moe() ? ", experts included" : "", c.attention_measured ? "measured" : "modelled",
                      c.other_from_user ? " (--step-other-ms)" : ""));
  using print::Align;
  print::Table t({{"", Align::Left, 14},
                  {"GEMMs", Align::Right, 10},
                  {"attention", Align::Right, 11},
                  {"other", Align::Right, 9},
                  {"step", Align::Right, 10},
                  {"GEMM speedup", Align::Right, 14},
                  {"step speedup", Align::Right, 14}},
                 print::Table::Layout::Fixed);
  t.add_header();
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    const StepEstimate& e = est[p];
    std::string gsp, ssp;
    if (bf16 && p != *bf16 && e.gemm_ms && est[*bf16].gemm_ms && *e.gemm_ms > 0) {
      gsp = print::format_speedup(*est[*bf16].gemm_ms / *e.gemm_ms);
      ssp = print::format_speedup(*est[*bf16].step_ms() / *e.step_ms());
    }
    t.add_row({to_string(r.precisions[p]), print::format_ms(e.gemm_ms), print::format_ms(e.attention_ms), print::format_ms(e.other_ms),
               print::format_ms(e.step_ms()), gsp, ssp});
  }
  d.table(std::move(t));
  d.line("Speedups vs BF16 of the average layer: its GEMMs alone, and its step (GEMMs + attention + other). The LM "
         "head (once per step), optimizer, communication and host gaps are not in it.",
         2);
}

std::string step_estimate_block(const RunResult& r, size_t mode) {
  print::Document d;
  add_step_estimate(d, r, mode);
  return print::render(d, print::Format::Text);
}

}  // namespace gs

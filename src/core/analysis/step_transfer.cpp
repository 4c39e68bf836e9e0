#include "core/analysis/step_transfer.hpp"

#include <fmt/format.h>

#include "core/analysis/predict_cell.hpp"
#include "core/results/step_context_records.hpp"
#include "core/results/step_kernel_records.hpp"
#include "core/run/step_run.hpp"

namespace gs {

StepTransfer transfer_step(const StepParts& source, double gemm_ms_target, const GpuSpec& src, const GpuSpec& tgt,
                           double model_flops, double attention_eff_source, double attention_eff_target) {
  StepTransfer out;
  const double peak_s = required_peak_flops(src, Precision::BF16, "the step's attention"),
               peak_t = required_peak_flops(tgt, Precision::BF16, "the step's attention and MFU");
  const bool effs = attention_eff_source > 0 && attention_eff_target > 0;
  out.attention_factor = (peak_s * (effs ? attention_eff_source : 1.0)) / (peak_t * (effs ? attention_eff_target : 1.0));
  out.memory_factor = src.bandwidth_gbs->value / tgt.bandwidth_gbs->value;
  out.target.gemm_ms = gemm_ms_target;
  out.target.attention_ms = source.attention_ms * out.attention_factor;
  out.target.memory_ms = source.memory_ms * out.memory_factor;
  out.target.unscaled_ms = source.unscaled_ms;
  const double t = out.target.total();
  out.mfu = t > 0 ? model_flops / (t * 1e-3) / peak_t : 0;
  out.basis = fmt::format(
      "attention x{:.3f} (dense BF16 peak {} / {}{}), memory-bound work x{:.3f} (bandwidth {:.0f} / {:.0f} GB/s), "
      "{:.3f} ms of host gaps and collectives carried as measured",
      out.attention_factor, src.key, tgt.key,
      effs ? fmt::format(" at {:.0f}% / {:.0f}% attention efficiency", 100 * attention_eff_source, 100 * attention_eff_target)
           : std::string(", the same fraction of it assumed: no attention prior"),
      out.memory_factor, src.bandwidth_gbs->value, tgt.bandwidth_gbs->value, source.unscaled_ms);
  return out;
}

void carry_step(const RunResult& run, const GpuSpec& src, const GpuSpec& tgt, RunResult& out,
                std::vector<std::string>& notes) {
  const std::optional<StepContextInfo> context = step_context_view(run);
  if (!run.step || !run.step->timed || !context || !run.plan.model_mode) return;
  const StepTransfer f = transfer_step(StepParts{}, 0, src, tgt, 0);
  StepContextInfo c = *context;
  c.attention_fwd_ms *= f.attention_factor;
  c.attention_bwd_ms *= f.attention_factor;
  c.other_ms *= f.memory_factor;
  c.move_ms *= f.memory_factor;
  c.cast_ms *= f.memory_factor;
  if (c.stream_gb_per_s > 0) c.stream_gb_per_s /= f.memory_factor;
  if (c.move_gb_per_s > 0) c.move_gb_per_s /= f.memory_factor;
  c.attention_source = fmt::format("predicted for {} from {} on {} (x{:.3f})", tgt.key, c.attention_source, src.key,
                                   f.attention_factor);
  // The step kernels measured on the source, carried by the bandwidths as predicted records (the
  // launch latency is the host's, carried as it is); an N/A kernel stays N/A with its reason.
  std::vector<StepKernelRun> kernels = step_kernel_runs(run);
  for (StepKernelRun& k : kernels)
    if (k.ok && k.spec.kind != StepKernelKind::LaunchLatency) k.mean_ms *= f.memory_factor;
  set_step_kernel_records(out, kernels, Source::Predicted);
  set_step_context_records(out, c);
  out.step_options = run.step_options;
  out.step = step_from_result(out, true);
  if (const auto& peak = tgt.peak(PeakFormat::BF16))
    set_step_peak(*out.step, {peak->value, fmt::format("{}, {}", tgt.name, peak->source)});
  notes.push_back(fmt::format("the whole step: the GEMMs as predicted above; {}; the host's launch cost as measured on "
                              "{} (the host is not the GPU's)",
                              f.basis.substr(0, f.basis.rfind(", ")), src.key));
}

}  // namespace gs

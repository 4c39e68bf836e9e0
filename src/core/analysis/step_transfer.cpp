#include "core/analysis/step_transfer.hpp"

#include <fmt/format.h>

#include "core/analysis/predict_cell.hpp"

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

}  // namespace gs

#include "core/run/step_context.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/util/error.hpp"
#include "core/plan/step_model.hpp"

namespace gs {

double step_gap_ms_per_gflop(const Plan& plan, double other_ms_per_layer) {
  if (!(std::isfinite(other_ms_per_layer) && other_ms_per_layer >= 0 && other_ms_per_layer <= kMaxStepOtherMs))
    throw UsageError(fmt::format("--step-other-ms must be between 0 and {:g} ms per layer", kMaxStepOtherMs));
  if (other_ms_per_layer == 0) return 0;
  if (!plan.model_mode)
    throw UsageError("--step-other-ms needs a model plan: it is the non-GEMM time of a layer's training step, and "
                     "--shapes/--sweep GEMMs stand alone");
  const double layer_gflops = average_layer_gflops(plan);
  if (!(layer_gflops > 0)) throw UsageError("--step-other-ms: the plan has no layer GEMMs to spread the work over");
  return other_ms_per_layer / layer_gflops;
}

double step_gap_ms(const TimingConfig& t, const Gemm& g) { return t.step_gap_ms_per_gflop * g.flops() * 1e-9; }

}  // namespace gs

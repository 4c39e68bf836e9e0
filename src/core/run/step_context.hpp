// The spread of a step's non-GEMM work over the GEMMs of a layer (--step-other-ms, and the step
// context's modelled work: core/plan/step_model.hpp).
//
// A training step does not run its GEMMs back to back: norms, activations, residual adds and
// quantization kernels run between them. On a power-capped GPU that memory-bound work lowers the
// average power, and the GPU holds a higher SM clock through the GEMMs too: on an H100, a BF16
// 15872x4096x16384 GEMM followed by memory-bound copies lasting 10/25/50% of its time ran 1.5/3.8/
// 7.5% faster than back to back (bench/step_context_probe.py). The work of an average layer is run
// between timed iterations, outside the samples, spread over the GEMMs in proportion to their
// FLOPs, so the GEMMs run in the power state of the step. Given the user's own non-GEMM time per
// layer (--step-other-ms), that time replaces the modelled one. Pure, so the arithmetic is tested
// on CPU.
#pragma once
#include "core/plan/plan.hpp"
#include "core/results/results.hpp"

namespace gs {

// Memory-bound work per GEMM FLOP (ms per GFLOP) for `other_ms_per_layer` of non-GEMM work per
// layer: other_ms over the FLOPs of an average layer (dense and MoE layers weighted by their
// counts; the LM head is not a layer's). 0 for 0. UsageError for a plan without layers
// (--shapes/--sweep: a standalone GEMM has no step around it) or an out-of-range value.
double step_gap_ms_per_gflop(const Plan& plan, double other_ms_per_layer);

// The memory-bound work that follows each timed iteration of `g` under `t` (ms); 0 without
// --step-other-ms.
double step_gap_ms(const TimingConfig& t, const Gemm& g);

}  // namespace gs

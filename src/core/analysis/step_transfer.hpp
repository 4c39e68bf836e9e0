// The hook that carries a measured training step onto another GPU (docs/predict.md, "The step,
// predicted"): the GEMMs come from the per-cell prediction (predict_cell.hpp); attention is scaled
// by the BF16 peak times an attention efficiency, the memory-bound work (norms, activations,
// quantization outside the GEMMs, optimizer) by the memory bandwidth, and what neither describes
// (host launch gaps, collectives) is carried unchanged and says so. transfer_step takes narrow
// inputs (the source's step parts in ms and the two datasheets); carry_step applies its factors to
// a measured run's whole step (src/core/step/) for predict.
#pragma once
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/results/results.hpp"

namespace gs {

// A step's time split as the whole-step block reports it, per training step, in ms.
struct StepParts {
  double gemm_ms = 0;         // the linear layers' GEMMs (and their quantization)
  double attention_ms = 0;    // the attention kernels (FlashAttention/cuDNN, BF16)
  double memory_ms = 0;       // memory-bound kernels: norms, activations, casts, optimizer
  double unscaled_ms = 0;     // host gaps, collectives: carried as measured
  double total() const { return gemm_ms + attention_ms + memory_ms + unscaled_ms; }
};

struct StepTransfer {
  StepParts target;
  double attention_factor = 1, memory_factor = 1;  // target / source time
  std::string basis;
  // MFU on the target (model FLOPs / step time / dense BF16 peak); 0 when the peak is unknown.
  double mfu = 0;
};

// `gemm_ms_target`: the predicted GEMM time of the step on the target. `attention_eff_*`: the
// fraction of the dense BF16 peak the attention kernels reach on each GPU (1 and 1 when no prior:
// the same fraction assumed, and the basis says so). `model_flops`: the step's model FLOPs (for MFU).
// UsageError (naming the field) when either GPU lacks a BF16 peak.
StepTransfer transfer_step(const StepParts& source, double gemm_ms_target, const GpuSpec& src, const GpuSpec& tgt,
                           double model_flops, double attention_eff_source = 0, double attention_eff_target = 0);

// The whole step of `run` (measured on `src`) onto `out`, a prediction for `tgt` whose cells are
// already predicted: the step context's attention scaled by transfer_step's attention factor, its
// memory-bound work and stand-in rates and the step kernels (optimizer, loss, embedding) by the
// bandwidth ratio, the launch latency carried (a host cost), then the step recomputed from `out`'s
// cells (core/run/step_run.hpp) with MFU against the target's dense BF16 peak. Appends what it
// assumed to `notes`. Nothing when the run has no timed step (a shapes run, a file without one).
void carry_step(const RunResult& run, const GpuSpec& src, const GpuSpec& tgt, RunResult& out,
                std::vector<std::string>& notes);

}  // namespace gs

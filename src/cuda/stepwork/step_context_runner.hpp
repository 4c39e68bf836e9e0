// The step context on the GPU (core/plan/step_model.hpp): after each timed iteration of a GEMM, its
// share (by FLOPs) of what an average layer's step runs between its GEMMs.
//   - memory-bound kernels: the modelled bytes at the framework's efficiency, run as the
//     calibrated activation kernel (step_work.hpp) for that long, and an MoE layer's token
//     dispatch and combine as the calibrated row gather (a --step-other-ms figure is split between
//     the two by the modelled bytes: split_step_other_ms);
//   - attention: cuDNN's fused attention (the kernels Transformer Engine runs on Hopper) when it
//     loads and supports the layer; its forward and backward are enqueued whole whenever the
//     GEMMs' accumulated share reaches one of them, so over a timed loop the attention time per
//     GEMM FLOP is the step's. Without cuDNN, attention's time is modelled from its FLOPs and run as
//     memory-bound work (labelled as such).
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

#include "core/plan/plan.hpp"
#include "core/results/results.hpp"
#include "core/plan/step_model.hpp"
#include "cuda/stepwork/step_work.hpp"

namespace gs::cuda {

// Attention kernels the context can run (a measured implementation, e.g. cuDNN's SDPA).
class AttentionKernels {
 public:
  virtual ~AttentionKernels() = default;
  virtual void enqueue_forward(cudaStream_t s) = 0;
  virtual void enqueue_backward(cudaStream_t s) = 0;
  virtual int launches_forward() const = 0;   // operations each enqueues (an upper bound)
  virtual int launches_backward() const = 0;
  virtual std::string source() const = 0;     // "cuDNN 9.14.0 fused attention (BF16)"
};

// nullptr and `why` when attention cannot be run here (built without cuDNN support, the library
// does not load, or the shape is unsupported).
std::unique_ptr<AttentionKernels> make_attention_kernels(const AttentionShape& a, cudaStream_t s, std::string& why);

class StepContextRunner {
 public:
  // Calibrates the memory-bound kernel and times attention on `stream` (synchronizes it).
  // `user_other_ms` > 0 (--step-other-ms) replaces the modelled memory-bound time.
  StepContextRunner(const StepWorkModel& model, double user_other_ms, const DeviceInfo& device, int clock_khz,
                    cudaStream_t stream);
  ~StepContextRunner();
  // The work after one iteration of `g` (empty when there is none); `casts`: FP8 casts are not in
  // the timed region (pre-quantized FP8 cells) and belong to the context.
  std::function<void()> between(const Gemm& g, bool casts);
  int between_cost() const {
    return 2 + (attention_ ? (kMaxPasses / 2 + 1) * (attention_->launches_forward() + attention_->launches_backward()) : 0);
  }
  const StepContextInfo& info() const { return info_; }

 private:
  static constexpr int kMaxPasses = 4;  // attention passes one call may enqueue
  double share(const Gemm& g) const { return g.flops() * 1e-9 / model_.layer_gflops; }
  StepWorkModel model_;
  StepContextInfo info_;
  cudaStream_t stream_;
  std::unique_ptr<StepWork> work_;
  std::unique_ptr<AttentionKernels> attention_;
  double owed_ms_ = 0;     // attention time the GEMMs have accumulated and not yet run
  bool next_forward_ = true;
};

}  // namespace gs::cuda

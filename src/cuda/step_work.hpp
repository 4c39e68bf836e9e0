// Memory-bound work between timed iterations: the stand-in for a training step's non-GEMM
// kernels (--step-other-ms, core/run/step_context.hpp). One activation-like kernel (BF16 in, GELU in
// FP32, BF16 out) streams between two buffers larger than the L2, wrapping around them for as many
// bytes as the requested time needs; its rate is calibrated once on this GPU, so "0.3 ms of work"
// is real traffic and math, not a sleep or a plain copy (an idle GPU or a copy draws less power
// than a norm, an activation or a cast does, and would flatter the clocks).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_buffer.hpp"

namespace gs::cuda {

class StepWork {
 public:
  // Buffers of max(2 x L2, 64 MiB) each; calibrates on `stream` (synchronizes it).
  StepWork(int64_t l2_bytes, cudaStream_t stream);
  // Enqueues about `ms` of memory-bound work on `stream` (one kernel launch; none for ms <= 0).
  void enqueue(double ms, cudaStream_t stream) const;
  double bytes_per_ms() const { return bytes_per_ms_; }

 private:
  void launch(int64_t bytes, cudaStream_t stream) const;  // bytes read + written
  DeviceBuffer src_, dst_;
  int sms_ = 1;
  double bytes_per_ms_ = 0;
};

}  // namespace gs::cuda

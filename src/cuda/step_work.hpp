// Memory-bound work between timed iterations: the non-GEMM kernels of a training step stand-in
// (--step-other-ms, core/step_context.hpp). One copy kernel streams between two buffers larger
// than the L2, wrapping around them for as many bytes as the requested time needs; its bandwidth
// is calibrated once on this GPU, so "0.3 ms of work" is bytes, not a sleep (an idle GPU draws
// less power than a norm or an activation kernel does, and would flatter the clocks).
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

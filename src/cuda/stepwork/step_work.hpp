// Memory-bound work between timed iterations: the stand-ins for a training step's non-GEMM
// kernels (core/plan/step_model.hpp, --step-other-ms). Two kinds, because the power the work draws
// sets the clocks of the GEMMs around it:
//   - activation-like (enqueue): BF16 in, GELU in FP32, BF16 out, streaming between two buffers
//     larger than the L2 (norms, activations, residuals and casts draw about a GEMM's power; a
//     plain copy or an idle GPU draws less and would flatter the clocks);
//   - gather (enqueue_gather): rows of 8 KiB copied by a random permutation, as an MoE layer's token
//     dispatch and combine move rows by index (they draw well below a GEMM's power).
// Each wraps around its buffers for as many bytes as the requested time needs; each rate is
// calibrated once on this GPU, so "0.3 ms of work" is real traffic, not a sleep.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_buffer.hpp"

namespace gs::cuda {

class StepWork {
 public:
  // Buffers of max(2 x L2, 64 MiB) each; calibrates on `stream` (synchronizes it).
  StepWork(int64_t l2_bytes, cudaStream_t stream);
  // Enqueues about `ms` of activation-like work on `stream` (one kernel launch; none for ms <= 0).
  void enqueue(double ms, cudaStream_t stream) const;
  // Enqueues about `ms` of row gathers by index (one kernel launch; none for ms <= 0).
  void enqueue_gather(double ms, cudaStream_t stream) const;
  double bytes_per_ms() const { return bytes_per_ms_; }
  double gather_bytes_per_ms() const { return gather_bytes_per_ms_; }

 private:
  void launch(int64_t bytes, cudaStream_t stream) const;         // bytes read + written
  void launch_gather(int64_t bytes, cudaStream_t stream) const;  // bytes read + written
  DeviceBuffer src_, dst_, perm_;
  int64_t rows_ = 0;  // gather rows in each buffer
  int sms_ = 1;
  double bytes_per_ms_ = 0, gather_bytes_per_ms_ = 0;
};

}  // namespace gs::cuda

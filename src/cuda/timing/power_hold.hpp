// The GPU's loaded power state, on demand.
//
// Under a power cap the SM clock follows what ran in the last few milliseconds. Between two cells
// the host builds the next cell's buffers and recipes, and while it enqueues a timed loop's first
// chunk the GPU waits at the launch gate: both are idle gaps in which the GPU boosts. A timed loop
// shorter than the clock controller's reaction then runs at that boost clock from start to end
// (on an H100, DeepSeek-V3's short cells read at 1800-1950 MHz where the run's steady clock was
// 1340-1425 MHz), faster than inside a training step, where the GEMMs around it keep the GPU at
// its cap. PowerHold enqueues heavy BF16 GEMMs (one cuBLASLt launch each, so the host enqueues
// milliseconds of GPU work in microseconds) right before a loop's gate closes, covering the time
// the host takes to enqueue the first chunk: every loop starts from the loaded state. A loop that
// is light by itself (memory- or launch-bound) still drifts to its own clock as it runs; a short
// compute-bound one no longer starts from a boost. The run's GPU warm-up is the same work, longer.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>

#include "cuda/common/device_buffer.hpp"

namespace gs::cuda {

class LtMatmul;

class PowerHold {
 public:
  // Allocates the GEMM's operands (3 x 32 MiB) and times it once (throws CudaError, CublasError).
  PowerHold(cublasLtHandle_t handle, void* workspace, size_t workspace_bytes, cudaStream_t s);
  ~PowerHold();
  PowerHold(const PowerHold&) = delete;
  PowerHold& operator=(const PowerHold&) = delete;

  // Enqueues GEMMs for about `gpu_ms` of GPU time at the rate timed at construction (at least one).
  void enqueue(cudaStream_t s, double gpu_ms);
  // Runs GEMMs until `seconds` of GPU time have passed (the run's warm-up); synchronizes.
  void run_for(cudaStream_t s, double seconds);
  double gemm_ms() const { return gemm_ms_; }

  // The hold before a loop: 1.5x the host's expected enqueue time of the first chunk, within
  // [kMinMs, kMaxMs].
  static constexpr double kMinMs = 2.0, kMaxMs = 50.0;
  static double hold_ms(double host_enqueue_ms);

 private:
  static constexpr int kDim = 4096;  // 137 GFLOP: ~0.2 ms at an H100's cap
  DeviceBuffer a_, b_, c_;
  std::unique_ptr<LtMatmul> mm_;
  double gemm_ms_ = 0.2;
};

}  // namespace gs::cuda

// Timing of work enqueued on a stream outside the timed loop (calibrations, one-off passes): a pair
// of CUDA events owned for the timer's lifetime, so a throwing enqueue never leaks them.
#pragma once
#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"

namespace gs::cuda {

class EventTimer {
 public:
  EventTimer() {
    GS_CUDA(cudaEventCreate(&start_));
    if (cudaError_t e = cudaEventCreate(&stop_); e != cudaSuccess) {
      cudaEventDestroy(start_);
      GS_CUDA(e);
    }
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // GPU time (ms) of what `enqueue()` puts on `s`; synchronizes with its end.
  template <class F>
  double time_ms(cudaStream_t s, F&& enqueue) {
    GS_CUDA(cudaEventRecord(start_, s));
    enqueue();
    GS_CUDA(cudaEventRecord(stop_, s));
    GS_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    GS_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace gs::cuda

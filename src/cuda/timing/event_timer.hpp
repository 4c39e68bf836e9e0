// Timing of work enqueued on a stream outside the timed loop (calibrations, one-off passes): a pair
// of CUDA events owned for the timer's lifetime (cuda_handles.hpp).
#pragma once
#include <cuda_runtime.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_handles.hpp"

namespace gs::cuda {

class EventTimer {
 public:
  EventTimer() : start_(make_event()), stop_(make_event()) {}

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
  Event start_, stop_;
};

}  // namespace gs::cuda

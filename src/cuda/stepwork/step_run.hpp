// A step kernel ready to run (core/step/step_kernels.hpp): its buffers are made and filled, and one
// call of it is a fixed sequence of pieces, each one kernel launch or memset on the stream. The
// timed loop (cuda/timed_loop's run_timed_loop) enqueues the pieces one by one, so a call of hundreds
// of launches (an optimizer step over a large model) is cut into chunks like any other loop.
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace gs::cuda::stepwork {

class StepRun {
 public:
  virtual ~StepRun() = default;
  virtual int pieces() const = 0;
  virtual void enqueue(int piece, cudaStream_t s) = 0;
  // What runs, in words, for the cell's kernel configuration ("multi-tensor AdamW ...").
  virtual std::string describe() const = 0;
  void enqueue_all(cudaStream_t s) {
    for (int i = 0; i < pieces(); ++i) enqueue(i, s);
  }
};

}  // namespace gs::cuda::stepwork

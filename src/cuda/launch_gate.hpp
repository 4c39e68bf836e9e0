// Holds a stream's queue closed while the host enqueues a timed loop, so the GPU runs the loop
// back to back instead of at the host's launch rate (small GEMMs take less GPU time than their
// launches take host time). A one-thread kernel spins on a host-mapped flag; release() opens it.
// A timeout (GPU clock) bounds the wait if the host blocks first, e.g. on a full launch queue.
#pragma once
#include <cuda_runtime.h>

namespace gs::cuda {

class LaunchGate {
 public:
  LaunchGate();  // throws CudaError
  ~LaunchGate();
  LaunchGate(const LaunchGate&) = delete;
  LaunchGate& operator=(const LaunchGate&) = delete;

  // Enqueue the closed gate on `s`; everything enqueued after it waits for release() or the timeout.
  void close(cudaStream_t s, double timeout_ms = 200.0);
  void release();
  // After the work behind the gate completed: did the gate open by timeout rather than release()?
  bool timed_out() const;

  // The gate closed on a stream for the lifetime of this object: what is enqueued meanwhile
  // waits; the destructor releases it, also when an exception leaves the scope.
  class Closed {
   public:
    Closed(LaunchGate& g, cudaStream_t s, double timeout_ms = 200.0) : g_(g) { g_.close(s, timeout_ms); }
    ~Closed() { g_.release(); }
    Closed(const Closed&) = delete;
    Closed& operator=(const Closed&) = delete;

   private:
    LaunchGate& g_;
  };

 private:
  volatile int* flags_ = nullptr;  // [0] open (host writes), [1] timed out (device writes)
};

}  // namespace gs::cuda

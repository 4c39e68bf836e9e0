// Holds a stream's queue closed while the host enqueues a timed loop, so the GPU runs the loop
// back to back instead of at the host's launch rate (small GEMMs take less GPU time than their
// launches take host time). A one-thread kernel spins on a host-mapped flag; release() opens it.
// A timeout (GPU clock) bounds the wait if the host blocks first, e.g. on a full launch queue;
// a gate that opened by its timeout is recorded, never silent (timed_out_since()).
//
// Gates are numbered (tickets): close() enqueues gate number t, which waits until release() has
// been called for t or a later gate. Several gates may therefore be queued at once, as the
// chunked timed loop (timed_loop.hpp) needs: it closes the next chunk's gate while the previous
// chunk still runs, without the race a single shared open/closed flag would have.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

class LaunchGate {
 public:
  LaunchGate();  // throws CudaError
  ~LaunchGate();
  LaunchGate(const LaunchGate&) = delete;
  LaunchGate& operator=(const LaunchGate&) = delete;

  // Enqueue a closed gate on `s`; everything enqueued after it waits for release() or the
  // timeout. Returns the gate's ticket.
  uint32_t close(cudaStream_t s, double timeout_ms = 200.0);
  // Opens every gate closed so far.
  void release();
  // After the work behind the gates completed: did any gate with ticket >= `first` open by its
  // timeout rather than by release()?
  bool timed_out_since(uint32_t first) const;
  // The most recently closed gate opened by timeout (after the work behind it completed).
  bool timed_out() const { return last_ != 0 && timed_out_since(last_); }
  // The ticket the next close() returns.
  uint32_t next_ticket() const { return last_ + 1; }

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
  // [0] highest released ticket (host writes), [1] highest ticket that timed out (device writes;
  // gates run in ticket order on one stream, so it only grows).
  volatile uint32_t* flags_ = nullptr;
  uint32_t last_ = 0;  // highest ticket closed
};

}  // namespace gs::cuda

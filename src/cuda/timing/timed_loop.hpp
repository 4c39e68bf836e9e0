// The timed loop of one cell, enqueued behind the launch gate in chunks that fit the launch queue.
//
// A stream's launch queue holds about a thousand pending operations; once it is full the host
// blocks in the next launch. A loop enqueued behind one closed gate must therefore fit the queue,
// or the host blocks, the gate opens by its timeout and the rest of the loop runs at the host's
// launch rate (a 5000-iteration FP8 per-gemm loop read 30% slow that way). Here the loop is cut
// into chunks of at most kChunkOps operations per stream, each behind its own gate: the host
// enqueues chunk c+1 while the GPU runs chunk c, and never has more than two chunks pending.
// The GPU may idle at a chunk's gate (when the host is slower): each chunk's timing starts with
// an event recorded after its gate, so the idle time is never part of a sample.
//
// An iteration is a sequence of pieces (one GEMM step for a dense cell, one expert for a grouped
// one). A chunk boundary falls between pieces, mid-iteration if one iteration alone does not fit
// a chunk (grouped GEMMs with hundreds of experts): the iteration's time is then the sum of its
// segments. Pieces on side streams are bracketed by fork/join hooks, called at the start and end
// of every run of pieces between two boundaries.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <optional>
#include <vector>

#include "core/results/results.hpp"
#include "cuda/timing/clock_probe.hpp"
#include "cuda/common/cuda_handles.hpp"
#include "cuda/timing/launch_gate.hpp"

namespace gs::cuda {

// Operations (kernel launches, event records and waits, memsets) per stream and chunk: a third of
// the ~1000-entry queue, so a chunk still pending on the GPU plus the one being enqueued fit.
constexpr int kChunkOps = 320;

struct LoopBody {
  int pieces = 1;        // per iteration
  int streams = 1;       // queues the pieces go to (index 0 = the timing stream)
  std::function<int(int)> stream_of = [](int) { return 0; };
  std::function<int(int)> cost;      // operations piece i enqueues on its stream (an upper bound)
  std::function<void(int)> enqueue;  // enqueue piece i
  std::function<void()> fork, join;  // side streams wait for the timing stream / it waits for them
  int fork_join_cost = 0;            // operations fork + join add to each stream (an upper bound)
  // Enqueued on the timing stream after every iteration (warm-up ones too), outside the timed
  // samples: each sample starts with an event recorded after it (--l2 cold: an L2 flush).
  std::function<void()> between;
  int between_cost = 0;  // operations it enqueues (an upper bound)
};

struct LoopResult {
  std::vector<double> samples_ms;  // one per iteration
  bool gate_timed_out = false;
  std::optional<ClockSample> clock;
  int chunks = 0;
  int segments_per_iteration_max = 1;  // >1: some iteration was split across chunks
};

// Grows on demand; events are reused from cell to cell.
class EventPool {
 public:
  void reserve(size_t n);  // throws CudaError
  cudaEvent_t at(size_t i) { reserve(i + 1); return events_[i]; }
  size_t size() const { return events_.size(); }

 private:
  std::vector<Event> events_;
};

// The mean SM clock of several samples of one loop (reasons: any sample's); nullopt for none.
std::optional<ClockSample> clock_mean(const std::vector<ClockSample>& samples);

// Runs `warmup` iterations unmeasured, then `iters` timed iterations on `s` as described above.
// `chunk_ops` is the per-stream budget (tests shrink it). The clock is sampled at a quarter, half
// and three quarters of the timed iterations, and LoopResult::clock is their mean.
// `before_gate`, when set, is called after the warm-up and before the first chunk's gate closes,
// with the host time (ms) the first chunk is expected to take to enqueue (measured on the
// warm-up's enqueue): the engine's PowerHold enqueues its GEMMs there (power_hold.hpp). One more
// untimed iteration follows it, so the operands are back in L2 when the samples start.
LoopResult run_timed_loop(LaunchGate& gate, EventPool& events, cudaStream_t s, const LoopBody& body, int warmup,
                          int iters, const ClockProbe* probe, int chunk_ops = kChunkOps,
                          const std::function<void(double)>& before_gate = {});

}  // namespace gs::cuda

// One GPU's two streams, simulated: a compute stream and a communication stream (NCCL's), each
// running its operations in order; an operation starts when its stream is free and the operations
// it depends on have ended. While both streams are busy they contend for SMs and memory bandwidth:
// compute then progresses at 1 / (1 + compute_slowdown) of its rate and communication at
// 1 / (1 + comm_slowdown) (a fluid model: rates change at every start and end). This is how the
// parallel step overlaps gradient reduce-scatters with backward, FSDP's prefetched parameter
// gathers with forward and backward, and Transformer Engine's TP overlap with its GEMMs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

enum class SimStream { Compute = 0, Comm = 1 };

struct SimOp {
  SimStream stream = SimStream::Compute;
  double work_ms = 0;      // duration alone on the GPU
  std::vector<size_t> deps;  // indices of earlier operations it waits for
  int category = 0;        // the caller's label (what the time is spent on)
  std::string name;
};

struct SimTiming {
  std::vector<double> start_ms, end_ms;
  double makespan_ms = 0;
  double compute_end_ms = 0;  // the compute stream's last end
  // Per category, the time the compute stream spent in its operations (stretched by contention).
  std::vector<double> compute_ms_by_category;
};

// Simulates `ops` (each operation's deps must precede it; std::invalid_argument otherwise).
// `categories`: how many category labels there are (for compute_ms_by_category).
SimTiming simulate_streams(const std::vector<SimOp>& ops, double compute_slowdown, double comm_slowdown,
                           int categories = 1);

}  // namespace gs

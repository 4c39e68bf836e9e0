// The pipeline schedule as Megatron-LM runs it, simulated: each stage executes its forward and
// backward passes of every micro-batch (and model chunk, with interleaved virtual stages) in the
// schedule's order, and a pass starts when the stage is free and its input has arrived from the
// neighbouring stage (the previous pass plus the point-to-point send). 1F1B: warm-up forwards, then
// one forward and one backward alternately, then the cool-down backwards. Interleaved: Megatron's
// order over virtual micro-batches (chunk k / p mod v, groups of p micro-batches), warm-up
// 2(p - s - 1) + (v - 1) p passes. With equal pass times and free sends the bubble is the closed
// form: (p - 1) / (m + p - 1) for 1F1B, (p - 1) / (v m + p - 1) interleaved.
#pragma once
#include <cstdint>
#include <vector>

namespace gs {

// One pass of one micro-batch through one model chunk of one stage.
struct PipelinePass {
  int64_t stage = 0, chunk = 0, microbatch = 0;
  bool backward = false;
  double start_ms = 0, end_ms = 0;
};

struct PipelineSpec {
  int64_t stages = 1, chunks = 1, microbatches = 1;
  // Duration of a forward / backward pass of one micro-batch through chunk c of stage s, [s][c].
  std::vector<std::vector<double>> fwd_ms, bwd_ms;
  // The send of an activation (forward) or its gradient (backward) to the next stage.
  double send_fwd_ms = 0, send_bwd_ms = 0;
};

struct PipelineSchedule {
  std::vector<std::vector<PipelinePass>> stages;  // each stage's passes in execution order
  double span_ms = 0;                             // first start to last end over all stages
  // Per stage: time from 0 to its last pass's end that it spent computing; the rest is bubble
  // (waiting for a neighbour).
  std::vector<double> busy_ms, end_ms;
  // The bubble of the whole schedule: 1 - (busiest stage's busy time) / span.
  double bubble_fraction() const;
};

// The order in which stage `s` runs its passes (no times): Megatron's 1F1B (chunks == 1) or
// interleaved schedule. Interleaved needs microbatches to be a multiple of stages.
std::vector<PipelinePass> schedule_order(int64_t stage, int64_t stages, int64_t chunks, int64_t microbatches);

// Simulates the schedule (std::invalid_argument for a spec whose sizes do not match).
PipelineSchedule simulate_pipeline(const PipelineSpec& spec);

// The closed forms the simulation reproduces with equal pass times and free sends.
double bubble_1f1b(int64_t stages, int64_t microbatches);
double bubble_interleaved(int64_t stages, int64_t chunks, int64_t microbatches);

}  // namespace gs

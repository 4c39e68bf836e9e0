// The predicted step as a Chrome trace (the JSON object format Perfetto and chrome://tracing open:
// {"traceEvents": [...]}, "X" complete events with ts and dur in microseconds, "M" metadata events
// naming each process and thread), so it can be put beside a torch.profiler trace. The writer takes
// any list of tracks (one per stream; a parallel step adds a process per rank); step_trace_tracks()
// makes the two tracks of one GPU's step. Pure.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/step/step_breakdown.hpp"

namespace gs {

struct TraceEvent {
  std::string name, category;
  double ts_us = 0, dur_us = 0;
  std::vector<std::pair<std::string, std::string>> args;
};

// One stream's events: process `pid` (named `process`), thread `tid` (named `thread`).
struct TraceTrack {
  int pid = 1, tid = 1;
  std::string process, thread;
  std::vector<TraceEvent> events;
};

// The trace document of `tracks` ("otherData" holds `metadata`), as JSON text.
std::string chrome_trace(const std::vector<TraceTrack>& tracks,
                         const std::vector<std::pair<std::string, std::string>>& metadata);

// The step `b` of `plan` as process `pid`: the GPU's stream (tid 1: the groups back to back in step
// order, each layer's groups inside a "layer N" event, the layers inside their pass's event, all
// inside "step") and the host (tid 2: the time each group's launches take, in the same order, or one
// CUDA graph replay). UsageError when the step has no time (a dry run, or a group without one).
std::vector<TraceTrack> step_trace_tracks(const StepBreakdown& b, const Plan& plan, int pid, const std::string& process);

}  // namespace gs

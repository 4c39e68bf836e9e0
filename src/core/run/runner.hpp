// Drives an Engine over a plan: capability gating, the order of measurements, progress.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/step/parallel_layout.hpp"
#include "core/run/comm_options.hpp"
#include "core/run/engine.hpp"
#include "core/results/results.hpp"

namespace gs {

struct RunRequest {
  Plan plan;
  std::vector<Precision> precisions;  // requested, in column order
  std::vector<Mode> modes;
  EngineOptions options;
  StepOptions step;  // the whole step beyond its GEMMs (core/step/step_options.hpp)
  // --provider: the kernel providers every cell is measured by, in column order (core/providers/provider.hpp).
  std::vector<std::string> providers{"cublaslt"};
  bool accuracy = false;       // also run the accuracy pass
  bool accuracy_only = false;  // only the accuracy pass (no timing)
  Dist dist = Dist::Normal;
  // The parallel step's settings as given (core/step/parallel_layout.hpp; core/parallel/).
  ParallelRequest parallel;
  CommOptions comm;  // --comm, --comm-only and the layout flags (the collectives, cli/cmd_comm.cpp)
};

// Called before each measurement: (done, total, description). May print progress.
using ProgressFn = std::function<void(size_t, size_t, const std::string&)>;

// Precisions the device cannot run (compute capability) are dropped from the result's columns
// with one note each; everything else is measured, N/A cells carry their reasons.
RunResult run(Engine& engine, const RunRequest& req, const ProgressFn& progress = {});

// A result with no measurements (--dry-run, or no GPU): the plan and notes only.
RunResult plan_only(const RunRequest& req);

std::string utc_now_iso8601();

}  // namespace gs

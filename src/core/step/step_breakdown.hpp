// The whole step's time from its plan and each group's time: the GPU's time (the groups one after
// another on one stream), the host's (every kernel launched), the step (the slower of the two: a
// host-bound step is the host's), tokens/s, MFU and HFU, and the breakdown by category. A pure
// function of (plan, per-group times, host cost, peak), so a measured run (core/run/step_run.hpp)
// and a prediction call it alike. StepResult is what a run's result keeps (JSON: "step",
// core/step/step_record.hpp).
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <iterator>
#include "core/step/step_memory.hpp"
#include "core/step/step_plan.hpp"

namespace gs {

enum class TimeSource { Measured, Modelled, Given, Predicted, Unknown };
const char* to_string(TimeSource s);  // "measured", "modelled", "given", "predicted", "unknown"

// One instance's time of a group, where it came from, and how, in words.
struct GroupTime {
  std::optional<double> ms;
  TimeSource source = TimeSource::Unknown;
  std::string how;
};

// What the host pays per kernel launch, by host form.
struct HostCost {
  double launch_us = 0;       // a kernel launch (cudaLaunchKernel of an empty kernel, back to back)
  bool launch_measured = false;
  double overhead_us = 0;     // the framework's own cost per launched kernel (Python, dispatch, autograd)
  double graph_us = 0;        // cuda-graph: one replay of the whole step
  HostForm form = HostForm::Eager;
  double per_kernel_us() const { return launch_us + overhead_us; }
};
// Documented defaults, not measured: a launch 3 us; eager PyTorch's dispatch and autograd 6 us more
// per kernel, Inductor's generated wrapper 2 us; a CUDA graph replay 20 us for the step.
constexpr double kDefaultLaunchUs = 3.0;
constexpr double kEagerOverheadUs = 6.0;
constexpr double kCompiledOverheadUs = 2.0;
constexpr double kGraphReplayUs = 20.0;
HostCost default_host_cost(HostForm form);

struct StepGroupResult {
  StepGroup group;  // the plan's group (FLOPs, bytes, launches per instance, count)
  GroupTime time;   // per instance
  std::optional<double> total_ms() const {
    return time.ms ? std::optional<double>(*time.ms * group.count) : std::nullopt;
  }
};

// The step of one (mode, precision).
struct StepBreakdown {
  StepSetup setup;  // the plan's
  std::vector<StepGroupResult> groups;  // in step order
  std::vector<std::string> notes;
  double model_flops = 0, hardware_flops = 0;  // per step (StepPlan)
  double launches = 0;                         // per step
  HostCost host;
  MemoryBreakdown memory;
  // Times (ms per step); nullopt where any group's time is unknown.
  std::optional<double> gpu_ms, host_ms, step_ms;
  bool host_bound = false;  // host_ms > gpu_ms: the step is the host's
  std::array<std::optional<double>, std::size(kAllStepCategories)> category_ms{};  // by StepCategory
  std::optional<double> category(StepCategory c) const { return category_ms[static_cast<size_t>(c)]; }
  std::optional<double> host_exposed_ms() const;  // host_ms - gpu_ms when host-bound, else 0
  std::optional<double> tokens_per_s, mfu, hfu;   // MFU/HFU: against peak_tflops (set_peak)
  std::vector<std::string> unknown;               // groups without a time
  int measured_groups() const;                    // groups whose time was measured
  int modelled_groups() const;
};

// Peak throughput MFU and HFU are taken against: the GPU's dense BF16 tensor peak (every precision),
// from its datasheet.
struct StepPeak {
  double tflops = 0;
  std::string source;  // "NVIDIA H100 SXM datasheet (data/gpus.json)"
};

// `times` has one entry per plan group, in order (std::invalid_argument otherwise).
StepBreakdown compute_step(const StepPlan& plan, const std::vector<GroupTime>& times, const HostCost& host,
                           const MemoryBreakdown& memory, const std::optional<StepPeak>& peak);

// One step kernel the engine timed (or could not): the view of its record that the step reads
// (core/results/step_kernel_records.hpp).
struct StepKernelRun {
  StepKernelSpec spec;
  bool ok = false;
  double mean_ms = 0;
  std::string reason;  // why not, when not ok
};

// A run's whole step: steps[mode][precision] (indices of RunResult::modes / precisions).
struct StepResult {
  std::vector<std::vector<StepBreakdown>> steps;
  std::optional<StepPeak> peak;
  bool timed = false;  // false: a dry run (FLOPs, bytes, launches; no times)
  const StepBreakdown* at(size_t mode, size_t precision) const;
};

// MFU and HFU of every step against `peak` (a run's device, once its datasheet is found).
void set_step_peak(StepResult& r, const StepPeak& peak);

}  // namespace gs

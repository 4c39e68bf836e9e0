#include "core/step/step_breakdown.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace gs {

const char* to_string(TimeSource s) {
  switch (s) {
    case TimeSource::Measured: return "measured";
    case TimeSource::Modelled: return "modelled";
    case TimeSource::Given: return "given";
    case TimeSource::Predicted: return "predicted";
    case TimeSource::Unknown: return "unknown";
  }
  return "?";
}

HostCost default_host_cost(HostForm form) {
  HostCost h;
  h.form = form;
  h.launch_us = kDefaultLaunchUs;
  h.overhead_us = form == HostForm::Compiled ? kCompiledOverheadUs : form == HostForm::Eager ? kEagerOverheadUs : 0.0;
  h.graph_us = kGraphReplayUs;
  return h;
}

std::optional<double> StepBreakdown::host_exposed_ms() const {
  if (!gpu_ms || !host_ms) return std::nullopt;
  return *host_ms > *gpu_ms ? *host_ms - *gpu_ms : 0.0;
}

int StepBreakdown::measured_groups() const {
  int n = 0;
  for (const StepGroupResult& g : groups) n += g.time.ms && g.time.source == TimeSource::Measured;
  return n;
}

int StepBreakdown::modelled_groups() const {
  int n = 0;
  for (const StepGroupResult& g : groups) n += g.time.ms && g.time.source == TimeSource::Modelled;
  return n;
}

namespace {

void apply_peak(StepBreakdown& b, const std::optional<StepPeak>& peak) {
  b.mfu = b.hfu = std::nullopt;
  if (!peak || !(peak->tflops > 0) || !b.step_ms || !(*b.step_ms > 0)) return;
  const double achieved = 1e-12 / (*b.step_ms * 1e-3);  // TFLOP/s per FLOP per step
  b.mfu = b.model_flops * achieved / peak->tflops;
  b.hfu = b.hardware_flops * achieved / peak->tflops;
}

}  // namespace

StepBreakdown compute_step(const StepPlan& plan, const std::vector<GroupTime>& times, const HostCost& host,
                           const MemoryBreakdown& memory, const std::optional<StepPeak>& peak) {
  if (times.size() != plan.groups.size())
    throw std::invalid_argument(fmt::format("compute_step: {} times for {} groups", times.size(), plan.groups.size()));
  StepBreakdown b;
  b.setup = plan.setup;
  b.notes = plan.notes;
  b.model_flops = plan.model_flops;
  b.hardware_flops = plan.hardware_flops;
  b.host = host;
  b.memory = memory;
  std::array<double, std::size(kAllStepCategories)> cat{};
  double gpu = 0;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    b.groups.push_back({plan.groups[i], times[i]});
    const StepGroupResult& g = b.groups.back();
    b.launches += g.group.total_launches();
    if (const std::optional<double> ms = g.total_ms()) {
      gpu += *ms;
      cat[static_cast<size_t>(g.group.category)] += *ms;
    } else {
      b.unknown.push_back(g.group.name);
    }
  }
  b.host_ms = host.form == HostForm::CudaGraph ? host.graph_us * 1e-3 : b.launches * host.per_kernel_us() * 1e-3;
  if (b.unknown.empty()) {
    b.gpu_ms = gpu;
    for (size_t c = 0; c < cat.size(); ++c) b.category_ms[c] = cat[c];
    b.host_bound = *b.host_ms > gpu;
    b.step_ms = b.host_bound ? *b.host_ms : gpu;
    if (*b.step_ms > 0) b.tokens_per_s = static_cast<double>(b.setup.tokens) / (*b.step_ms * 1e-3);
  }
  apply_peak(b, peak);
  return b;
}

const StepBreakdown* StepResult::at(size_t mode, size_t precision) const {
  if (mode >= steps.size() || precision >= steps[mode].size()) return nullptr;
  return &steps[mode][precision];
}

void set_step_peak(StepResult& r, const StepPeak& peak) {
  r.peak = peak;
  for (auto& mode : r.steps)
    for (StepBreakdown& b : mode) apply_peak(b, r.peak);
}

}  // namespace gs

#include "core/step/step_trace.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/io/json_text.hpp"
#include "core/util/error.hpp"

namespace gs {

using nlohmann::json;

std::string chrome_trace(const std::vector<TraceTrack>& tracks,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  json events = json::array();
  std::vector<int> named_pids;
  for (const TraceTrack& t : tracks) {
    if (std::find(named_pids.begin(), named_pids.end(), t.pid) == named_pids.end()) {
      events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", t.pid}, {"tid", 0}, {"args", {{"name", t.process}}}});
      named_pids.push_back(t.pid);
    }
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"name", t.thread}}}});
    events.push_back(
        {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"sort_index", t.tid}}}});
  }
  // Times in whole nanoseconds (an event's end rounded as its start is, so a child never ends past
  // its parent by a rounding step), each track's events by start and, at one start, the longest
  // first: the nesting a trace viewer expects.
  const auto ns = [](double us) { return std::llround(us * 1e3); };
  for (const TraceTrack& t : tracks) {
    std::vector<const TraceEvent*> order;
    for (const TraceEvent& e : t.events) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [&](const TraceEvent* a, const TraceEvent* b) {
      return ns(a->ts_us) != ns(b->ts_us) ? ns(a->ts_us) < ns(b->ts_us) : ns(a->dur_us) > ns(b->dur_us);
    });
    for (const TraceEvent* e : order) {
      json args = json::object();
      for (const auto& [k, v] : e->args) args[k] = v;
      const int64_t start = ns(e->ts_us), end = ns(e->ts_us + e->dur_us);
      events.push_back({{"ph", "X"},
                        {"name", e->name},
                        {"cat", e->category},
                        {"pid", t.pid},
                        {"tid", t.tid},
                        {"ts", static_cast<double>(start) * 1e-3},
                        {"dur", static_cast<double>(end - start) * 1e-3},
                        {"args", args}});
    }
  }
  json other = json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  return json_text(doc, 1) + "\n";  // names of outside origin may not be UTF-8
}

namespace {

bool runs_in(const StepGroup& g, bool moe_layer) {
  switch (g.layers) {
    case LayerSet::Once: return false;
    case LayerSet::Every: return true;
    case LayerSet::Dense: return !moe_layer;
    case LayerSet::Moe: return moe_layer;
  }
  return false;
}

TraceEvent group_event(const StepGroupResult& g, double ts, double dur) {
  TraceEvent e{g.group.name, to_string(g.group.category), ts, dur, {}};
  e.args = {{"source", to_string(g.time.source)},
            {"how", g.time.how},
            {"what", g.group.what},
            {"gflop", fmt::format("{:.3f}", g.group.flops * 1e-9)},
            {"mb", fmt::format("{:.3f}", g.group.bytes * 1e-6)},
            {"launches", fmt::format("{:g}", g.group.launches)}};
  return e;
}

}  // namespace

std::vector<TraceTrack> step_trace_tracks(const StepBreakdown& b, const Plan& plan, int pid, const std::string& process) {
  if (!b.gpu_ms || !b.host_ms)
    throw UsageError("--trace needs a step with times: nothing was measured (a dry run), or a group has no time");
  if (!plan.config) throw UsageError("--trace needs a model plan");
  TraceTrack gpu{pid, 1, process, "GPU stream (compute)", {}};
  TraceTrack host{pid, 2, process, fmt::format("host ({} launches)", to_string(b.setup.form)), {}};
  const double per_launch = b.host.form == HostForm::CudaGraph ? 0.0 : b.host.per_kernel_us();
  double t = 0, th = 0;
  const int64_t L = plan.layers();
  size_t i = 0;
  std::vector<TraceEvent> phases;
  while (i < b.groups.size()) {
    const StepPhase phase = b.groups[i].group.phase;
    const double phase_start = t;
    while (i < b.groups.size() && b.groups[i].group.phase == phase) {
      const StepGroupResult& g = b.groups[i];
      if (g.group.layers == LayerSet::Once) {
        const double dur = *g.time.ms * 1e3;
        gpu.events.push_back(group_event(g, t, dur));
        t += dur;
        if (per_launch > 0) host.events.push_back({g.group.name, "launch", th, g.group.launches * per_launch, {}});
        th += g.group.launches * per_launch;
        ++i;
        continue;
      }
      // A run of per-layer groups: layer by layer, forward 0..L-1, backward L-1..0.
      size_t end = i;
      while (end < b.groups.size() && b.groups[end].group.phase == phase && b.groups[end].group.layers != LayerSet::Once)
        ++end;
      const bool backward = phase == StepPhase::Backward;
      for (int64_t k = 0; k < L; ++k) {
        const int64_t layer = backward ? L - 1 - k : k;
        const bool moe = is_moe_layer(*plan.config, layer);
        const std::string name = fmt::format("layer {} {}", layer, backward ? "bwd" : "fwd");
        const double layer_start = t, host_start = th;
        for (size_t j = i; j < end; ++j) {
          const StepGroupResult& lg = b.groups[j];
          if (!runs_in(lg.group, moe)) continue;
          const double dur = *lg.time.ms * 1e3;
          gpu.events.push_back(group_event(lg, t, dur));
          t += dur;
          th += lg.group.launches * per_launch;
        }
        gpu.events.push_back({name, "layer", layer_start, t - layer_start, {{"moe", moe ? "yes" : "no"}}});
        if (per_launch > 0) host.events.push_back({name, "launch", host_start, th - host_start, {}});
      }
      i = end;
    }
    phases.push_back({to_string(phase), "phase", phase_start, t - phase_start, {}});
  }
  for (TraceEvent& p : phases) gpu.events.push_back(std::move(p));
  gpu.events.push_back({"step", "step", 0, t,
                        {{"gpu_ms", fmt::format("{:.3f}", *b.gpu_ms)},
                         {"host_ms", fmt::format("{:.3f}", *b.host_ms)},
                         {"host_bound", b.host_bound ? "yes" : "no"},
                         {"precision", to_string(b.setup.precision)}}});
  if (b.host.form == HostForm::CudaGraph) host.events.push_back({"CUDA graph replay", "launch", 0, b.host.graph_us, {}});
  return {gpu, host};
}

}  // namespace gs

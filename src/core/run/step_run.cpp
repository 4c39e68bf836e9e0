#include "core/run/step_run.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

#include "core/results/step_context_records.hpp"
#include "core/results/step_kernel_records.hpp"

namespace gs {

namespace {

std::vector<std::vector<StepPlan>> step_plans(const RunResult& r) {
  std::vector<std::vector<StepPlan>> plans;
  for (Mode m : r.modes) {
    plans.emplace_back();
    for (Precision p : r.precisions)
      plans.back().push_back(build_step_plan(r.plan, r.timing.step_context_kind, r.step_options, p, m, r.recipe_options));
  }
  return plans;
}

// The engine's step kernels of `plans`, each once (the same spec, every field alike), in the plans'
// order, and the launch latency.
std::vector<StepKernelSpec> kernel_specs(const std::vector<std::vector<StepPlan>>& plans) {
  std::vector<StepKernelSpec> out;
  std::set<StepKernelSpec, StepKernelKeyLess> seen;
  auto add = [&](const StepKernelSpec& s) {
    if (seen.insert(s).second) out.push_back(s);
  };
  for (const auto& mode : plans)
    for (const StepPlan& sp : mode)
      for (const StepGroup& g : sp.groups)
        if (g.kernel && g.basis == TimeBasis::StepKernel) add(*g.kernel);
  add(StepKernelSpec{});  // LaunchLatency
  return out;
}

// The step kernels the engine ran, keyed by their whole spec (built once per step): each group
// finds the run of its own kernel, never one that merely reads alike. Where a spec was run twice,
// the first run counts.
class KernelIndex {
 public:
  explicit KernelIndex(const std::vector<StepKernelRun>& runs) {
    for (const StepKernelRun& k : runs) by_spec_.emplace(k.spec, &k);
  }
  const StepKernelRun* find(const StepKernelSpec& s) const {
    const auto it = by_spec_.find(s);
    return it == by_spec_.end() ? nullptr : it->second;
  }

 private:
  std::map<StepKernelSpec, const StepKernelRun*, StepKernelKeyLess> by_spec_;
};

// The cells of the LM head's GEMMs of one pass direction, summed; nullopt when one is N/A.
std::optional<double> head_ms(const RunResult& r, size_t m, size_t p, bool forward) {
  double sum = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    if (x.scope != Scope::Model || (x.pass == Pass::Fprop) != forward) continue;
    const Cell& c = r.cell(m, g, p);
    if (!c.ok) return std::nullopt;
    sum += c.stats.mean_ms;
  }
  return sum;
}

std::optional<double> add(std::optional<double> a, std::optional<double> b) {
  return a && b ? std::optional<double>(*a + *b) : std::nullopt;
}

struct Context {
  const RunResult& r;
  size_t mode, precision;
  const ModeSummary& summary;
  const KernelIndex& kernels;
  const std::optional<StepContextInfo>& context;  // step_context_view(r), read once
  double launch_ms;
  bool launch_measured;
};

// Bytes at the stand-in's calibrated rate and the framework's efficiency (the step context's).
GroupTime from_bytes(const Context& x, double bytes, const std::string& what) {
  const std::optional<StepContextInfo>& c = x.context;
  if (!c || !(c->stream_gb_per_s > 0))
    return {std::nullopt, TimeSource::Unknown, "no stand-in kernel was calibrated (a step context runs one)"};
  const double efficiency = c->efficiency > 0 ? c->efficiency : 1.0;
  return {bytes / (c->stream_gb_per_s * 1e6 * efficiency), TimeSource::Modelled,
          fmt::format("{}its bytes at {:.2f}x the stand-in kernel's {:.0f} GB/s", what, efficiency, c->stream_gb_per_s)};
}

GroupTime group_time_on_source(const Context& x, const StepGroup& g);

// A predicted run's measured parts are the source GPU's, carried to the target: predicted.
GroupTime group_time(const Context& x, const StepGroup& g) {
  GroupTime t = group_time_on_source(x, g);
  if (x.r.predicted() && t.source == TimeSource::Measured) t.source = TimeSource::Predicted;
  return t;
}

GroupTime group_time_on_source(const Context& x, const StepGroup& g) {
  const RunResult& r = x.r;
  const std::optional<StepContextInfo>& c = x.context;
  const TimeSource cells = r.predicted() ? TimeSource::Predicted : TimeSource::Measured;
  switch (g.basis) {
    case TimeBasis::GemmCells: {
      const PrecisionSums& s = x.summary.sums[x.precision];
      std::optional<double> ms;
      switch (g.gemm_scope) {
        case GemmScope::DenseLayer: ms = g.forward ? s.fprop : add(s.dgrad, s.wgrad); break;
        case GemmScope::MoeLayer: ms = g.forward ? s.moe_fprop : add(s.moe_dgrad, s.moe_wgrad); break;
        case GemmScope::Head: ms = head_ms(r, x.mode, x.precision, g.forward); break;
      }
      if (!ms) return {std::nullopt, TimeSource::Unknown, "a GEMM cell of it is N/A"};
      return {ms, cells, fmt::format("the GEMM cells, {}", r.predicted() ? "predicted" : "measured")};
    }
    case TimeBasis::Attention:
      if (!c || !(c->attention_ms() > 0))
        return {std::nullopt, TimeSource::Unknown, "no attention ran in the step context (--step-context none)"};
      return {g.forward ? c->attention_fwd_ms : c->attention_bwd_ms,
              c->attention_measured ? TimeSource::Measured : TimeSource::Modelled, c->attention_source};
    case TimeBasis::LayerOther:
      if (!c) return {std::nullopt, TimeSource::Unknown, "no step context ran"};
      return {c->other_ms * g.share + c->move_ms * g.move_share,
              c->other_from_user ? TimeSource::Given : TimeSource::Modelled,
              c->other_from_user ? "your --step-other-ms figure, split by the modelled bytes"
                                 : "the step context's memory-bound work (modelled bytes at the calibrated rate)"};
    case TimeBasis::Casts:
      if (!c) return {std::nullopt, TimeSource::Unknown, "no step context ran"};
      return {c->cast_ms * g.share, TimeSource::Modelled, "the step context's FP8 casts (modelled)"};
    case TimeBasis::StepKernel: {
      const StepKernelRun* k = g.kernel ? x.kernels.find(*g.kernel) : nullptr;
      if (k && k->ok) {
        const double rate = step_kernel_rate(k->spec, r.timing.step_context_kind);
        if (rate == 1.0) return {k->mean_ms, TimeSource::Measured, "measured on this GPU: " + k->spec.describe()};
        return {k->mean_ms / rate, TimeSource::Modelled,
                fmt::format("{}'s kernel: the stand-in measured on this GPU ({}) at {:.2f}x its rate",
                            step_context_framework(r.timing.step_context_kind), k->spec.describe(), rate)};
      }
      return from_bytes(x, g.bytes, k ? fmt::format("not measured ({}): ", k->reason) : std::string());
    }
    case TimeBasis::Bytes: return from_bytes(x, g.bytes, "");
    case TimeBasis::Launches:
      return {g.launches * x.launch_ms, TimeSource::Modelled,
              fmt::format("one launch latency each ({:.1f} us, {})", x.launch_ms * 1e3,
                          x.launch_measured ? "measured" : "default")};
  }
  return {};
}

}  // namespace

StepResult step_from_result(const RunResult& r, bool timed, const std::string& name) {
  StepResult out;
  out.timed = timed;
  const std::vector<std::vector<StepPlan>> plans = step_plans(r);
  HostCost host;
  const std::vector<StepKernelRun> kernels = step_kernel_runs(r, name);
  const KernelIndex index(kernels);
  const StepKernelRun* launch = index.find(StepKernelSpec{});
  const std::optional<StepContextInfo> context = step_context_view(r, 0, name);
  // The GPU's memory: the run's device, a fleet document's first rank's (its step is rank 0's, as
  // its step kernels and step context are; the top-level device is empty there).
  const std::optional<DeviceInfo>& gpu = r.device || r.ranks.empty() ? r.device : r.ranks.front().device;
  const std::optional<double> device =
      gpu && gpu->memory_bytes > 0 ? std::optional<double>(static_cast<double>(gpu->memory_bytes)) : std::nullopt;
  for (size_t m = 0; m < plans.size(); ++m) {
    out.steps.emplace_back();
    const ModeSummary summary = summarize_mode(r, m);
    for (size_t p = 0; p < plans[m].size(); ++p) {
      const StepPlan& sp = plans[m][p];
      host = default_host_cost(sp.setup.form);
      if (launch && launch->ok) {
        host.launch_us = launch->mean_ms * 1e3;
        host.launch_measured = true;
      }
      const Context x{r, m, p, summary, index, context, host.launch_us * 1e-3, host.launch_measured};
      std::vector<GroupTime> times;
      for (const StepGroup& g : sp.groups)
        times.push_back(timed ? group_time(x, g) : GroupTime{std::nullopt, TimeSource::Unknown, "a dry run"});
      const MemoryBreakdown memory = memory_per_gpu(memory_inputs(r.plan, sp, r.recipe_options), device);
      out.steps.back().push_back(compute_step(sp, times, host, memory, std::nullopt));
    }
  }
  return out;
}

std::optional<StepResult> measure_step(Engine& engine, RunResult& r) {
  if (!r.plan.model_mode || r.modes.empty() || r.precisions.empty()) return std::nullopt;
  clear_step_kernel_records(r);
  for (const StepKernelSpec& s : kernel_specs(step_plans(r)))
    add_step_kernel_record(r, s, engine.measure_step_kernel(s), Source::Measured);
  return step_from_result(r, true);
}

std::optional<StepResult> plan_step(const RunResult& r) {
  if (!r.plan.model_mode || r.modes.empty() || r.precisions.empty()) return std::nullopt;
  return step_from_result(r, false);
}

}  // namespace gs

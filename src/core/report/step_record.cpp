#include "core/report/step_record.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/io/input_file.hpp"
#include "core/run/step_run.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

namespace {

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

const char* to_string(LayerSet s) {
  switch (s) {
    case LayerSet::Once: return "once";
    case LayerSet::Every: return "every";
    case LayerSet::Dense: return "dense";
    case LayerSet::Moe: return "moe";
  }
  return "?";
}

json memory_json(const MemoryBreakdown& m) {
  return {{"weights", m.weights},
          {"grads", m.grads},
          {"main_params", m.main_params},
          {"optimizer_states", m.optimizer_states},
          {"fp8_copies", m.fp8_copies},
          {"activations", m.activations},
          {"reserve", m.reserve},
          {"total", m.total()},
          {"device", opt(m.device_bytes)},
          {"fits", m.device_bytes ? json(m.fits()) : json(nullptr)},
          {"margin", opt(m.margin())}};
}

json breakdown_json(const StepBreakdown& b) {
  json cats = json::object();
  for (StepCategory c : kAllStepCategories) cats[to_string(c)] = opt(b.category(c));
  cats["host"] = opt(b.host_exposed_ms());
  json groups = json::array();
  for (const StepGroupResult& g : b.groups)
    groups.push_back({{"name", g.group.name},
                      {"category", to_string(g.group.category)},
                      {"phase", to_string(g.group.phase)},
                      {"layers", to_string(g.group.layers)},
                      {"count", g.group.count},
                      {"flops", g.group.flops},
                      {"bytes", g.group.bytes},
                      {"launches", g.group.launches},
                      {"basis", to_string(g.group.basis)},
                      {"ms", opt(g.time.ms)},
                      {"total_ms", opt(g.total_ms())},
                      {"source", to_string(g.time.source)},
                      {"how", g.time.how},
                      {"what", g.group.what}});
  return {{"step_ms", opt(b.step_ms)},
          {"gpu_ms", opt(b.gpu_ms)},
          {"host_ms", opt(b.host_ms)},
          {"host_bound", b.step_ms ? json(b.host_bound) : json(nullptr)},
          {"tokens", b.setup.tokens},
          {"tokens_per_s", opt(b.tokens_per_s)},
          {"mfu", opt(b.mfu)},
          {"hfu", opt(b.hfu)},
          {"model_flops", b.model_flops},
          {"hardware_flops", b.hardware_flops},
          {"launches", b.launches},
          {"breakdown", cats},
          {"measured_groups", b.measured_groups()},
          {"modelled_groups", b.modelled_groups()},
          {"unknown", b.unknown},
          {"host", {{"form", to_string(b.setup.form)},
                    {"launch_us", b.host.launch_us},
                    {"launch_measured", b.host.launch_measured},
                    {"overhead_us", b.host.overhead_us},
                    {"graph_us", b.host.graph_us}}},
          {"memory", memory_json(b.memory)},
          {"groups", groups},
          {"notes", b.notes}};
}

json spec_json(const StepKernelSpec& s) {
  return {{"kind", to_string(s.kind)}, {"elements", s.elements}, {"tensors", s.tensors}, {"rows", s.rows},
          {"cols", s.cols},           {"vocab", s.vocab},       {"storage", to_string(s.storage)},
          {"fused", s.fused}};
}

template <class E, size_t N>
E enum_named(const json& v, const E (&all)[N], const std::string& what) {
  if (v.is_string())
    for (E e : all)
      if (v.get<std::string>() == to_string(e)) return e;
  std::vector<std::string> names;
  for (E e : all) names.push_back(to_string(e));
  throw UsageError(fmt::format("{} must be {}", what, names_list(names, true)));
}

int64_t count_in(const json& o, const char* key, const std::string& where) {
  const json* v = o.contains(key) ? &o.at(key) : nullptr;
  if (!v || !v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (int64_t{1} << 50))
    throw UsageError(fmt::format("{}.{} must be an integer from 0 to 2^50", where, key));
  return v->get<int64_t>();
}

}  // namespace

StepSpeedups step_speedups(const RunResult& r, size_t mode, size_t p) {
  StepSpeedups out;
  std::optional<size_t> bf16;
  for (size_t i = 0; i < r.precisions.size(); ++i)
    if (r.precisions[i] == Precision::BF16) bf16 = i;
  if (!bf16 || mode >= r.modes.size() || p >= r.precisions.size()) return out;
  const ModeSummary s = summarize_mode(r, mode);
  if (s.sums[*bf16].full_model && s.sums[p].full_model && *s.sums[p].full_model > 0)
    out.gemm = *s.sums[*bf16].full_model / *s.sums[p].full_model;
  if (r.step) {
    const StepBreakdown* a = r.step->at(mode, *bf16);
    const StepBreakdown* b = r.step->at(mode, p);
    if (a && b && a->step_ms && b->step_ms && *b->step_ms > 0) out.step = *a->step_ms / *b->step_ms;
  }
  return out;
}

json step_record_json(const StepResult& s, const RunResult& r) {
  json j;
  j["timed"] = s.timed;
  j["framework"] = to_string(r.timing.step_context_kind);
  j["peak"] = s.peak ? json{{"tflops", s.peak->tflops}, {"source", s.peak->source}} : json(nullptr);
  j["definitions"] = {
      {"step_ms", "max(gpu_ms, host_ms): the groups back to back on one stream, or the host's launches when slower"},
      {"mfu", "model FLOPs per step / (step_ms x the GPU's dense BF16 peak): every linear GEMM in its three passes "
              "and attention's QK^T and PV forward and backward over the full s x s (Megatron-LM's "
              "num_floating_point_operations), recompute left out"},
      {"hfu", "the same FLOPs plus the recomputed forward work, over the same time and peak"}};
  json kernels = json::array();
  for (const StepKernelRun& k : s.kernels) {
    json x = spec_json(k.spec);
    x["describe"] = k.spec.describe();
    x["status"] = k.ok ? "ok" : "n/a";
    x["mean_ms"] = k.ok ? json(k.mean_ms) : json(nullptr);
    if (!k.ok) x["reason"] = k.reason;
    kernels.push_back(x);
  }
  j["kernels"] = kernels;
  json modes = json::object();
  for (size_t m = 0; m < s.steps.size() && m < r.modes.size(); ++m) {
    json per = json::object();
    for (size_t p = 0; p < s.steps[m].size() && p < r.precisions.size(); ++p) {
      json b = breakdown_json(s.steps[m][p]);
      const StepSpeedups sp = step_speedups(r, m, p);
      b["speedup_vs_bf16"] = {{"step", opt(sp.step)}, {"gemm", opt(sp.gemm)}};
      per[to_string(r.precisions[p])] = b;
    }
    modes[to_string(r.modes[m])] = per;
  }
  j["modes"] = modes;
  return j;
}

void read_step_record(const json* j, const std::string& where, RunResult& r) {
  r.step.reset();
  if (!j || j->is_null()) return;
  if (!j->is_object()) throw UsageError(where + " must be an object");
  if (!r.plan.model_mode) throw UsageError(where + " belongs to a model plan, and this result's plan is not one");
  const json* timed = j->contains("timed") ? &j->at("timed") : nullptr;
  if (!timed || !timed->is_boolean()) throw UsageError(where + ".timed must be true or false");
  std::vector<StepKernelRun> runs;
  if (j->contains("kernels")) {
    const json& ks = j->at("kernels");
    if (!ks.is_array()) throw UsageError(where + ".kernels must be a list");
    static const StepKernelKind kinds[] = {StepKernelKind::AdamW,           StepKernelKind::GradNorm,
                                           StepKernelKind::ZeroGrad,        StepKernelKind::CrossEntropyFwd,
                                           StepKernelKind::CrossEntropyBwd, StepKernelKind::EmbeddingFwd,
                                           StepKernelKind::EmbeddingBwd,    StepKernelKind::LaunchLatency};
    static const ParamStorage storages[] = {ParamStorage::Bf16, ParamStorage::Fp32, ParamStorage::Bf16MainFp32};
    for (size_t i = 0; i < ks.size(); ++i) {
      const std::string w = fmt::format("{}.kernels[{}]", where, i);
      const json& k = ks[i];
      if (!k.is_object()) throw UsageError(w + " must be an object");
      StepKernelRun run;
      run.spec.kind = enum_named(k.value("kind", json()), kinds, w + ".kind");
      run.spec.elements = count_in(k, "elements", w);
      run.spec.tensors = count_in(k, "tensors", w);
      run.spec.rows = count_in(k, "rows", w);
      run.spec.cols = count_in(k, "cols", w);
      run.spec.vocab = count_in(k, "vocab", w);
      run.spec.storage = enum_named(k.value("storage", json()), storages, w + ".storage");
      if (!k.contains("fused") || !k.at("fused").is_boolean()) throw UsageError(w + ".fused must be true or false");
      run.spec.fused = k.at("fused").get<bool>();
      const json status = k.value("status", json());
      if (status != "ok" && status != "n/a") throw UsageError(w + ".status must be \"ok\" or \"n/a\"");
      run.ok = status == "ok";
      if (run.ok) {
        const json ms = k.value("mean_ms", json());
        if (!ms.is_number() || !std::isfinite(ms.get<double>()) || !(ms.get<double>() > 0) || ms.get<double>() > 1e9)
          throw UsageError(w + ".mean_ms must be a positive number of ms");
        run.mean_ms = ms.get<double>();
      } else {
        const json why = k.value("reason", json(""));
        if (!why.is_string()) throw UsageError(w + ".reason must be a string");
        run.reason = clip_text(why.get<std::string>(), 400);
      }
      runs.push_back(std::move(run));
    }
  }
  StepResult s = step_from_result(r, runs, timed->get<bool>());
  if (const json* pk = j->contains("peak") ? &j->at("peak") : nullptr; pk && !pk->is_null()) {
    if (!pk->is_object() || !pk->contains("tflops") || !pk->at("tflops").is_number() ||
        !(pk->at("tflops").get<double>() > 0) || pk->at("tflops").get<double>() > 1e7)
      throw UsageError(where + ".peak.tflops must be a positive number");
    const json src = pk->value("source", json(""));
    if (!src.is_string()) throw UsageError(where + ".peak.source must be a string");
    set_step_peak(s, {pk->at("tflops").get<double>(), clip_text(src.get<std::string>(), 200)});
  }
  r.step = std::move(s);
}

}  // namespace gs

#include "core/report/step_record.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/io/input_file.hpp"
#include "core/io/json_fields.hpp"
#include "core/results/step_kernel_records.hpp"
#include "core/run/step_run.hpp"
#include "core/step/step_options.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

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

// ---- the "step" section's tables (core/io/json_fields.hpp): one description per field, walked by
// the writer and the reader ----

// A step kernel of the "kernels" list that files written before the step kernels were records held
// in their step section (read only: the kernels are records now): its spec, its time or why not.
const Fields<StepKernelRun>& legacy_kernel_fields() {
  static const Fields<StepKernelRun> t = [] {
    const auto unwritten = [](const StepKernelRun&, json&) {};
    Fields<StepKernelRun> f;
    for (const Field<StepKernelSpec>& s : step_kernel_spec_fields())
      f.push_back({s.key, unwritten, [read = s.read](const json& o, StepKernelRun& k, const std::string& where) {
                     read(o, k.spec, where);
                   }});
    f.push_back(custom<StepKernelRun>("status", unwritten, [](const json& o, StepKernelRun& k, const std::string& where) {
      const json status = o.value("status", json());
      if (status != "ok" && status != "n/a") throw UsageError(where + ".status must be \"ok\" or \"n/a\"");
      k.ok = status == "ok";
    }));
    f.push_back(custom<StepKernelRun>("mean_ms", unwritten, [](const json& o, StepKernelRun& k, const std::string& where) {
      if (!k.ok) return;
      const json ms = o.value("mean_ms", json());
      if (!ms.is_number() || !std::isfinite(ms.get<double>()) || !(ms.get<double>() > 0) || ms.get<double>() > 1e9)
        throw UsageError(where + ".mean_ms must be a positive number of ms");
      k.mean_ms = ms.get<double>();
    }));
    f.push_back({"reason", unwritten, text<StepKernelRun>("reason", [](auto& k) -> auto& { return k.reason; }, {}, 400).read});
    return f;
  }();
  return t;
}

const Fields<StepPeak>& peak_fields() {
  static const Fields<StepPeak> t = {
      custom<StepPeak>(
          "tflops", [](const StepPeak& p, json& o) { o["tflops"] = p.tflops; },
          [](const json& o, StepPeak& p, const std::string& where) {
            const json* v = find(o, "tflops");
            if (!v || !v->is_number() || !(v->get<double>() > 0) || v->get<double>() > 1e7)
              throw UsageError(where + ".tflops must be a positive number");
            p.tflops = v->get<double>();
          }),
      text<StepPeak>("source", [](auto& p) -> auto& { return p.source; }, {}, 200),
  };
  return t;
}

// The section as the file holds it: what was measured or given (read back), and the run it belongs
// to for the derived fields (written for the file's readers, derived again when read).
struct StepSection {
  bool timed = false;
  std::optional<std::vector<StepKernelRun>> legacy_kernels;  // reading an older file only
  std::optional<StepPeak> peak;
  const StepResult* step = nullptr;  // writing only
  const RunResult* run = nullptr;    // writing only
};

// Older files' "kernels" list: read (bounded like the records, the count named), never written.
Field<StepSection> legacy_kernels_field() {
  const Field<StepSection> list_field = list<StepSection>(
      "kernels", [](auto& s) -> auto& { return *s.legacy_kernels; }, legacy_kernel_fields(), kMaxStepKernels);
  return custom<StepSection>(
      "kernels", [](const StepSection&, json&) {},
      [list_read = list_field.read](const json& o, StepSection& s, const std::string& where) {
        const json* ks = find(o, "kernels");
        if (!ks) return;
        if (ks->is_array() && ks->size() > kMaxStepKernels)
          throw UsageError(fmt::format("{}.kernels lists {} kernels, more than the {} a step block may hold", where,
                                       ks->size(), kMaxStepKernels));
        s.legacy_kernels.emplace();
        list_read(o, s, where);
      });
}

const Fields<StepSection>& step_fields() {
  static const Fields<StepSection> t = {
      custom<StepSection>(
          "timed", [](const StepSection& s, json& o) { o["timed"] = s.timed; },
          [](const json& o, StepSection& s, const std::string& where) { s.timed = need<bool>(o, "timed", where); }),
      derived<StepSection>("framework",
                           [](const StepSection& s) -> std::optional<json> { return to_string(s.run->timing.step_context_kind); }),
      custom<StepSection>(
          "peak",
          [](const StepSection& s, json& o) {
            json p = json::object();
            if (s.peak) write_fields(peak_fields(), *s.peak, p);
            o["peak"] = s.peak ? p : json(nullptr);
          },
          [](const json& o, StepSection& s, const std::string& where) {
            const json* p = find(o, "peak");
            if (!p || p->is_null()) return;
            if (!p->is_object()) throw UsageError(where + ".peak.tflops must be a positive number");
            StepPeak peak;
            read_fields(peak_fields(), *p, peak, where + ".peak");
            s.peak = peak;
          }),
      derived<StepSection>(
          "definitions",
          [](const StepSection&) -> std::optional<json> {
            return json{
                {"step_ms", "max(gpu_ms, host_ms): the groups back to back on one stream, or the host's launches when slower"},
                {"mfu", "model FLOPs per step / (step_ms x the GPU's dense BF16 peak): every linear GEMM in its three passes "
                        "and attention's QK^T and PV forward and backward over the full s x s (Megatron-LM's "
                        "num_floating_point_operations), recompute left out"},
                {"hfu", "the same FLOPs plus the recomputed forward work, over the same time and peak"}};
          }),
      legacy_kernels_field(),
      derived<StepSection>("modes", [](const StepSection& s) -> std::optional<json> {
        const StepResult& st = *s.step;
        const RunResult& r = *s.run;
        json modes = json::object();
        for (size_t m = 0; m < st.steps.size() && m < r.modes.size(); ++m) {
          json per = json::object();
          for (size_t p = 0; p < st.steps[m].size() && p < r.precisions.size(); ++p) {
            json b = breakdown_json(st.steps[m][p]);
            const StepSpeedups sp = step_speedups(r, m, p);
            b["speedup_vs_bf16"] = {{"step", opt(sp.step)}, {"gemm", opt(sp.gemm)}};
            per[to_string(r.precisions[p])] = b;
          }
          modes[to_string(r.modes[m])] = per;
        }
        return modes;
      }),
  };
  return t;
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
  StepSection sec;
  sec.timed = s.timed;
  sec.peak = s.peak;
  sec.step = &s;
  sec.run = &r;
  json j = json::object();
  write_fields(step_fields(), sec, j);
  return j;
}

void read_step_record(const json* j, const std::string& name, RunResult& r) {
  const std::string where = name + ": step";
  r.step.reset();
  if (!j || j->is_null()) return;
  if (!j->is_object()) throw UsageError(where + " must be an object");
  if (!r.plan.model_mode) throw UsageError(where + " belongs to a model plan, and this result's plan is not one");
  StepSection sec;
  read_fields(step_fields(), *j, sec, where);
  if (sec.legacy_kernels) {
    // An older file: its kernels become the records a file holds them in now.
    for (const Record& rec : r.records)
      if (is_step_kernel_record(rec))
        throw UsageError(where + ".kernels lists the step kernels that its records hold too: one of the two, not both");
    set_step_kernel_records(r, *sec.legacy_kernels, r.predicted() ? Source::Predicted : Source::Measured);
  }
  StepResult s = step_from_result(r, sec.timed, name);
  if (sec.peak) set_step_peak(s, *sec.peak);
  r.step = std::move(s);
}

}  // namespace gs

// The step kernels as records of a result document (step_kernel_records.hpp).
#include "core/results/step_kernel_records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "core/results/record_values.hpp"
#include "core/step/step_options.hpp"
#include "core/util/error.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

namespace {

// A kernel's size: an integral count from 0 to 2^50 (a record's value holds it as a number).
template <class At>
Field<StepKernelSpec> count(const char* key, At at) {
  return custom<StepKernelSpec>(
      key, [=](const StepKernelSpec& s, json& o) { o[key] = at(s); },
      [=](const json& o, StepKernelSpec& s, const std::string& where) {
        const json* v = find(o, key);
        const double x = v && v->is_number() ? v->get<double>() : -1;
        if (!(x >= 0) || x > std::ldexp(1.0, 50) || x != std::floor(x))
          throw UsageError(fmt::format("{}.{} must be an integer from 0 to 2^50", where, key));
        at(s) = static_cast<int64_t>(x);
      });
}

// The pass of a kernel's record: the loss's and the embedding's forward and backward.
std::optional<Pass> kernel_pass(StepKernelKind k) {
  switch (k) {
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::EmbeddingFwd: return Pass::Fprop;
    case StepKernelKind::CrossEntropyBwd: return Pass::Dgrad;  // the gradient w.r.t. the logits
    case StepKernelKind::EmbeddingBwd: return Pass::Wgrad;     // the table's gradient
    default: return std::nullopt;
  }
}

constexpr RecordKind kKinds[] = {RecordKind::Optimizer, RecordKind::Loss, RecordKind::Embedding, RecordKind::Host};

bool is_step_kernel_kind(RecordKind k) { return std::find(std::begin(kKinds), std::end(kKinds), k) != std::end(kKinds); }

}  // namespace

RecordKind step_kernel_record_kind(StepKernelKind k) {
  switch (k) {
    case StepKernelKind::AdamW:
    case StepKernelKind::GradNorm:
    case StepKernelKind::ZeroGrad: return RecordKind::Optimizer;
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::CrossEntropyBwd: return RecordKind::Loss;
    case StepKernelKind::EmbeddingFwd:
    case StepKernelKind::EmbeddingBwd: return RecordKind::Embedding;
    case StepKernelKind::LaunchLatency: return RecordKind::Host;
  }
  return RecordKind::Host;
}

const Fields<StepKernelSpec>& step_kernel_spec_fields() {
  static const Fields<StepKernelSpec> t = {
      choice<StepKernelSpec>("kind", [](auto& s) -> auto& { return s.kind; }, step_kernel_kind_names()),
      count("elements", [](auto& s) -> auto& { return s.elements; }),
      count("tensors", [](auto& s) -> auto& { return s.tensors; }),
      count("rows", [](auto& s) -> auto& { return s.rows; }),
      count("cols", [](auto& s) -> auto& { return s.cols; }),
      count("vocab", [](auto& s) -> auto& { return s.vocab; }),
      choice<StepKernelSpec>("storage", [](auto& s) -> auto& { return s.storage; }, param_storage_names()),
      custom<StepKernelSpec>(
          "fused", [](const StepKernelSpec& s, json& o) { o["fused"] = s.fused; },
          [](const json& o, StepKernelSpec& s, const std::string& where) { s.fused = need<bool>(o, "fused", where); }),
  };
  return t;
}

void clear_step_kernel_records(RunResult& r) {
  RecordTable kept;
  kept.reserve(r.records.size());
  for (const Record& rec : r.records)
    if (!is_step_kernel_kind(rec.key.kind)) kept.add(rec.key, rec.value);
  r.records = std::move(kept);
  for (RecordKind k : kKinds) r.item_names.erase(k);
}

void add_step_kernel_record(RunResult& r, const StepKernelSpec& s, Cell c, Source source) {
  RecordKey k;
  k.kind = step_kernel_record_kind(s.kind);
  std::vector<std::string>& names = r.item_names[k.kind];
  k.item = static_cast<uint32_t>(names.size());
  k.pass = kernel_pass(s.kind);
  k.source = source;
  names.push_back(s.describe());
  json spec = json::object();
  write_fields(step_kernel_spec_fields(), s, spec);
  set_values(c, spec);
  r.records.add(k, std::move(c));
}

void set_step_kernel_records(RunResult& r, const std::vector<StepKernelRun>& runs, Source source) {
  clear_step_kernel_records(r);
  for (const StepKernelRun& k : runs)
    add_step_kernel_record(r, k.spec, k.ok ? Cell::measured(summarize({k.mean_ms})) : Cell::na(k.reason), source);
}

bool is_step_kernel_record(const Record& rec) {
  if (!is_step_kernel_kind(rec.key.kind)) return false;
  const Value* v = rec.value.value("kind");
  return v && std::holds_alternative<std::string>(*v);
}

std::vector<StepKernelRun> step_kernel_runs(const RunResult& r, const std::string& name) {
  std::vector<StepKernelRun> out;
  for (size_t i = 0; i < r.records.size(); ++i) {
    const Record& rec = r.records[i];
    if (rec.key.rank != 0 || !is_step_kernel_record(rec)) continue;
    const std::string where = fmt::format("{}: records[{}] ({} step kernel)", name, i, to_string(rec.key.kind));
    if (out.size() == kMaxStepKernels)
      throw UsageError(fmt::format("{}: the records hold more than the {} step kernels a step may hold", name,
                                   kMaxStepKernels));
    StepKernelRun k;
    read_fields(step_kernel_spec_fields(), values_object(rec.value), k.spec, where + ": values");
    if (step_kernel_record_kind(k.spec.kind) != rec.key.kind)
      throw UsageError(fmt::format("{}: step kernel {} is a record of kind {}, not {}", where, to_string(k.spec.kind),
                                   to_string(step_kernel_record_kind(k.spec.kind)), to_string(rec.key.kind)));
    k.ok = rec.value.ok;
    k.mean_ms = rec.value.ok ? rec.value.stats.mean_ms : 0.0;
    k.reason = rec.value.ok ? std::string() : rec.value.reason;
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace gs

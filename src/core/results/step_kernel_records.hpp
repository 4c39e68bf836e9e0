// The step kernels a run timed (core/step/step_kernels.hpp: the optimizer's update, the gradient
// norm, zero-grad, the loss, the embedding, the launch latency) as records of its result document.
// Each kernel is an item of its kind: "optimizer" (adamw, grad-norm, zero-grad), "loss" (the
// cross-entropy forward, pass fprop, and backward, dgrad), "embedding" (the gather, fprop, and the
// table gradient's scatter-add, wgrad) or "host" (the launch latency), named by its description.
// Its record's value is the cell the engine returned (times with their spread, or why it is N/A)
// with the kernel's whole spec as named values ("kind", "elements", "tensors", "rows", "cols",
// "vocab", "storage", "fused"), so the whole step is derived again from the records alone
// (core/run/step_run.hpp). The view step_kernel_runs() is what the step reads.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/json_fields.hpp"
#include "core/results/results.hpp"

namespace gs {

// A step measures a few dozen kernels; each is looked up per group, mode and precision by every
// command that reads the file, so a file holding 100,000s is refused with the count.
constexpr size_t kMaxStepKernels = 1024;

// The record kind of a step kernel: optimizer, loss, embedding or host.
RecordKind step_kernel_record_kind(StepKernelKind k);

// One description of a step kernel's spec, for the records' values and for the "kernels" list of
// the step section in files written before the step kernels were records (core/report/step_record).
const json_fields::Fields<StepKernelSpec>& step_kernel_spec_fields();

// Removes every record of the step kernels' four kinds and those kinds' items: the kinds hold the
// step kernels (a record of them that names no kernel, which step_kernel_runs() passes over, goes
// too, since its item index would be left dangling).
void clear_step_kernel_records(RunResult& r);
// Adds the record of kernel `s` with the engine's cell `c` (ok with its times, or N/A with its
// reason) from `source`: a new item of its kind.
void add_step_kernel_record(RunResult& r, const StepKernelSpec& s, Cell c, Source source);

// Replaces r's step kernel records with one per run from `source`: its mean time (a cell of one
// sample) or, not ok, N/A with its reason.
void set_step_kernel_records(RunResult& r, const std::vector<StepKernelRun>& runs, Source source);

// Whether `rec` is a step kernel's record (its kind is one of the four and its values name a kernel).
bool is_step_kernel_record(const Record& rec);

// The step kernel records of rank 0 (a fleet document's first rank, as its step is), in table order.
// UsageError naming `name` and the record for a spec out of range, a kernel under another record
// kind, or more than kMaxStepKernels kernels.
std::vector<StepKernelRun> step_kernel_runs(const RunResult& r, const std::string& name = "result");

}  // namespace gs

// The whole step in a result document (JSON "step", docs/json-schema.md), written and read in one
// place. Written: every (mode, precision) step with its groups, times and their sources, the
// breakdown, host, memory, MFU/HFU and the speedups vs BF16 (the chart reads these; it sums
// nothing). Read: what cannot be derived (whether the run was timed, the peak); the rest is
// derived again from the result's plan, records (cells, step kernels) and step context
// (core/run/step_run.hpp), so a file and its report always agree.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/results/results.hpp"

namespace gs {

nlohmann::json step_record_json(const StepResult& s, const RunResult& r);
// `j` is the document's "step" value (nullptr or null: none); r's records are read already (the
// step kernels are records, core/results/step_kernel_records.hpp). UsageError naming the file
// `name` and the field for a value that breaks the schema.
void read_step_record(const nlohmann::json* j, const std::string& name, RunResult& r);

// Step speedup and GEMM-only speedup (full-model GEMM time) of precision `p` vs BF16 in `mode`;
// nullopt where BF16 did not run or a time is unknown.
struct StepSpeedups {
  std::optional<double> step, gemm;
};
StepSpeedups step_speedups(const RunResult& r, size_t mode, size_t p);

}  // namespace gs

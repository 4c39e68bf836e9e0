// The whole training step in reports: the block that leads a model run's report (step time,
// tokens/s, MFU and HFU, memory per GPU, the step speedup beside the GEMM-only one, the breakdown,
// the host's verdict, which parts are measured and which modelled), the group-by-group table, and
// the plan a dry run prints (FLOPs, bytes, launches and memory; no times).
#pragma once
#include <string>

#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

// The mode the lead block shows: training when it ran, else the first.
size_t step_block_mode(const RunResult& r);

void add_step_block(print::Document& d, const RunResult& r);
void add_step_groups(print::Document& d, const RunResult& r, size_t mode);
// --dry-run: the step plan of the first precision, then memory per GPU of each.
std::string step_plan_text(const RunResult& r);
// --trace: the step of every precision (step_block_mode) as a Chrome trace, one process per
// precision (core/step/step_trace.hpp). UsageError when the step has no times.
std::string step_trace_text(const RunResult& r);

}  // namespace gs

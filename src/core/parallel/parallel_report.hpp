// The parallel step's outputs, built once and printed through the printer layer
// (core/util/printer.hpp): the step per precision (time, tokens/s per GPU, model TFLOP/s, MFU,
// bubble, memory), where the critical stage's time goes, each stage, the collectives of a step;
// the layout search's ranking and why the others lose. One JSON emit function (schema
// "gemmscope.parallel/1") and the per-rank timeline as a Chrome trace (chrome://tracing,
// Perfetto): one process per pipeline stage, a compute and a communication track each.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/parallel/layout_search.hpp"
#include "core/parallel/parallel_step.hpp"
#include "core/results/parallel_run.hpp"
#include "core/util/printer.hpp"

namespace gs {

struct ParallelReport {
  ParallelJobInfo job;
  std::vector<ParallelStepResult> results;  // BF16 first, then the FP8 recipe
  std::vector<std::string> notes;
};

print::Document parallel_document(const ParallelReport& r);
std::string render_parallel_text(const ParallelReport& r);
nlohmann::json parallel_json(const ParallelReport& r);
// The per-rank timelines of every result (simulated with trace on) as one Chrome trace document,
// through core/step/step_trace.hpp's writer: a process per stage and precision.
std::string parallel_trace_text(const ParallelReport& r);

print::Document layouts_document(const SearchResult& s, const ParallelJobInfo& job, int64_t gpus, int64_t global_batch,
                                 Precision precision, int top);
nlohmann::json layouts_json(const SearchResult& s, const ParallelJobInfo& job, int64_t gpus, int64_t global_batch,
                            Precision precision, int top);

}  // namespace gs

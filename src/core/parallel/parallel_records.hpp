// The parallel step and the layout search as records of a run's result document
// (core/results/records.hpp): one document holds the run, its collectives, its ranks, its
// predictions and the step of the parallel layout.
//
//   kind parallel-step, item "step":    the job's step in one precision: step_ms, tokens/s per GPU,
//                                       model TFLOP/s, MFU, bubble, peak memory, fits, ...
//   kind parallel-step, item "stage N": a rank of pipeline stage N: where its step time goes
//                                       ("ms.<part>": compute, exposed communication by kind,
//                                       bubble, optimizer), its memory ("memory.*")
//   kind collective, source modelled or predicted: each collective of the step on a rank of stage
//                                       0: size, ranks, algorithm, time, per step, exposed and
//                                       hidden parts
//   kind layout, item the layout:       gemmscope layouts: each evaluated layout, its place in the
//                                       ranking (0: does not fit), why it loses, its step's values
//
// The records' source says what the numbers rest on: modelled (the step simulated from measured
// compute) or predicted (from predicted compute). The job and the layout are the document's
// "parallel" section (core/results/parallel_run.hpp). The reports are printed from the structures
// rebuilt here, so a document and its report cannot disagree.
#pragma once
#include "core/parallel/layout_search.hpp"
#include "core/parallel/parallel_report.hpp"
#include "core/results/results.hpp"

namespace gs {

// Sets r.parallel (the job, the layout, each step's basis and notes) and adds the records of every
// precision's step. Replaces r's parallel-step records and the collective records that are not
// measured; the measured collectives (add_collective_records) are kept.
void add_parallel_step_records(RunResult& r, const ParallelReport& rep);
// The report again from r's section and records (without the timeline). UsageError naming the
// record that is missing or malformed; an empty report when r has no parallel step.
ParallelReport parallel_report_from(const RunResult& r);

// gemmscope layouts --json: a result document of `plan` (no GEMM timed) holding the search: its
// section (the job, the base layout, the counts) and a record per evaluated layout.
RunResult layouts_result(const Plan& plan, const SearchResult& s, const ParallelJobInfo& job, const ParallelLayout& base,
                         const LayoutSearchInfo& info);
// The search again from the document (ranked and not fitting, in the document's order).
SearchResult search_from(const RunResult& r);

}  // namespace gs

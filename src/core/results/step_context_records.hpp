// The step context a run's engine ran between timed iterations (StepContextInfo, the engine's
// interface: core/run/engine.hpp) as records of its result document, one rank's at a time:
// - attention: item "layer" (the average layer's fused attention), one record per pass (fprop
//   the forward, dgrad the backward), source measured (cuDNN timed on the GPU) or modelled, the
//   pass's time as the cell's time (N/A where the context ran none); the forward's values hold
//   the words: "source" (how it was measured or modelled), "shape" (describe(AttentionShape));
// - step-work: item "other" (the memory-bound kernels run as the activation-like stand-in; always
//   there, N/A at 0 ms), "move" (MoE dispatch and combine run as the gather stand-in) and "cast"
//   (the FP8 casts of pre-quantized FP8 cells), each with its time per layer; "other" and "move"
//   are modelled, or given (--step-other-ms: the user's figure, split), "cast" modelled. "move" and
//   "cast" are there only where their time is above 0. The "other" record's values hold the
//   context's own figures: "kind" (te, eager, compile, none), "framework" (written for readers),
//   "stream_gb_per_s", "efficiency" and "move_gb_per_s".
// step_context_view() is what reports, the step and predict read.
#pragma once
#include <optional>
#include <string>

#include "core/io/json_fields.hpp"
#include "core/results/results.hpp"

namespace gs {

// Whether `rec` is one of the step context's records (kind attention or step-work).
bool is_step_context_record(const Record& rec);

// One description of the step context's own figures (kind, framework, stream_gb_per_s,
// efficiency, move_gb_per_s): the "other" record's values, and part of the "step_context" object
// of files written before the step context was records (core/report/report_json.cpp).
const json_fields::Fields<StepContextInfo>& step_context_value_fields();

// Removes rank `rank`'s step context records; the kinds' items go with the last of their records.
void clear_step_context_records(RunResult& r, uint32_t rank = 0);
// Replaces rank `rank`'s step context records with those of `c`.
void set_step_context_records(RunResult& r, const StepContextInfo& c, uint32_t rank = 0);
// Adds them where the rank has none yet (the reader's path for older files: no pass over the
// table); std::logic_error where it has.
void add_step_context_records(RunResult& r, const StepContextInfo& c, uint32_t rank = 0);

// The step context of rank `rank` (a fleet document's first rank by default) rebuilt from its
// records; nullopt where it has none. UsageError naming `name` and the record, in one line, for a
// record that breaks the layout above: an unknown item, a time out of range, a pass, mode,
// precision or provider it cannot have, a source it cannot have, two records of one quantity,
// one attention pass without the other, a "move" record beside no "other" one, a bad value.
std::optional<StepContextInfo> step_context_view(const RunResult& r, uint32_t rank = 0,
                                                 const std::string& name = "result");
// Every rank's step context records checked as step_context_view() does (the reader's check).
void check_step_context_records(const RunResult& r, const std::string& name);

}  // namespace gs

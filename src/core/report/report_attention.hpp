// Attention's own matmuls (core/plan/attention_matmuls.hpp) in reports: a block of their own in the text
// report, the dry run and the JSON, apart from the GEMM tables, sums and speedups. Each fused pass
// shows the time the step context gave it: measured (cuDNN's fused kernel on this GPU), modelled,
// or not measured, said in words. The rows themselves are never timed as GEMMs.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

// The time of one layer's fused attention passes in `r`, and where it came from.
struct AttentionPassTimes {
  std::optional<double> forward_ms, backward_ms;  // nullopt: no time for this run
  std::string source;  // "measured" / "modelled" / "not measured" / "not predicted"
  std::string why;     // the step context's own words, or why there is no time
};
AttentionPassTimes attention_pass_times(const RunResult& r);

// The block (model plans; nothing otherwise).
void add_attention_matmuls(print::Document& d, const RunResult& r);
std::string attention_matmuls_block(const RunResult& r);  // the same block as text

// JSON "attention_matmuls" (model plans; null otherwise): derived from the plan's config and the
// step context, written for readers, never read back.
nlohmann::json attention_matmuls_json(const RunResult& r);

}  // namespace gs

// Printers: turn a RunResult into text tables (the seed tool's layout), JSON and CSV.
// Printers never measure; they only read the result.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/output_paths.hpp"
#include "core/io/input_file.hpp"
#include "core/results/results.hpp"
#include "core/util/printer.hpp"
#include "core/util/text_util.hpp"

namespace gs {

// The seed's report: per-pass tables, per-layer and full-model sums, speedups (model mode);
// ms / TFLOP/s / speedup tables (shapes mode); a quantizing-mode vs pre-quantized section when both
// modes ran. Deterministic for a given result (golden-tested).
std::string render_text(const RunResult& r);
// The same report as one document (core/util/printer.hpp): render_text prints it as text,
// render_markdown as markdown (`gemmscope report --markdown`): titles as headings, every table a
// pipe table with the same cells, no rules.
print::Document report_document(const RunResult& r);
std::string render_markdown(const RunResult& r);
// --dry-run: every GEMM with roles, FLOPs and bytes per precision; FLOP totals.
// Says which cells a measurement would leave N/A (the CPU shape rules) and the LM head's precision.
std::string render_plan_text(const RunResult& r);
// The cells a measurement of `r`'s plan and precisions would leave N/A by the shape rules, one line
// per rule and set of GEMMs: "FP8Current, FP8Delayed: 2 of 15 GEMMs, FP8 GEMMs need ...: Fprop LM Head ...".
std::vector<std::string> predicted_na(const RunResult& r);

// JSON as documented in docs/json-schema.md, and back. from_json throws a UsageError that names
// `name` (a file's path, say) and the offending field for a document that does not follow the
// schema: another "schema", a "kind" other than model/shapes, an unknown mode, precision, pass or
// op, a GEMM without positive integer m/k/n, a missing "results" object or cell on a measured
// run, a cell whose status is not "ok" or "n/a", an ok cell without a positive finite mean_ms,
// a mode or precision listed twice, a model config the plan builder would refuse (sizes <= 0 or
// above 2^24, heads that do not divide), and any field of the wrong type or out of range
// ("x.json: timing.iters must be an integer ...").
// A dry run (no results) and an --accuracy-only run (no modes) are valid documents.
nlohmann::json to_json(const RunResult& r);
RunResult from_json(const nlohmann::json& j, const std::string& name = "result JSON");

// `doc`, a result document that from_json read into `r`, with what gemmscope derives from its cells
// written again by this version's writer: the mode names as written now (files from before the
// renames say "autocast"), "totals" and "provider_totals" (docs/json-schema.md) and
// "plan.routing". Everything else is left as it is. `gemmscope plot` hands this to the chart
// script, which reads these fields instead of summing cells; so a file written before they existed
// still charts, and a hand-edited file charts the numbers its cells say.
nlohmann::json with_derived_fields(nlohmann::json doc, const RunResult& r);

// The parsed contents of the result file at `path`, read under the input-file policy
// (core/io/input_file.hpp: regular files only, size and depth limits, no trailing content):
// read_json_file(path, "result file"). UsageError, never a nlohmann exception.
nlohmann::json read_json_file(const std::string& path);

// One row per (mode, GEMM, precision) with the statistics; N/A rows carry the reason.
std::string render_csv(const RunResult& r);

// write_file_atomic(path, text): core/io/output_paths.hpp (included here for its callers).

// format_thousands(v): core/util/text_util.hpp (included here for its callers).

// The attention heads of a config for headers: "heads=32, kv_heads=8, head_dim=128"; for MLA the
// real head sizes instead of hidden / heads: "heads=128 (MLA: qk head 192 = 128 nope + 64 rope,
// v head 128)". `always` prints kv_heads and head_dim even where they are the MHA defaults.
std::string heads_text(const ModelConfig& c, bool always);
// Where a plan's GEMM runs: "every layer", "dense layers", "MoE layers", "once per step", "-".
const char* scope_text(const Gemm& g);

}  // namespace gs

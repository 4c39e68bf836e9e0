// The collectives of a layout (core/node/collectives.hpp) in a run's result document: each
// collective in each wire type it sends is an item of record kind "collective" ("TP all-gather of
// the LN output before QKV (BF16)"), and each measurement a record of it with its times and
// bandwidth as named values; the layout and the collectives' sizes are the "comm" block beside
// them (comm_to_json's document, docs/json-schema.md). A --comm-json file is such a document for
// the collectives alone.
#pragma once
#include <nlohmann/json.hpp>

#include "core/node/collectives.hpp"
#include "core/results/results.hpp"

namespace gs {

// The items of `c` (one per collective and wire type, in plan order) as r's collective items, and
// a record per measurement: values "ms" (median over iterations, the slowest rank), "ms_min",
// "ms_max", "iterations", "size_bytes", "bus_gbs" and, timed beside its GEMM, "overlap_bf16.*" /
// "overlap_fp8.*" ("gemm_alone_ms", "gemm_overlap_ms", "comm_overlap_ms", "both_ms", "exposed_ms").
// Items whose collective was not measured have no record. Replaces r's collective items and records.
void add_collective_records(RunResult& r, const CommResult& c);

// The "comm" block: comm_to_json(c, plan) without its schema line.
nlohmann::json comm_block_json(const CommResult& c, const Plan& plan);

// --comm-json: a result document of `plan` holding the collectives only (no GEMM was timed): the
// plan, the "comm" block and the collective records.
nlohmann::json comm_document(const Plan& plan, const CommResult& c);

}  // namespace gs

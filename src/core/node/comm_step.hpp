// The per-layer summary of a run with --comm (docs/node.md): per recipe and layer kind, the layer's
// GEMM time (the GEMM report's per-layer total, first mode), its measured communication in that
// recipe's wire types (BF16 recipe: BF16; every other recipe: the FP8-recipe types), and the exposed
// part under the overlap model (timed beside the BF16 GEMM for the BF16 recipe, beside an FP8
// per-tensor GEMM for the others: collectives.hpp OverlapGemm).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/node/collectives.hpp"
#include "core/results/results.hpp"

namespace gs {

struct LayerCommRow {
  Precision precision;
  bool moe_layer;
  std::optional<double> gemm_ms;     // nullopt where a GEMM of the layer is N/A
  double comm_ms = 0;                // the layer's collectives, none overlapped
  std::optional<double> exposed_ms;  // where the layer has an overlap figure in the recipe's family
};

// Empty when nothing was measured (no GEMMs, no collective times).
std::vector<LayerCommRow> layer_comm_rows(const CommResult& comm, const RunResult& run);

// The table, or "" when there are no rows.
std::string render_layer_comm(const CommResult& comm, const RunResult& run);

}  // namespace gs

// Text blocks for models with experts or MLA: what the plan models, the step's routing and its
// imbalance, padding waste per recipe and the grouping efficiency of measured grouped GEMMs.
#pragma once
#include <string>

#include "core/results.hpp"

namespace gs {

// "Experts: ..." and "MLA: ..." lines of a model config (empty for a dense model with MHA/GQA).
std::string moe_config_text(const ModelConfig& c);
// The routing of a plan with experts: rows, imbalance (max/mean rows per expert, empty experts),
// expert parallelism (the busiest rank, which the plan times), dropped tokens, and the rows each
// recipe pads for alignment (waste). Empty for a plan without experts.
std::string moe_routing_text(const RunResult& r);
// Measured grouped GEMMs of one mode: padded rows and grouping efficiency (dense-equivalent time /
// grouped time) per precision, where the engine measured a dense equivalent.
std::string moe_grouped_block(const RunResult& r, size_t mode);
// Measured runs with MoE layers: one note per mode and low-precision recipe whose MoE layer is not
// faster than BF16's, saying why from the traffic model (labelled as such): the quantization bytes of
// the expert GEMMs (the expert weights' share of them: every weight is cast once per step), the
// rows per expert, and the Wgrad output traffic every precision pays. Empty when FP8 wins.
std::vector<std::string> moe_fp8_notes(const RunResult& r);

}  // namespace gs

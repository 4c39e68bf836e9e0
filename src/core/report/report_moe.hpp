// Text blocks for models with experts or MLA: what the plan models, the step's routing and its
// imbalance, padding waste per recipe and the grouping efficiency of measured grouped GEMMs.
#pragma once
#include <string>

#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

// "Experts: ..." and "MLA: ..." lines of a model config (empty for a dense model with MHA/GQA).
void add_moe_config(print::Document& d, const ModelConfig& c);
std::string moe_config_text(const ModelConfig& c);  // the same lines as text
// The routing of a plan with experts: rows, imbalance (max/mean rows per expert, empty experts),
// expert parallelism (the busiest rank, which the plan times), dropped tokens, and the rows each
// recipe pads for alignment (waste). Empty for a plan without experts.
void add_moe_routing(print::Document& d, const RunResult& r);
std::string moe_routing_text(const RunResult& r);  // the same lines as text
// Measured grouped GEMMs of one mode: padded rows and grouping efficiency (dense-equivalent time /
// grouped time) per precision, where the engine measured a dense equivalent.
void add_moe_grouped(print::Document& d, const RunResult& r, size_t mode);
std::string moe_grouped_block(const RunResult& r, size_t mode);  // the same block as text

}  // namespace gs

// Grouped (MoE expert) GEMMs: the per-expert sizes a recipe actually computes. Transformer Engine
// (Megatron's Fp8Padding) pads each expert's tokens to the quantized kernels' alignment; the padded
// rows are computed (and reported as waste) but carry no FLOPs of the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

// Row alignment per expert: 1 for BF16 (no padding), 16 for the FP8 per-tensor and block recipes,
// 32 for MXFP8 and NVFP4 (one 32-element scale block along the token dimension of Wgrad).
int64_t group_alignment(Precision p);

// Per-expert sizes along g.group_dim, each rounded up to group_alignment(p); empty experts stay 0
// (no Fprop/Dgrad work; their Wgrad output is zeroed). Empty vector when g is not grouped.
std::vector<int64_t> padded_group(const Gemm& g, Precision p);

// The dense GEMM one expert runs: g with m (GroupDim::M) or k (GroupDim::K) set to `size`,
// not grouped.
Gemm expert_gemm(const Gemm& g, int64_t size);

// Quantization kernel launches of one iteration of grouped GEMM `g` under recipe `r`, operand work
// (a, b) (core/recipes/recipe.hpp). Per quantized operand: an amax pass (2 launches: current scaling
// without a producer's amax), the cast (1; a Dual operand's both copies in one fused pass for the
// FP8 recipes, 2 passes otherwise) and delayed scaling's history step (1). `fused`
// (RecipeOptions::grouped_quant_fused, FP8 recipes): once per operand for all experts, as the
// multi-tensor launches run it; otherwise once per expert with rows.
int64_t grouped_quant_launches(const Recipe& r, const Gemm& g, const OperandWork& a, const OperandWork& b, bool fused);
// Whether the fused (multi-tensor) path serves recipe `r`: FP8 current, delayed or block scaling.
bool grouped_quant_fusable(const Recipe& r);

// Sum of padded_group minus sum of g.group: rows computed for alignment only.
int64_t padded_waste(const Gemm& g, Precision p);

// Why `g` cannot be measured grouped ("" when it can): operand layouts, sizes.
std::string grouped_layout_problem(const Gemm& g);

// Why a measurement of `g` in column precision `p` is N/A by the shape rules, or "": the rule the
// engine applies and the dry run predicts with. A dense GEMM: shape_constraint of its recipe. A
// grouped GEMM: its layout, then the recipe's rule on one expert of group_alignment(p) rows (each
// expert's rows are padded to a multiple of it), never on the summed rows.
std::string cell_shape_problem(const Gemm& g, Precision p, const RecipeOptions& o);

}  // namespace gs

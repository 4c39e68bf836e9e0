// What the DeepGEMM provider (src/cuda/providers/deepgemm/deepgemm_provider.cpp) measures, in pure C++ so
// the rules are tested on CPU with a fake compute capability: which cells it can run (DeepSeek's
// FP8 block recipe on sm_90; everything else N/A with the reason), which DeepGEMM kernel a cell
// maps to, and the rows the contiguous expert layouts pad (the report's padding waste).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/providers/deepgemm_config.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

// The DeepGEMM kernel a recipe maps to: FP8_1D2D (gemm_fp8_fp8_bf16_nt: 1x128 left, 128x128 right,
// BF16 out; M-grouped contiguous for grouped Fprop/Dgrad), FP8_1D1D (wgrad_gemm_fp8_fp8_fp32_nt:
// 1x128 on both, FP32 accumulate; K-grouped contiguous for grouped Wgrad), BF16 (sm90_bf16_gemm,
// BF16 out; M-grouped contiguous for grouped Fprop/Dgrad) or BF16_FP32 (the same kernel
// accumulating into the FP32 main gradient: BF16 Wgrad under --wgrad-output fp32-accumulate;
// K-grouped for grouped Wgrad, either output).
// nullopt: no DeepGEMM kernel for it.
std::optional<dg::Kernel> deepgemm_kernel(const Recipe& r);

// Why the DeepGEMM provider cannot measure `g` under recipe `r` (the cell's recipe, make_recipe)
// on a device of compute capability `cc` (major*10+minor), or "" when it can. Covers the
// architecture, the recipe (precision, formats, scalings, Wgrad output) and the shape rules of
// DeepGEMM's kernels (FP8: K and contiguous segments multiples of 128; BF16: K % 64, MN-major
// operands' M/N % 8; N % 64 for BF16 output). Every
// reason names the provider. Whether NVRTC and the toolkit headers are on the node is the
// backend's, checked before this (deepgemm_runtime.hpp).
std::string deepgemm_cell_problem(const Gemm& g, const Recipe& r, int cc);

// Per-expert sizes along g.group_dim as the DeepGEMM provider lays them out: each expert's real
// rows (M-grouped Fprop/Dgrad) or tokens (Wgrad's contraction) rounded up to DeepGEMM's segment
// alignment (dg::kMGroupedAlignment = 128); empty experts stay 0. Empty when g is not grouped.
std::vector<int64_t> deepgemm_padded_group(const Gemm& g);

// Rows computed for alignment only, per recipe and provider, for the expert up projection's Fprop
// (the GEMM the report's padding line names): cuBLASLt pads to group_alignment(p) (16 for FP8,
// 32 for MXFP8/NVFP4), DeepGEMM to 128 (FP8Block, when "deepgemm" is among the run's providers).
struct PaddingWaste {
  std::string provider;  // "cublaslt" or "deepgemm"
  Precision precision = Precision::BF16;
  int64_t alignment = 1;
  int64_t rows = 0;         // the real rows (sum over experts)
  int64_t waste_rows = 0;   // padded rows minus real rows
  double fraction() const { return rows ? static_cast<double>(waste_rows) / static_cast<double>(rows) : 0.0; }
};
std::vector<PaddingWaste> padding_waste(const RunResult& r);

}  // namespace gs

// Grouped quantization as training frameworks run it: the operands of all experts of a grouped
// GEMM quantized in a fixed, small number of multi-tensor launches (quantize_multi.cuh), not one
// amax and cast per expert. Transformer Engine's GroupedLinear quantizes the inputs of all
// experts in one multi-tensor call and the expert weights likewise; DeepSeek-V3 quantizes the
// token buffer once before dispatch (1x128 scales are token-local, so grouping changes nothing
// in them).
//
// Built from the experts' GEMMs (recipe_gemm.hpp), it takes over their quantization work: every
// operand that a GEMM's step() would quantize (Own or Dual, with or without a producer's amax,
// core/recipes/modes.hpp) is quantized here with exactly the same arguments, so each expert's quantized
// copies and scales are bit-identical to the per-expert path (GPU test GroupedQuant.*); the
// GEMMs then run alone. Per grouped GEMM and operand: amax (current scaling, 2 launches), one
// cast, and after the GEMMs one delayed-scaling update, whatever the expert count.
//
// FP8 current, delayed and block scaling. MXFP8 and NVFP4 keep the per-expert path (supports()).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/recipes/recipe.hpp"
#include "cuda/quant/quantize_multi.cuh"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

class GroupedQuantizer {
 public:
  // Whether the recipe's operands can be quantized here (FP8 current, delayed, block scaling run
  // by the FP8 kernels, not through the MXFP8 path on Blackwell).
  static bool supports(const Recipe& r);
  // `experts`: the per-expert GEMMs (null for an expert without one). Each is switched to
  // quantize_externally(). Throws std::invalid_argument if an operand cannot be fused.
  explicit GroupedQuantizer(const std::vector<RecipeGemm*>& experts);
  void quantize(cudaStream_t s) const;    // before the GEMMs: every amax, then every cast
  void after_gemms(cudaStream_t s) const; // after them: delayed scaling's history steps
  int quantize_ops() const;               // kernels quantize() launches
  int after_ops() const;
  bool has_quantize() const { return quantize_ops() > 0; }
  bool has_after() const { return after_ops() > 0; }
  // Launches per iteration and the tensors they cover (report notes, tests).
  int launches() const { return quantize_ops() + after_ops(); }
  int tensors() const;

 private:
  std::vector<std::unique_ptr<MultiQuant>> before_, after_;
};

}  // namespace gs::cuda

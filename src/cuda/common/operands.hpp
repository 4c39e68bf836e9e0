// The operands the engine measures a cell on, whichever provider runs it: a dense GEMM's BF16
// sources and output, and a grouped GEMM's (MoE experts) token-major buffers and per-expert parts.
// The engine allocates and fills them once per shape (outside every timed region) and keeps them
// from cell to cell while they match; the providers read and write them (providers/provider.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/results/results.hpp"
#include "cuda/common/device_buffer.hpp"

namespace gs::cuda {

// BF16 operands as a training framework stores them (see core/plan/plan.hpp), and the output.
struct GemmSources {
  int64_t m = 0, k = 0, n = 0;
  bool l_k_major = true, r_k_major = true;
  DeviceBuffer l, r, c;  // l: [m,k] or [k,m]; r: [n,k] or [k,n]; c: [m,n]; BF16 (c: see c_fp32)
  // c is an FP32 main gradient the GEMM accumulates into (FP32 C and D, beta = 1): Wgrad with
  // RecipeOptions::wgrad_fp32_accumulate (core/recipes/recipe.hpp: wgrad_accumulates_fp32).
  bool c_fp32 = false;
  static GemmSources allocate(const Gemm& g, bool c_fp32 = false);
  bool matches(const Gemm& g, bool fp32 = false) const {
    return m == g.m && k == g.k && n == g.n && l_k_major == g.a.k_major && r_k_major == g.b.k_major && c_fp32 == fp32;
  }
  // Inputs ~ N(0,1), weights ~ N(0, 0.02) as a trained layer roughly has, from `seed`; with
  // Dist::Outliers, activations and gradients get 0.1% of elements scaled by 50 (weights stay
  // normal). C is zeroed. Synchronizes `s`.
  void fill(const Gemm& g, Dist d, uint64_t seed, cudaStream_t s);
};

// The BF16 operands of a grouped GEMM at one padding (shared by every precision with the same
// alignment, by every mode and by every provider).
//   GroupDim::M (Fprop, Dgrad): the left operand (X or dY) is one token-major buffer [sum(rows), k]
//     sliced per expert; each expert has its own right operand (weight) and writes its rows of one
//     output buffer [sum(rows), n].
//   GroupDim::K (Wgrad): both operands are token-major buffers [sum(tokens), m] and [sum(tokens), n]
//     sliced per expert along the contraction; each expert writes its own weight gradient [m, n].
struct GroupedSources {
  Gemm gemm;                    // the grouped GEMM (real sizes)
  std::vector<int64_t> sizes;   // padded per-expert sizes along gemm.group_dim
  std::vector<int64_t> offsets; // prefix sums of sizes
  DeviceBuffer tokens_l;        // M: left [sum, k]; K: left [sum, m]
  DeviceBuffer tokens_r;        // K only: right [sum, n]
  DeviceBuffer out;             // M: output [sum, n]; K: every expert's output [experts*m, n] (per_expert view it)
  std::vector<DeviceBuffer> per_expert;  // M: right operands (weights); K: outputs [m, n] (BF16 or FP32)
  bool fp32_out = false;                  // K: the outputs are FP32 main gradients
  bool matches(const Gemm& g, const std::vector<int64_t>& padded, bool fp32) const;
  // Bytes allocate() needs.
  static size_t bytes_needed(const Gemm& g, const std::vector<int64_t>& padded, bool fp32);
  // fp32: Wgrad's outputs are FP32 gradients (filled with small values, accumulated into).
  // Throws CudaError (oom) or std::invalid_argument for a layout the grouped path cannot slice.
  static std::unique_ptr<GroupedSources> allocate(const Gemm& g, const std::vector<int64_t>& padded, uint64_t seed,
                                                  cudaStream_t s, bool fp32 = false);
};

}  // namespace gs::cuda

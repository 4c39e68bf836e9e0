// One GEMM of the plan in one precision, ready to run: the BF16 sources, the quantized copies in
// the layout cuBLASLt needs, the quantization steps the recipe prescribes and the cuBLASLt call.
// This is the only place that turns a Recipe (core/recipe.hpp) into kernels.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <memory>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/recipe.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/gemm_lt.hpp"

namespace gs::cuda {

// BF16 operands as a training framework stores them (see core/plan.hpp), and the output.
struct GemmSources {
  int64_t m = 0, k = 0, n = 0;
  bool l_k_major = true, r_k_major = true;
  DeviceBuffer l, r, c;  // l: [m,k] or [k,m]; r: [n,k] or [k,n]; c: [m,n]; all BF16
  static GemmSources allocate(const Gemm& g);
  bool matches(const Gemm& g) const {
    return m == g.m && k == g.k && n == g.n && l_k_major == g.a.k_major && r_k_major == g.b.k_major;
  }
};

// One operand's quantization, as its OperandRecipe says.
class QuantizedOperand {
 public:
  // `src` is [rows, cols] row-major; the quantized copy is [outer, K] K-contiguous.
  QuantizedOperand(const OperandRecipe& recipe, const __nv_bfloat16* src, int64_t outer, int64_t k, bool src_k_major,
                   const RecipeOptions& opts);
  void quantize(cudaStream_t s);     // the autocast work for this operand
  void after_gemm(cudaStream_t s);   // delayed scaling's amax-history step; no-op otherwise
  LtOperand lt() const;              // what cuBLASLt gets
  const OperandRecipe& recipe() const { return recipe_; }
  int64_t outer() const { return outer_; }
  int64_t k() const { return k_; }
  // Host copies for verification: the quantized bytes [outer*K] and the scales as the GEMM reads them.
  std::vector<uint8_t> data_host() const;
  std::vector<float> scales_host() const;

 private:
  OperandRecipe recipe_;
  const __nv_bfloat16* src_;
  int64_t outer_, k_;
  bool transpose_;  // source is [K, outer]
  DeviceBuffer q_, scale_, amax_, ws_, history_, pos_, delayed_scale_;
  int history_len_ = 1;
};

class RecipeGemm {
 public:
  RecipeGemm(cublasLtHandle_t handle, const Gemm& g, const Recipe& r, GemmSources& src, void* workspace,
             const RecipeOptions& opts);
  // One autocast iteration: quantize both BF16 operands into the GEMM's layout, run the GEMM,
  // and (delayed scaling) the amax-history step, which TE runs once per step outside.
  void autocast_step(cudaStream_t s);
  // One pre-quantized iteration: the GEMM kernel only.
  void gemm_only(cudaStream_t s);
  // Prepares pre-quantized operands (for delayed scaling: enough rounds that the scale comes
  // from this data's amax history).
  void prequantize(cudaStream_t s);
  const QuantizedOperand* l() const { return l_.get(); }
  const QuantizedOperand* r() const { return r_.get(); }
  const std::string& layout() const { return mm_->layout(); }

 private:
  Recipe recipe_;
  std::unique_ptr<QuantizedOperand> l_, r_;  // null for BF16
  std::unique_ptr<LtMatmul> mm_;
};

cudaDataType_t cuda_type(ElemFormat f);

}  // namespace gs::cuda

// One GEMM of the plan in one precision, ready to run: the BF16 sources, the quantized copies in
// the layout cuBLASLt needs, the quantization steps the recipe prescribes and the cuBLASLt call.
// This is the only place that turns a Recipe (core/recipes/recipe.hpp) into kernels.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <functional>

#include <memory>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/operands.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/quant/quantize_multi.cuh"

namespace gs::cuda {

// One operand's quantization, as its OperandRecipe says.
class QuantizedOperand {
 public:
  // `src` is [rows, cols] row-major; the quantized copy is [outer, K] K-contiguous.
  QuantizedOperand(const OperandRecipe& recipe, const __nv_bfloat16* src, int64_t outer, int64_t k, bool src_k_major,
                   const RecipeOptions& opts);
  // The quantization work for this operand. amax_given: skip the per-tensor amax pass and cast with
  // the amax already in this operand's amax buffer (left there by an earlier quantize()).
  void quantize(cudaStream_t s, bool amax_given = false);
  // Dual (training mode): quantizes the source into this operand and into `other`, which must
  // hold the same source in the other layout. One fused pass for the FP8 recipes (after one amax
  // pass for current scaling; delayed scaling records into this operand's history); MXFP8/NVFP4
  // run two independent passes. Throws std::invalid_argument if `other` is not the sibling.
  void quantize_dual(QuantizedOperand& other, cudaStream_t s, bool amax_given = false);
  void after_gemm(cudaStream_t s);   // delayed scaling's amax-history step; no-op otherwise
  // Upper bounds of the stream operations (kernel launches, memsets) quantize() / after_gemm()
  // enqueue: the chunked timed loop sizes its chunks with them (timed_loop.hpp).
  int quantize_ops(bool amax_given = false) const;
  int after_gemm_ops() const { return recipe_.scaling == Scaling::TensorDelayed ? 1 : 0; }
  LtOperand lt() const;              // what cuBLASLt gets
  const OperandRecipe& recipe() const { return recipe_; }
  int64_t outer() const { return outer_; }
  int64_t k() const { return k_; }
  // Host copies for verification: the quantized bytes [outer*K] and the scales as the GEMM reads them.
  std::vector<uint8_t> data_host() const;
  std::vector<float> scales_host() const;
  // This operand as one tensor of a multi-tensor launch (quantize_multi.cuh): the arguments its
  // own quantize() passes (FP8 scalings only). With `other` (a Dual sibling), the fused dual
  // cast of both copies, as quantize_dual() runs it.
  QuantTensor tensor() const;
  QuantTensor dual_tensor(const QuantizedOperand& other) const;
  // NVFP4: the device float 1/global_encode_scale that multiplies the GEMM result; else null.
  const float* global_scale_inv() const { return gscale_inv_ ? gscale_inv_.get<float>() : nullptr; }
  // Accuracy emulation: the dequantized operand [outer, K] in BF16 (exact for MXFP8/NVFP4
  // element x block scale; the NVFP4 global scale is left to global_scale_inv()).
  void dequantize_to(__nv_bfloat16* out, cudaStream_t s) const;

 private:
  OperandRecipe recipe_;
  const __nv_bfloat16* src_;
  int64_t outer_, k_;
  bool transpose_;  // source is [K, outer]
  DeviceBuffer q_, scale_, amax_, ws_, history_, pos_, delayed_scale_, gscale_inv_;
  int history_len_ = 1;
  uint64_t sr_calls_ = 0;
};

class RecipeGemm {
 public:
  // with_gemm=false builds only the quantization side (accuracy emulation where cuBLASLt has no
  // kernel for the format, e.g. MXFP8/NVFP4 on Hopper).
  // wl / wr: what step() does for the left / right operand (core/recipes/modes.hpp). A Dual operand gets
  // a sibling: the other-layout copy its dual_consumer GEMM reads, with that GEMM's recipe.
  // `cache` (optional): the cuBLASLt heuristic is asked once per distinct problem (grouped GEMMs).
  RecipeGemm(cublasLtHandle_t handle, const Gemm& g, const Recipe& r, GemmSources& src, void* workspace,
             const RecipeOptions& opts, bool with_gemm = true, OperandWork wl = {}, OperandWork wr = {},
             LtAlgoCache* cache = nullptr,
             int sm_count = 0,  // sm_count > 0: the GEMM's SM-count target (--num-sms)
             int heuristic_count = 1);  // the heuristic candidates its LtMatmul asks for (LtTuner::heuristic_count)
  // One timed iteration of the mode the work flags describe: quantize the Own/Dual operands, the
  // GEMM, delayed scaling's history step for the quantized ones. Operands with work None, and the
  // amax of producer_amax operands, must have been prepared by prequantize().
  void step(cudaStream_t s);
  // Upper bound of the stream operations one step() enqueues (timed_loop.hpp).
  int step_ops() const;
  // step() without the cuBLASLt GEMM, for another provider's kernel (provider.hpp) between the
  // two: the same quantization work before it and delayed scaling's history step after it.
  // Valid without the GEMM (with_gemm = false).
  void step_quantize(cudaStream_t s);
  void step_after(cudaStream_t s);
  int step_quantize_ops() const;  // both together, stream operations (as step_ops)
  bool needs_prequantize() const {
    return wl_.work == QuantWork::None || wr_.work == QuantWork::None || wl_.producer_amax || wr_.producer_amax;
  }
  // One per-gemm iteration: quantize both BF16 operands into the GEMM's layout, run the GEMM,
  // and (delayed scaling) the amax-history step, which TE runs once per step outside.
  void per_gemm_step(cudaStream_t s);
  // One pre-quantized iteration: the GEMM kernel only.
  void gemm_only(cudaStream_t s);
  // Accuracy emulation on GPUs without MXFP8/NVFP4 GEMMs: quantize both operands only.
  void quantize_only(cudaStream_t s) {
    if (l_) l_->quantize(s);
    if (r_) r_->quantize(s);
    update_alpha(s);
  }
  const float* alpha_device() const { return alpha_ ? alpha_.get<float>() : nullptr; }
  // Prepares pre-quantized operands (for delayed scaling: enough rounds that the scale comes
  // from this data's amax history).
  void prequantize(cudaStream_t s);
  // The grouped path quantizes every expert's operands in multi-tensor launches
  // (grouped_quant.hpp): from then on step() runs the GEMM only (no quantization, no history step).
  void quantize_externally() { external_quant_ = true; }
  bool quantized_externally() const { return external_quant_; }
  const OperandWork& work(Side side) const { return side == Side::Left ? wl_ : wr_; }
  const QuantizedOperand* l() const { return l_.get(); }
  const QuantizedOperand* r() const { return r_.get(); }
  // Dual operands' other-layout copies (null unless that operand's work is Dual).
  const QuantizedOperand* l_sibling() const { return l_sib_.get(); }
  const QuantizedOperand* r_sibling() const { return r_sib_.get(); }
  // Another provider's GEMM kernel (provider.hpp) in place of the cuBLASLt matmul, for a RecipeGemm
  // built with_gemm=false: step() and per_gemm_step() then run the recipe's quantization around
  // `run` (which reads l() / r()); `ops` is what it enqueues (launch gate).
  void use_kernel(std::function<void(cudaStream_t)> run, int ops) {
    kernel_ = std::move(run);
    kernel_ops_ = ops;
  }
  std::string layout() const { return mm_ ? mm_->layout() : std::string("-"); }
  LtMatmul* matmul() { return mm_.get(); }  // null when built without the GEMM
  const LtMatmul* matmul() const { return mm_.get(); }

 private:
  void update_alpha(cudaStream_t s);
  void run_gemm(cudaStream_t s) { kernel_ ? kernel_(s) : mm_->run(s); }
  Recipe recipe_;
  DeviceBuffer alpha_;  // NVFP4: device {alpha, 0} = product of both operands' global scales
  std::unique_ptr<QuantizedOperand> l_, r_;  // null for BF16
  std::unique_ptr<QuantizedOperand> l_sib_, r_sib_;  // Dual: the other-layout copies
  OperandWork wl_, wr_;
  bool external_quant_ = false;
  float beta_ = 0.f;  // 1: accumulating into an FP32 main gradient
  std::unique_ptr<LtMatmul> mm_;
  std::function<void(cudaStream_t)> kernel_;  // use_kernel(): another provider's GEMM
  int kernel_ops_ = 0;
};

cudaDataType_t cuda_type(ElemFormat f);
// The quantization kernels' FP8 kind of a format (E4M3, E5M2); std::invalid_argument otherwise.
Fp8Kind fp8_kind(ElemFormat f);
// The cuBLASLt scale mode of a scaling (per-tensor scalings use the default scalar mode).
cublasLtMatmulMatrixScale_t lt_scale_mode(Scaling s);
// A quantized operand as cuBLASLt takes it: the recipe's type and scale mode, K-contiguous.
LtOperand lt_operand(const OperandRecipe& r, const void* data, const void* scale);

}  // namespace gs::cuda

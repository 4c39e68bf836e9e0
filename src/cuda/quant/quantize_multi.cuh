// Multi-tensor FP8 quantization: one launch quantizes a list of tensors (all experts of a grouped
// GEMM), as Transformer Engine's GroupedLinear quantizes the inputs of every expert in one
// multi-tensor call. The launch count is fixed, whatever the number of tensors:
//   amax (current scaling)    2 kernels: per-block partial maxima of every tensor, then one
//                             block per tensor reduces them (a segmented reduction);
//   casts, block scaling      1 kernel (2 only when the tensors mix 16-byte aligned and unaligned
//                             transposed rows);
//   delayed scaling's update  1 kernel, one block per tensor.
// Every tensor gets exactly the result of the single-tensor call (quantize.cuh) with the same
// arguments: both run the same device bodies (quantize_kernels.cuh), each tensor over its own
// slice of the grid, so the outputs are bit-identical (GPU test: MultiQuant*).
//
// The tensor table is uploaded once, at construction (it synchronizes); launch() only enqueues.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/quant/quantize.cuh"

namespace gs::cuda {

// One tensor of a multi-tensor launch: the arguments of the matching single-tensor call.
struct QuantTensor {
  const __nv_bfloat16* x = nullptr;  // source [rows, cols], row-major
  int rows = 0, cols = 0;
  bool transpose = false;            // output [cols, rows] (ignored by Dual: q is the transposed copy)
  uint8_t* q = nullptr;              // output (Dual: the transposed copy)
  float* scale_inv = nullptr;        // its dequantization scale(s)
  uint8_t* q_row = nullptr;          // Dual: the source-layout copy
  float* scale_row = nullptr;
  float* amax = nullptr;             // current scaling: written by Amax, read by CastCurrent
  void* amax_ws = nullptr;           // Amax: amax_workspace_bytes(rows * cols) bytes
  float* scale = nullptr;            // delayed scaling: the scale in use (DelayedUpdate writes it)
  float* history = nullptr;          // delayed scaling: amax history and position
  int* pos = nullptr;
  int hist_len = 0;
};

enum class MultiQuantOp {
  Amax,           // amax_bf16 of each tensor
  CastCurrent,    // cast_fp8_current (Dual: cast_fp8_current_dual)
  CastDelayed,    // cast_fp8_delayed (Dual: cast_fp8_delayed_dual)
  Block1x128,     // quantize_block_1x128 (Dual: quantize_block_1x128_dual)
  Block128x128,   // quantize_block_128x128 (Dual: ..._dual)
  DelayedUpdate,  // delayed_scale_update
};
const char* to_string(MultiQuantOp op);

// The amax pass's tensors as a kernel parameter (quantize_multi.cu), for up to kAmaxParamTensors.
constexpr int kAmaxParamTensors = 64;
struct AmaxParams {
  int count = 0;
  unsigned begin[kAmaxParamTensors + 1] = {};  // each tensor's first block; begin[count]: the grid
  const __nv_bfloat16* x[kAmaxParamTensors] = {};
  unsigned long long n[kAmaxParamTensors] = {};
  uint32_t* partial[kAmaxParamTensors] = {};
  float* amax[kAmaxParamTensors] = {};
};

class MultiQuant {
 public:
  // Tensors with no elements are dropped (an empty expert has nothing to quantize). Checks every
  // tensor as the single-tensor call does (std::invalid_argument).
  MultiQuant(MultiQuantOp op, Fp8Kind kind, bool dual, bool pow2, std::vector<QuantTensor> tensors);
  void launch(cudaStream_t s) const;
  int launches() const;  // kernels launch() enqueues
  int tensors() const { return count_; }
  MultiQuantOp op() const { return op_; }

 private:
  struct Group {  // one launch: tensors sharing a kernel instantiation
    std::shared_ptr<const AmaxParams> amax_params;  // amax over few tensors: the table as a kernel parameter
    DeviceBuffer table;       // MqTask per tensor
    DeviceBuffer block_task;  // int per block of the (first) kernel: its tensor
    int count = 0;
    unsigned blocks = 0;  // grid of the (first) kernel
    bool transpose = false, vec = true;
  };
  MultiQuantOp op_;
  Fp8Kind kind_;
  bool dual_, pow2_;
  int count_ = 0;
  std::vector<Group> groups_;
};

}  // namespace gs::cuda

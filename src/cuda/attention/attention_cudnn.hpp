// Fused attention as Transformer Engine runs it on Hopper: cuDNN's SDPA (flash) forward and
// backward graphs, driven through NVIDIA's header-only cudnn-frontend. libcudnn is never linked:
// it is loaded with dlopen("libcudnn.so.9") the first time `create` is called, so a binary built
// with the frontend still runs where cuDNN is absent (create() then returns nullptr and says why).
//
// This header needs neither cuDNN nor the frontend: without the frontend at build time
// (GEMMSCOPE_HAVE_CUDNN_ATTENTION 0) the same class compiles and create() always refuses with
// "built without cuDNN attention (GEMMSCOPE_CUDNN_FRONTEND_DIR)".
//
// Layout: Q, K, V, O, dO, dQ, dK, dV are separate contiguous BSHD tensors
// ([batch, seq, heads, head_dim], TE's qkv_format "bshd", layout "bshd_bshd_bshd"; TE's
// DotProductAttention defaults to "sbhd", which differs only in the batch and sequence strides and
// is the same memory when batch is 1). The softmax statistics (log-sum-exp, written by the
// forward and read by the backward) are FP32 [b, h_q, s_q].
//
// Enqueue cost on the host: the frontend builds a cuDNN variant pack per call (host objects, no
// device memory); a timed loop hides it behind a gate or a spin kernel as it does for GEMMs.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/model/attention_shape.hpp"

namespace gs::cuda {

using AttentionDims = gs::AttentionShape;  // core/model/attention_shape.hpp: dims, FLOPs, checks

enum class AttentionDtype {
  BF16,     // Q/K/V/O/dO/dQ/dK/dV in BF16, FP32 softmax and accumulation (TE's default)
  FP8_E4M3  // TE's FP8 DPA: Q/K/V/O/dO/dQ/dK/dV in E4M3 with per-tensor scales (unverified on hardware)
};

const char* to_string(AttentionDtype d);

// True when this build carries the cuDNN attention path (frontend found at configure time).
bool cudnn_attention_built();

class CudnnAttention {
 public:
  // Loads cuDNN (once per process), allocates every tensor and the workspace, fills Q, K, V and
  // dO with N(0, 1) values from `seed`, builds the forward and backward graphs and runs the
  // forward once (so the backward has O and the statistics). Returns nullptr with `why_not` set
  // to one line when cuDNN cannot be loaded, is too old, the dims are invalid, a graph is not
  // supported on this GPU, or memory runs out. Uses the current CUDA device; synchronizes.
  static std::unique_ptr<CudnnAttention> create(const AttentionDims& dims, AttentionDtype dtype, uint64_t seed,
                                                std::string& why_not);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Enqueue one forward (writes O and the statistics) or one backward (reads Q, K, V, O, dO and
  // the statistics; writes dQ, dK, dV) on `stream`. No synchronization, no device allocation.
  // Throws std::runtime_error if cuDNN reports a failure.
  void forward(cudaStream_t stream);
  void backward(cudaStream_t stream);

  const AttentionDims& dims() const;
  AttentionDtype dtype() const;
  double fwd_flops() const { return gs::attention_fwd_flops(dims()); }  // core/model/attention_shape.hpp
  double bwd_flops() const { return gs::attention_bwd_flops(dims()); }
  size_t workspace_bytes() const;  // the larger of the two graphs' workspaces (one buffer)
  size_t device_bytes() const;     // all device memory held: tensors + workspace

  // Device pointers (BSHD, element type per dtype: __nv_bfloat16 or E4M3 bytes), for tests.
  void* q() const;
  void* k() const;
  void* v() const;
  void* o() const;
  void* d_o() const;
  void* d_q() const;
  void* d_k() const;
  void* d_v() const;
  float* stats() const;  // FP32 [b, h_q, s_q]: log-sum-exp of the scaled scores per row
  float attn_scale() const;  // 1 / sqrt(d_qk)

  // FP8 only: the per-tensor scale factors the graphs use (quantized = value * scale). Q, K, V,
  // O, dO, dQ, dK, dV use 1; the softmax probabilities 448 (their amax is at most 1), dP 1.
  struct Fp8Scales {
    float qkv = 1.f, o = 1.f, d_o = 1.f, s = 448.f, dp = 1.f, dqkv = 1.f;
  };
  Fp8Scales fp8_scales() const;

  struct Impl;

 private:
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "9.14.0" etc. once cuDNN is loaded (after a create() call got that far); empty otherwise.
std::string cudnn_loaded_version();

// Why this process has no cuDNN attention at all: built without it ("built without cuDNN
// attention (GEMMSCOPE_CUDNN_FRONTEND_DIR)"), or the library cannot be loaded, is not cuDNN 9 or
// is older than 9.6 (loads it once, as create() does); "" when it is there, so that a create()
// returning nullptr is about the graph, the shape or the memory, not a missing optional runtime.
std::string cudnn_unavailable_reason();

}  // namespace gs::cuda

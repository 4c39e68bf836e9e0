// Attention's own matmuls: Q K^T and P V, forward and backward, as planned rows of one layer on one
// GPU. They sit beside the GEMM plan, never in it: flash attention fuses them with the softmax into
// one kernel per pass, so gemmscope never times them as GEMMs and they never enter the GEMM totals
// or speedups. The step context times each pass as cuDNN's fused kernel (core/plan/step_model.hpp);
// reports show that time per pass (core/report/report_attention.hpp). Pure C++, tested on CPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/attention_shape.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"

namespace gs {

// One matmul of attention, repeated over `products` independent (sequence, query head) pairs:
// C[m,n] = A[m,k] . B[k,n] each. Every row touches the s x s scores (as an operand or the output),
// so the causal mask halves its useful FLOPs exactly.
struct AttentionMatmul {
  Pass pass = Pass::Fprop;  // Fprop: forward; Dgrad: backward (every operand is an activation: no Wgrad)
  std::string name;         // "S = Q K^T"
  int64_t products = 0;     // batch x query heads (per GPU)
  int64_t m = 0, k = 0, n = 0;
  // 2 x products x m x k x n, halved under the causal mask (the masked half of the scores is skipped
  // by flash attention's kernels and not counted).
  double flops(bool causal) const;
  // BF16 bytes a standalone batched GEMM would read (A, B) and write (C), S and P materialized in
  // full (s x s): what fusing saves, not what the fused kernel moves.
  double unfused_bytes() const;
  std::string shape() const;  // "32 x 4096x128x4096"
};

struct AttentionMatmuls {
  AttentionShape shape;                // attention_shape(config): per GPU, causal
  std::vector<AttentionMatmul> rows;   // forward S = Q K^T, O = P V; backward dV, dP, dQ, dK
  int64_t layers = 0;                  // every layer has one attention (dense and MoE layers alike)
  double flops(Pass pass) const;       // the rows of one pass, causal as the shape says
  double flops_per_layer(bool causal) const;  // both passes
  double flops_per_step() const { return flops_per_layer(shape.causal) * static_cast<double>(layers); }
  // Flash attention's backward recomputes S = Q K^T from Q, K and the saved softmax statistics:
  // executed FLOPs beyond the model's matmuls (attention_bwd_flops counts them).
  double recomputed_flops() const;
  // Bytes a fused pass must move at least (each tensor once): forward reads Q, K, V and writes O
  // (BF16) and the softmax statistics (FP32 per query row and head); backward reads Q, K, V, O, dO
  // and the statistics and writes dQ, dK, dV. Pass::Fprop or Pass::Dgrad.
  double fused_bytes(Pass pass) const;
};

// The rows of one layer of `c` (model mode): heads split by tensor parallelism, GQA/MQA key/value
// heads, MLA's head sizes (qk_nope + qk_rope, v), causal self-attention over micro-batch x sequence.
AttentionMatmuls attention_matmuls(const ModelConfig& c);

}  // namespace gs

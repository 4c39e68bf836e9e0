// One layer's fused attention as a kernel sees it: the dims of a flash-attention (cuDNN SDPA)
// forward and backward, and the FLOPs those kernels execute. Pure C++; the backend measures it
// (src/cuda/attention/attention_cudnn), the step context sizes its attention from it.
#pragma once
#include <cstdint>
#include <string>

namespace gs {

struct AttentionShape {
  int64_t batch = 1;
  int64_t seq_q = 0;
  int64_t seq_kv = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // < heads_q: GQA (1: MQA); query head h reads K/V head h / (heads_q / heads_kv)
  int64_t d_qk = 0;      // head dim of Q and K
  int64_t d_v = 0;       // head dim of V and O (MLA: d_qk 192, d_v 128)
  bool causal = false;   // top-left aligned causal mask: key j is masked for query i when j > i
};

// Empty when the shape is valid; otherwise one line saying what is wrong.
std::string check_attention_shape(const AttentionShape& a);

// Score pairs the kernels compute: batch x heads_q x seq_q x seq_kv, halved when causal (as
// FlashAttention's benchmark counts; the exact count for seq_q == seq_kv, s(s+1)/2 per head,
// differs by 1/s).
double attention_score_pairs(const AttentionShape& a);

// FLOPs (2 per multiply-add) the fused kernels execute:
//   forward:  S = Q K^T, O = P V                               2 x pairs x (d_qk + d_v)
//   backward: S recomputed, dP = dO V^T, dV = P^T dO,
//             dQ = dS K, dK = dS^T Q                           2 x pairs x (3 d_qk + 2 d_v)
// The backward is 2.5x the forward when d_qk == d_v, FlashAttention's convention for quoting a
// fused kernel's TFLOP/s. (attention_matmuls.hpp plans the model's matmuls instead, one row each:
// the backward as twice the forward, the recomputed S apart.)
double attention_fwd_flops(const AttentionShape& a);
double attention_bwd_flops(const AttentionShape& a);

}  // namespace gs

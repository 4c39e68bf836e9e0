// The fused-attention shape: its checks and the FLOPs its kernels execute, against hand-worked cases.
#include <gtest/gtest.h>

#include "core/plan/attention_matmuls.hpp"
#include "core/model/attention_shape.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"

using namespace gs;

namespace {
AttentionShape shape(int64_t b, int64_t sq, int64_t skv, int64_t hq, int64_t hkv, int64_t dqk, int64_t dv, bool causal) {
  AttentionShape a;
  a.batch = b;
  a.seq_q = sq;
  a.seq_kv = skv;
  a.heads_q = hq;
  a.heads_kv = hkv;
  a.d_qk = dqk;
  a.d_v = dv;
  a.causal = causal;
  return a;
}
}  // namespace

TEST(AttentionShape, FlopsOfAHandWorkedLayer) {
  // b 2, s 4096, 32 heads of 128: pairs = 2 * 32 * 4096^2 = 1073741824.
  const AttentionShape a = shape(2, 4096, 4096, 32, 8, 128, 128, false);
  EXPECT_DOUBLE_EQ(attention_score_pairs(a), 1073741824.0);
  EXPECT_DOUBLE_EQ(attention_fwd_flops(a), 2.0 * 1073741824.0 * 256);        // 549.8 GFLOP
  EXPECT_DOUBLE_EQ(attention_bwd_flops(a), 2.0 * 1073741824.0 * 5 * 128);    // 2.5x the forward
  EXPECT_DOUBLE_EQ(attention_bwd_flops(a), 2.5 * attention_fwd_flops(a));
  // GQA does not change the FLOPs: every query head computes its own scores.
  EXPECT_DOUBLE_EQ(attention_fwd_flops(shape(2, 4096, 4096, 32, 32, 128, 128, false)), attention_fwd_flops(a));
}

TEST(AttentionShape, CausalHalvesThePairs) {
  const AttentionShape full = shape(1, 8192, 8192, 16, 16, 128, 128, false);
  AttentionShape causal = full;
  causal.causal = true;
  EXPECT_DOUBLE_EQ(attention_fwd_flops(causal), attention_fwd_flops(full) / 2);
  EXPECT_DOUBLE_EQ(attention_bwd_flops(causal), attention_bwd_flops(full) / 2);
}

TEST(AttentionShape, MlaHeadDims) {
  // DeepSeek MLA: d_qk 192, d_v 128; pairs = 1 * 128 * 4096^2 / 2 (causal).
  const AttentionShape a = shape(1, 4096, 4096, 128, 128, 192, 128, true);
  const double pairs = 128.0 * 4096 * 4096 / 2;
  EXPECT_DOUBLE_EQ(attention_fwd_flops(a), 2 * pairs * (192 + 128));
  EXPECT_DOUBLE_EQ(attention_bwd_flops(a), 2 * pairs * (3 * 192 + 2 * 128));
  EXPECT_GT(attention_bwd_flops(a), 2.5 * attention_fwd_flops(a));  // dQ, dK and S use d_qk
}

TEST(AttentionShape, AgreesWithThePlansModelCount) {
  // attention_matmuls.hpp's rows count forward + twice the forward (no recomputed S):
  // 3 x forward = forward + backward - the recomputed S (2 x pairs x d_qk).
  ModelConfig c = find_preset("llama-3-8b").config;
  c.micro_batch_size = 2;
  c.sequence_length = 4096;
  const AttentionShape a = shape(2, 4096, 4096, c.num_attention_heads, c.num_key_value_heads, c.head_dimension(),
                                 c.head_dimension(), true);
  const double recomputed_s = 2 * attention_score_pairs(a) * static_cast<double>(a.d_qk);
  const AttentionMatmuls m = attention_matmuls(c);
  EXPECT_DOUBLE_EQ(m.flops_per_layer(true), attention_fwd_flops(a) + attention_bwd_flops(a) - recomputed_s);
  EXPECT_DOUBLE_EQ(m.recomputed_flops(), recomputed_s);
  EXPECT_DOUBLE_EQ(m.flops(Pass::Fprop), attention_fwd_flops(a));
  EXPECT_DOUBLE_EQ(m.flops(Pass::Dgrad) + m.recomputed_flops(), attention_bwd_flops(a));
}

TEST(AttentionShape, Checks) {
  EXPECT_EQ(check_attention_shape(shape(1, 128, 128, 32, 8, 128, 128, true)), "");
  EXPECT_EQ(check_attention_shape(shape(1, 64, 192, 4, 1, 64, 64, false)), "");
  EXPECT_NE(check_attention_shape(shape(1, 128, 128, 6, 4, 128, 128, true)).find("not a multiple of heads_kv"),
            std::string::npos);
  EXPECT_NE(check_attention_shape(shape(0, 128, 128, 4, 4, 128, 128, true)), "");
  EXPECT_NE(check_attention_shape(shape(1, 128, 128, 4, 4, 128, 0, true)), "");
  EXPECT_NE(check_attention_shape(shape(1, 128, 128, 4, 0, 128, 128, true)), "");
}

// The GEMM plan: shapes and FLOPs checked against the seed tutorial and against hand-worked cases.
#include <gtest/gtest.h>

#include "core/util/error.hpp"
#include "core/plan/plan.hpp"

using namespace gs;

namespace {

struct Expect { Pass pass; Op op; int64_t m, k, n; };

void expect_plan(const Plan& p, const std::vector<Expect>& e) {
  ASSERT_EQ(p.gemms.size(), e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(p.gemms[i].pass, e[i].pass);
    EXPECT_EQ(p.gemms[i].op, e[i].op);
    EXPECT_EQ(p.gemms[i].m, e[i].m);
    EXPECT_EQ(p.gemms[i].k, e[i].k);
    EXPECT_EQ(p.gemms[i].n, e[i].n);
  }
}

}  // namespace

// The tutorial's 12 shapes for hidden 4096, intermediate 16384, 32 heads, 24 layers, 31x512.
TEST(Plan, SeedFiveBillionShapes) {
  Plan p = build_model_plan(default_config());
  expect_plan(p, {
      {Pass::Fprop, Op::Qkv, 15872, 4096, 12288},  {Pass::Fprop, Op::AttnOut, 15872, 4096, 4096},
      {Pass::Fprop, Op::MlpUp, 15872, 4096, 16384}, {Pass::Fprop, Op::MlpDown, 15872, 16384, 4096},
      {Pass::Dgrad, Op::Qkv, 15872, 12288, 4096},  {Pass::Dgrad, Op::AttnOut, 15872, 4096, 4096},
      {Pass::Dgrad, Op::MlpUp, 15872, 16384, 4096}, {Pass::Dgrad, Op::MlpDown, 15872, 4096, 16384},
      {Pass::Wgrad, Op::Qkv, 12288, 15872, 4096},  {Pass::Wgrad, Op::AttnOut, 4096, 15872, 4096},
      {Pass::Wgrad, Op::MlpUp, 16384, 15872, 4096}, {Pass::Wgrad, Op::MlpDown, 4096, 15872, 16384},
  });
  EXPECT_EQ(p.gemms[0].shape(), "15872x4096x12288");
  EXPECT_EQ(p.layers(), 24);
}

TEST(Plan, SeedFlopTotals) {
  Plan p = build_model_plan(default_config());
  // Tutorial: ~1.60T, ~0.53T, ~2.13T, ~2.13T forward; ~6.39T fwd; ~19.17T per layer; ~460T model.
  EXPECT_DOUBLE_EQ(p.gemms[0].flops(), 2.0 * 15872 * 4096 * 12288);
  EXPECT_NEAR(p.gemms[0].flops() / 1e12, 1.60, 0.005);
  EXPECT_NEAR(p.gemms[1].flops() / 1e12, 0.53, 0.005);
  EXPECT_NEAR(p.gemms[2].flops() / 1e12, 2.13, 0.005);
  EXPECT_NEAR(p.gemms[3].flops() / 1e12, 2.13, 0.005);
  PlanFlops f = plan_flops(p);
  EXPECT_DOUBLE_EQ(f.fprop, 2.0 * 15872 * 4096 * (12288 + 4096 + 16384 + 16384));
  EXPECT_DOUBLE_EQ(f.fprop, f.dgrad);
  EXPECT_DOUBLE_EQ(f.fprop, f.wgrad);
  EXPECT_NEAR(f.fprop / 1e12, 6.39, 0.005);
  EXPECT_NEAR(f.per_layer() / 1e12, 19.17, 0.01);
  EXPECT_NEAR(f.full_model(24) / 1e12, 460.1, 0.1);
  EXPECT_EQ(f.model_once, 0.0);
}

TEST(Plan, OperandRolesAndLayouts) {
  Plan p = build_model_plan(default_config());
  for (const Gemm& g : p.gemms) {
    SCOPED_TRACE(g.shape());
    switch (g.pass) {
      case Pass::Fprop:
        EXPECT_EQ(g.a.role, Role::Activation); EXPECT_TRUE(g.a.k_major);
        EXPECT_EQ(g.b.role, Role::Weight); EXPECT_TRUE(g.b.k_major);
        break;
      case Pass::Dgrad:
        EXPECT_EQ(g.a.role, Role::Grad); EXPECT_TRUE(g.a.k_major);
        EXPECT_EQ(g.b.role, Role::Weight); EXPECT_FALSE(g.b.k_major);
        break;
      case Pass::Wgrad:
        EXPECT_EQ(g.a.role, Role::Grad); EXPECT_FALSE(g.a.k_major);
        EXPECT_EQ(g.b.role, Role::Activation); EXPECT_FALSE(g.b.k_major);
        break;
      default: ADD_FAILURE();
    }
  }
}

// Llama-3-8B-like: hidden 4096, 32 heads, 8 kv heads (head_dim 128), gated MLP 14336.
// QKV N = (32 + 2*8) * 128 = 6144; MLP-up N = 2 * 14336 = 28672; attn-out K = 32*128 = 4096.
TEST(Plan, GqaAndGatedMlp) {
  ModelConfig c = default_config();
  c.num_key_value_heads = 8;
  c.intermediate_size = 14336;
  c.gated_mlp = true;
  c.micro_batch_size = 2;
  c.sequence_length = 4096;
  Plan p = build_model_plan(c);
  const int64_t T = 8192;
  expect_plan(p, {
      {Pass::Fprop, Op::Qkv, T, 4096, 6144},   {Pass::Fprop, Op::AttnOut, T, 4096, 4096},
      {Pass::Fprop, Op::MlpUp, T, 4096, 28672}, {Pass::Fprop, Op::MlpDown, T, 14336, 4096},
      {Pass::Dgrad, Op::Qkv, T, 6144, 4096},   {Pass::Dgrad, Op::AttnOut, T, 4096, 4096},
      {Pass::Dgrad, Op::MlpUp, T, 28672, 4096}, {Pass::Dgrad, Op::MlpDown, T, 4096, 14336},
      {Pass::Wgrad, Op::Qkv, 6144, T, 4096},   {Pass::Wgrad, Op::AttnOut, 4096, T, 4096},
      {Pass::Wgrad, Op::MlpUp, 28672, T, 4096}, {Pass::Wgrad, Op::MlpDown, 4096, T, 14336},
  });
}

// head_dim != hidden/heads (Gemma-style): hidden 3072, 16 heads of 256 -> q width 4096.
// QKV N = (16 + 2*16) * 256 = 12288, attention-out K = 16*256 = 4096, N = 3072.
TEST(Plan, ExplicitHeadDim) {
  ModelConfig c = default_config();
  c.hidden_size = 3072;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 0;
  c.head_dim = 256;
  c.intermediate_size = 8192;
  Plan p = build_model_plan(c);
  EXPECT_EQ(p.gemms[0].k, 3072);
  EXPECT_EQ(p.gemms[0].n, 12288);
  EXPECT_EQ(p.gemms[1].k, 4096);
  EXPECT_EQ(p.gemms[1].n, 3072);
}

// Tensor parallel 4 on the 5B config: QKV N 12288/4 = 3072, attn-out K 4096/4 = 1024,
// MLP-up N 16384/4 = 4096, MLP-down K 16384/4 = 4096; M unchanged.
TEST(Plan, TensorParallelSplits) {
  ModelConfig c = default_config();
  c.tensor_parallel = 4;
  Plan p = build_model_plan(c);
  expect_plan(p, {
      {Pass::Fprop, Op::Qkv, 15872, 4096, 3072},  {Pass::Fprop, Op::AttnOut, 15872, 1024, 4096},
      {Pass::Fprop, Op::MlpUp, 15872, 4096, 4096}, {Pass::Fprop, Op::MlpDown, 15872, 4096, 4096},
      {Pass::Dgrad, Op::Qkv, 15872, 3072, 4096},  {Pass::Dgrad, Op::AttnOut, 15872, 4096, 1024},
      {Pass::Dgrad, Op::MlpUp, 15872, 4096, 4096}, {Pass::Dgrad, Op::MlpDown, 15872, 4096, 4096},
      {Pass::Wgrad, Op::Qkv, 3072, 15872, 4096},  {Pass::Wgrad, Op::AttnOut, 4096, 15872, 1024},
      {Pass::Wgrad, Op::MlpUp, 4096, 15872, 4096}, {Pass::Wgrad, Op::MlpDown, 4096, 15872, 4096},
  });
}

// GQA with fewer kv heads than ranks: 64 heads, 8 kv heads, head_dim 128, TP 16. Megatron-LM
// refuses it (num_query_groups must divide by the TP size); Hugging Face / PyTorch's layout
// (--step-context eager or compile) replicates: per rank 4 query heads and 1 kv head, QKV N =
// (4 + 2) * 128 = 768, and the header says so.
TEST(Plan, TensorParallelReplicatesKvHeadsOnlyOutsideMegatron) {
  ModelConfig c = find_preset("llama-3-70b").config;
  c.tensor_parallel = 16;
  EXPECT_THROW(build_model_plan(c), UsageError);
  c.layout = LayoutFramework::PyTorch;
  Plan p = build_model_plan(c);
  EXPECT_EQ(p.gemms[0].n, 768);
  EXPECT_EQ(p.gemms[1].k, 512);
  ASSERT_FALSE(p.config->notes.empty());
  EXPECT_NE(p.config->notes.back().find("replicated 2 times"), std::string::npos) << p.config->notes.back();
}

TEST(Plan, TensorParallelMustSplitExactly) {
  ModelConfig c = default_config();
  c.tensor_parallel = 3;  // 32 heads not divisible by 3
  EXPECT_THROW(build_model_plan(c), UsageError);
  c = default_config();
  c.intermediate_size = 16386;  // heads fine with tp 2, intermediate not
  c.tensor_parallel = 4;
  EXPECT_THROW(build_model_plan(c), UsageError);
}

// LM head: vocab 32000, hidden 4096, 8192 tokens: once per model, 3 passes.
TEST(Plan, LmHeadCountedOncePerModel) {
  ModelConfig c = default_config();
  c.vocab_size = 32000;
  c.micro_batch_size = 2;
  c.sequence_length = 4096;
  Plan p = build_model_plan(c);
  ASSERT_EQ(p.gemms.size(), 15u);
  int lm = 0;
  for (const Gemm& g : p.gemms) {
    if (g.op != Op::LmHead) continue;
    ++lm;
    EXPECT_EQ(g.scope, Scope::Model);
    if (g.pass == Pass::Fprop) { EXPECT_EQ(g.m, 8192); EXPECT_EQ(g.k, 4096); EXPECT_EQ(g.n, 32000); }
    if (g.pass == Pass::Dgrad) { EXPECT_EQ(g.m, 8192); EXPECT_EQ(g.k, 32000); EXPECT_EQ(g.n, 4096); }
    if (g.pass == Pass::Wgrad) { EXPECT_EQ(g.m, 32000); EXPECT_EQ(g.k, 8192); EXPECT_EQ(g.n, 4096); }
  }
  EXPECT_EQ(lm, 3);
  PlanFlops f = plan_flops(p);
  EXPECT_DOUBLE_EQ(f.model_once, 3 * 2.0 * 8192 * 4096 * 32000);
  EXPECT_DOUBLE_EQ(f.full_model(24), 24 * f.per_layer() + f.model_once);
}

TEST(Shapes, ParsesTripletsAndSquares) {
  Plan p = build_shapes_plan("15872x4096x12288, 1024,2048X512x256");
  ASSERT_EQ(p.gemms.size(), 3u);
  EXPECT_EQ(p.gemms[0].shape(), "15872x4096x12288");
  EXPECT_EQ(p.gemms[1].shape(), "1024x1024x1024");
  EXPECT_EQ(p.gemms[2].shape(), "2048x512x256");
  EXPECT_FALSE(p.model_mode);
  EXPECT_EQ(p.gemms[0].scope, Scope::Shape);
}

TEST(Shapes, BadItemsNameTheItemAndReason) {
  auto msg = [](const std::string& s) {
    try { build_shapes_plan(s); } catch (const UsageError& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_NE(msg("1024x0x5").find("item 1 '1024x0x5': dimensions must be positive"), std::string::npos);
  EXPECT_NE(msg("16,12x5").find("item 2 '12x5': expected MxKxN"), std::string::npos);
  EXPECT_NE(msg("16,,32").find("item 2 is empty"), std::string::npos);
  EXPECT_NE(msg("axbxc").find("'a' is not an integer"), std::string::npos);
  EXPECT_NE(msg("99999999999999999999999").find("too large"), std::string::npos);
  EXPECT_NE(msg("1x1x99999999").find("exceeds the limit"), std::string::npos);
  EXPECT_NE(msg("-5").find("must be positive, got -5"), std::string::npos);
  EXPECT_NE(msg("").find("empty"), std::string::npos);
  EXPECT_NE(msg("12.5").find("not an integer"), std::string::npos);
}

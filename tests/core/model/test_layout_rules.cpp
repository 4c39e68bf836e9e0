// The frameworks' layout rules (core/model/layout_rules.hpp): Megatron-LM's tensor-parallel
// divisibility and vocabulary padding under the step contexts te and none, Hugging Face /
// PyTorch's under eager and compile; each refusal names its rule.
#include <gtest/gtest.h>

#include "core/model/layout_rules.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/plan/step_model.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

std::string refusal(const ModelConfig& c) {
  try {
    check_tensor_parallel(c);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// StarCoder2-15B's attention: 48 heads, 4 key/value heads (query groups).
ModelConfig starcoder2_15b(int64_t tp) {
  ModelConfig c = default_config();
  c.hidden_size = 6144;
  c.num_attention_heads = 48;
  c.num_key_value_heads = 4;
  c.intermediate_size = 24576;
  c.vocab_size = 49152;
  c.tensor_parallel = tp;
  return c;
}

}  // namespace

TEST(LayoutRules, FrameworkOfTheStepContext) {
  EXPECT_EQ(layout_framework(StepContextKind::TransformerEngine), LayoutFramework::Megatron);
  EXPECT_EQ(layout_framework(StepContextKind::None), LayoutFramework::Megatron);
  EXPECT_EQ(layout_framework(StepContextKind::Eager), LayoutFramework::PyTorch);
  EXPECT_EQ(layout_framework(StepContextKind::Compiled), LayoutFramework::PyTorch);
  EXPECT_EQ(ModelConfig{}.layout, LayoutFramework::Megatron);  // the training default
}

// Megatron-LM never replicates key/value heads: 4 query groups over TP 8 is refused, with the rule;
// at TP 4 each rank holds one. Hugging Face / PyTorch replicates them, said in a note.
TEST(LayoutRules, QueryGroupsDivideByTheTensorParallelSize) {
  ModelConfig c = starcoder2_15b(8);
  const std::string why = refusal(c);
  EXPECT_NE(why.find("num_query_groups must be divisible by tensor_model_parallel_size"), std::string::npos) << why;
  EXPECT_NE(why.find("--step-context eager or compile"), std::string::npos) << why;
  EXPECT_THROW(build_model_plan(c), UsageError);
  c.tensor_parallel = 4;
  EXPECT_EQ(refusal(c), "(accepted)");
  EXPECT_EQ(kv_heads_per_rank(c), 1);
  c.tensor_parallel = 8;
  c.layout = LayoutFramework::PyTorch;
  const std::vector<std::string> notes = check_tensor_parallel(c);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("replicated 2 times"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("Megatron-LM refuses this layout"), std::string::npos) << notes[0];
  EXPECT_EQ(kv_heads_per_rank(c), 1);
  const Plan p = build_model_plan(c);
  EXPECT_EQ(p.gemms[0].n, (48 / 8 + 2) * 128);  // 6 query heads and the replicated key/value pair
  // Neither dividing the other is refused by both.
  c.num_key_value_heads = 16;
  c.num_attention_heads = 48;
  c.tensor_parallel = 6;
  EXPECT_NE(refusal(c).find("do not split evenly"), std::string::npos) << refusal(c);
}

// Both frameworks split whole heads and whole FFN columns; MLA has no key/value heads to split.
TEST(LayoutRules, HeadsAndFfnDivideByTheTensorParallelSize) {
  for (LayoutFramework f : {LayoutFramework::Megatron, LayoutFramework::PyTorch}) {
    ModelConfig c = default_config();  // 32 heads, intermediate 16384
    c.layout = f;
    c.tensor_parallel = 3;
    EXPECT_NE(refusal(c).find("num_attention_heads must be divisible by the tensor-parallel size"), std::string::npos)
        << refusal(c);
    c.tensor_parallel = 4;
    c.intermediate_size = 16386;
    EXPECT_NE(refusal(c).find("splits the MLP's columns evenly"), std::string::npos) << refusal(c);
  }
  ModelConfig d = find_preset("deepseek-v3").config;  // MLA: 128 heads, num_key_value_heads unused
  d.moe.expert_parallel = 1;
  d.num_key_value_heads = 3;
  d.num_attention_heads = 120;
  d.tensor_parallel = 8;
  EXPECT_EQ(refusal(d), "(accepted)");
}

// Megatron-LM pads the vocabulary to make_vocab_size_divisible_by (128) x TP at any TP, so the LM
// head's GEMMs are padded at TP 1 too; PyTorch's plan keeps the vocabulary and gives the largest
// share of an uneven split to a rank, with a note.
TEST(LayoutRules, VocabularyPadding) {
  ModelConfig c = default_config();
  c.vocab_size = 50257;
  EXPECT_EQ(padded_vocab(c), 50304);
  EXPECT_EQ(vocab_per_rank(c), 50304);
  EXPECT_EQ(vocab_text(c), "vocab=50257 (padded to 50304 = a multiple of 128 x TP 1, Megatron-LM's "
                           "make_vocab_size_divisible_by)");
  c.tensor_parallel = 4;
  EXPECT_EQ(padded_vocab(c), 50688);  // a multiple of 512
  EXPECT_EQ(vocab_per_rank(c), 12672);
  EXPECT_TRUE(check_tensor_parallel(c).empty());
  c.layout = LayoutFramework::PyTorch;
  EXPECT_EQ(padded_vocab(c), 50257);
  EXPECT_EQ(vocab_per_rank(c), 12565);  // ceil(50257 / 4), as torch.chunk splits
  EXPECT_EQ(vocab_text(c), "vocab=50257");
  const std::vector<std::string> notes = check_tensor_parallel(c);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("vocab 50257 not padded"), std::string::npos) << notes[0];
  c.vocab_divisible_by = 8;
  EXPECT_EQ(padded_vocab(c), 50272);  // given explicitly: a multiple of 8 x 4
  EXPECT_EQ(vocab_text(c), "vocab=50257 (padded to 50272 = a multiple of 8 x TP 4, --make-vocab-size-divisible-by)");
  const Plan p = build_model_plan(c);
  for (const Gemm& g : p.gemms)
    if (g.op == Op::LmHead && g.pass == Pass::Fprop) EXPECT_EQ(g.n, 50272 / 4);
}

#ifdef GS_BINARY
// End to end: the step context names the framework whose rules apply.
TEST(LayoutRules, CommandLineFollowsTheStepContext) {
  const auto dir = gs::test::scratch_dir("layout_rules");
  const std::string cfg = (dir / "starcoder2.json").string();
  {
    std::ofstream f(cfg);
    f << R"({"model_type":"starcoder2","hidden_size":6144,"intermediate_size":24576,"num_attention_heads":48,
            "num_key_value_heads":4,"num_hidden_layers":40,"vocab_size":49152,"hidden_act":"gelu_pytorch_tanh"})";
  }
  gs::test::Out r = gs::test::run_gemmscope("--dry-run --config " + cfg + " --tensor-parallel 8", dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("num_query_groups must be divisible by tensor_model_parallel_size"), std::string::npos) << r.err;
  r = gs::test::run_gemmscope("--dry-run --config " + cfg + " --tensor-parallel 8 --step-context eager", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("replicated 2 times"), std::string::npos) << r.out;
  r = gs::test::run_gemmscope("--dry-run --config " + cfg + " --tensor-parallel 4", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
}
#endif

// The dry run's header and table say what the plan is: MLA's real head sizes, where each batch
// number came from, each row's scope, and N/A cells predicted with the engine's rule (per padded
// expert for grouped GEMMs).
#include <gtest/gtest.h>

#include <string>

#include "core/plan/attention_matmuls.hpp"
#include "core/recipes/grouped.hpp"
#include "core/model/model_config.hpp"
#include "core/report/report.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

test::Out dry(const std::string& args) {
  static const auto dir = test::scratch_dir("plan_headers");
  return test::run_gemmscope(args + " --dry-run", dir);
}

}  // namespace

TEST(PlanHeaders, MlaShowsItsRealHeadSizes) {
  // DeepSeek-V3: 128 heads, qk head 128 nope + 64 rope = 192, v head 128 (hidden / heads = 56 is no
  // head size of this model).
  const ModelConfig c = find_preset("deepseek-v3").config;
  EXPECT_EQ(heads_text(c, true), "heads=128 (MLA: qk head 192 = 128 nope + 64 rope, v head 128)");
  const test::Out o = dry("--model deepseek-v3");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("heads=128 (MLA: qk head 192 = 128 nope + 64 rope, v head 128)"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("head_dim=56"), std::string::npos);
  // Not MLA: as before.
  EXPECT_EQ(heads_text(find_preset("llama-3-8b").config, true), "heads=32, kv_heads=8, head_dim=128");
  EXPECT_EQ(heads_text(find_preset("codonfm-5b").config, false), "heads=32");
}

TEST(PlanHeaders, BatchOriginsAreRight) {
  // A config.json has no batch: 1 x 4096 are gemmscope's own defaults.
  const ModelConfig c = parse_hf_config(
      R"({"model_type":"llama","hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,)"
      R"("num_hidden_layers":2,"max_position_embeddings":131072})",
      "c.json");
  EXPECT_EQ(c.micro_batch_from, "gemmscope default");
  EXPECT_EQ(c.sequence_from, "gemmscope default");
  // A shorter maximum comes from the file.
  const ModelConfig s = parse_hf_config(
      R"({"model_type":"llama","hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,)"
      R"("num_hidden_layers":2,"max_position_embeddings":1024})",
      "c.json");
  EXPECT_EQ(s.sequence_from, "config.json max_position_embeddings");
  EXPECT_EQ(s.micro_batch_from, "gemmscope default");
  const test::Out o = dry("--model llama-3-8b");
  EXPECT_NE(o.out.find("(micro-batch and sequence: preset llama-3-8b)"), std::string::npos) << o.out;
}

TEST(PlanHeaders, DryRunTableShowsEachRowsScope) {
  const test::Out o = dry("--model deepseek-v3");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("Runs in"), std::string::npos) << o.out;
  auto row_ends = [&](const std::string& start, const std::string& end) {
    const size_t at = o.out.find(start);
    if (at == std::string::npos) return false;
    const std::string line = o.out.substr(at, o.out.find('\n', at) - at);
    return line.size() >= end.size() && line.compare(line.size() - end.size(), end.size(), end) == 0;
  };
  EXPECT_TRUE(row_ends("Fprop  MLP Up", "dense layers")) << o.out;
  EXPECT_TRUE(row_ends("Fprop  Expert Up", "MoE layers")) << o.out;
  EXPECT_TRUE(row_ends("Fprop  Q Down", "every layer")) << o.out;
  EXPECT_TRUE(row_ends("Fprop  LM Head", "once per step")) << o.out;
}

TEST(PlanHeaders, GroupedNaIsPredictedPerPaddedExpert) {
  // An expert GEMM whose summed rows (32981) are no multiple of 16 still runs in FP8: each expert's
  // rows are padded to 16. A dense GEMM of the same shape cannot.
  Gemm g{Pass::Fprop, Op::ExpertUp, Scope::MoeLayer, 32981, 7168, 4096, {Role::Activation, true}, {Role::Weight, true}};
  g.group_dim = GroupDim::M;
  g.group = {10000, 12981, 10000};
  EXPECT_EQ(cell_shape_problem(g, Precision::FP8Current, RecipeOptions{}), "");
  Gemm dense = g;
  dense.group_dim = GroupDim::None;
  dense.group.clear();
  EXPECT_NE(cell_shape_problem(dense, Precision::FP8Current, RecipeOptions{}), "");
  // A per-expert N that FP8 cannot run stays N/A grouped too.
  Gemm odd = g;
  odd.n = 4100;
  EXPECT_NE(cell_shape_problem(odd, Precision::FP8Current, RecipeOptions{}), "");
  // The layout rule comes first.
  Gemm bad = g;
  bad.a.k_major = false;
  EXPECT_EQ(cell_shape_problem(bad, Precision::BF16, RecipeOptions{}),
            "grouped along M needs a token-major left operand [rows, k]");
  // The dry run of the shipped EP case predicts no N/A for the expert GEMMs.
  const test::Out o = dry("--model deepseek-v3 --expert-parallel 8");
  ASSERT_EQ(o.rc, 0) << o.err;
  for (size_t at = o.out.find("Predicted N/A: "); at != std::string::npos; at = o.out.find("Predicted N/A: ", at + 1)) {
    const std::string line = o.out.substr(at, o.out.find('\n', at) - at);
    EXPECT_EQ(line.find("Expert"), std::string::npos) << line;
  }
}

TEST(PlanHeaders, AttentionsOwnGemmsAreStatedNotPlanned) {
  // Qwen3-30B-A3B at 1 x 4096: 32 heads of 128. Forward 2 x 4096^2 x 32 x (128 + 128) = 274.9G,
  // backward twice that, the causal mask halves it: 412.3G per layer.
  const ModelConfig q = find_preset("qwen3-30b-a3b").config;
  EXPECT_DOUBLE_EQ(attention_matmuls(q).flops_per_layer(true), 0.5 * 3 * 2.0 * 4096.0 * 4096 * 32 * 256);
  EXPECT_DOUBLE_EQ(attention_matmuls(q).flops_per_layer(false), 2 * attention_matmuls(q).flops_per_layer(true));
  // MLA: the real head sizes, qk 128 + 64, v 128 (DeepSeek-V3, 128 heads), and tensor parallel 8
  // splits the heads.
  ModelConfig d = find_preset("deepseek-v3").config;
  d.tensor_parallel = 8;
  EXPECT_DOUBLE_EQ(attention_matmuls(d).flops_per_layer(true), 0.5 * 3 * 2.0 * 4096.0 * 4096 * 16 * (192 + 128));
  const test::Out o = dry("--model qwen3-30b-a3b");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("the linear layers only (attention's QK^T and PV not included: below)"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("Per layer 0.41T with the causal mask"), std::string::npos) << o.out;
  // The measured report calls the projections projections.
  const RunResult r = from_json(read_json_file(std::string(GS_TEST_DATA_DIR) + "/moe_mixtral_a.json"), "m.json");
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Attention projections:"), std::string::npos) << text;
}

// config.json attention layouts read as transformers reads them (gpt_bigcode's multi_query, Falcon's
// num_kv_heads / new_decoder_architecture / multi_query, parallel residual layouts), refusals that
// say what a field means, and flags that fill required fields a file lacks. Shapes are computed by
// hand from the public config.json files in tests/data/configs.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

const std::string kConfigs = std::string(GS_TEST_DATA_DIR) + "/configs/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The Fprop GEMM of `op` in a plan.
const Gemm& fprop(const Plan& p, Op op) {
  for (const Gemm& g : p.gemms)
    if (g.pass == Pass::Fprop && g.op == op) return g;
  throw std::runtime_error("no such GEMM");
}

bool has_note(const ModelConfig& c, const std::string& needle) {
  for (const std::string& n : c.notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(AttentionLayout, StarCoderIsMultiQuery) {
  // bigcode/starcoder: gpt_bigcode, n_embd 6144, n_head 48 (head_dim 128), multi_query true,
  // n_inner 24576, n_layer 40, n_positions 8192, vocab 49152.
  const ModelConfig c = load_hf_config(kConfigs + "starcoder.json");
  EXPECT_EQ(c.kv_heads(), 1);
  EXPECT_EQ(c.head_dimension(), 128);
  EXPECT_FALSE(c.gated_mlp);  // gelu_pytorch_tanh, plain MLP
  const Plan p = build_model_plan(c);
  EXPECT_EQ(c.tokens(), 4096);  // 1 x 4096 (n_positions 8192 is longer)
  // QKV N = 6144 (48 query heads x 128) + 2 x 128 (one key and one value head) = 6400.
  EXPECT_EQ(fprop(p, Op::Qkv).shape(), "4096x6144x6400");
  EXPECT_EQ(fprop(p, Op::AttnOut).shape(), "4096x6144x6144");
  EXPECT_EQ(fprop(p, Op::MlpUp).shape(), "4096x6144x24576");
  EXPECT_EQ(fprop(p, Op::MlpDown).shape(), "4096x24576x6144");
  EXPECT_EQ(fprop(p, Op::LmHead).shape(), "4096x6144x49152");
  // Step FLOPs by hand: 40 layers x 3 passes x 2 x 4096 x 6144 x (6400 + 6144 + 24576 + 24576)
  // + 3 x 2 x 4096 x 6144 x 49152 = 372.63T + 7.42T = 380.05T.
  const double layer = 3 * 2.0 * 4096 * 6144 * (6400 + 6144 + 24576 + 24576);
  const double lm = 3 * 2.0 * 4096 * 6144 * 49152;
  EXPECT_DOUBLE_EQ(plan_flops(p).full_model(40), 40 * layer + lm);
  EXPECT_NEAR(plan_flops(p).full_model(40) / 1e12, 380.05, 0.01);
}

TEST(AttentionLayout, GptBigCodeMultiQueryDefaultAndFalse) {
  const std::string base = R"("model_type":"gpt_bigcode","n_embd":1024,"n_head":16,"n_layer":2,"vocab_size":100)";
  // No multi_query: GPTBigCodeConfig's default (true), noted.
  const ModelConfig d = parse_hf_config("{" + base + "}", "c.json");
  EXPECT_EQ(d.kv_heads(), 1);
  EXPECT_TRUE(has_note(d, "GPTBigCodeConfig's default true"));
  EXPECT_EQ(d.intermediate_size, 4096);  // n_inner absent: 4 x n_embd
  // multi_query false: every head has its key and value: QKV N = 3 x hidden.
  const ModelConfig m = parse_hf_config("{" + base + R"(,"multi_query":false})", "c.json");
  EXPECT_EQ(m.kv_heads(), 16);
  EXPECT_EQ(fprop(build_model_plan(m), Op::Qkv).n, 3 * 1024);
  EXPECT_NE(error_of([&] { parse_hf_config("{" + base + R"(,"multi_query":"yes"})", "c.json"); })
                .find("'multi_query' must be true or false"),
            std::string::npos);
  // A num_key_value_heads that contradicts multi_query is refused.
  EXPECT_NE(error_of([&] { parse_hf_config("{" + base + R"(,"multi_query":true,"num_key_value_heads":4})", "c.json"); })
                .find("disagree"),
            std::string::npos);
}

TEST(AttentionLayout, Falcon7BIsMultiQueryWithParallelAttention) {
  // tiiuae/falcon-7b: hidden 4544, 71 heads (head_dim 64), multi_query true, new_decoder_architecture
  // false, parallel_attn true, no ffn_hidden_size (FalconConfig: 4 x hidden = 18176), no
  // max_position_embeddings (FalconConfig: 2048), vocab 65024.
  const ModelConfig c = load_hf_config(kConfigs + "falcon_7b.json");
  EXPECT_EQ(c.kv_heads(), 1);
  EXPECT_EQ(c.head_dimension(), 64);
  EXPECT_EQ(c.intermediate_size, 18176);
  EXPECT_TRUE(has_note(c, "ffn_hidden_size"));
  EXPECT_FALSE(c.gated_mlp);
  EXPECT_EQ(c.tokens(), 2048);
  const Plan p = build_model_plan(c);
  // QKV N = (71 + 2 x 1) x 64 = 4672 = hidden + 2 x head_dim.
  EXPECT_EQ(fprop(p, Op::Qkv).shape(), "2048x4544x4672");
  EXPECT_EQ(fprop(p, Op::AttnOut).shape(), "2048x4544x4544");
  EXPECT_EQ(fprop(p, Op::MlpUp).shape(), "2048x4544x18176");
  EXPECT_EQ(fprop(p, Op::MlpDown).shape(), "2048x18176x4544");
  EXPECT_EQ(fprop(p, Op::LmHead).shape(), "2048x4544x65024");
}

TEST(AttentionLayout, Falcon40BReadsNumKvHeads) {
  // tiiuae/falcon-40b: hidden 8192, 128 heads (head_dim 64), new_decoder_architecture true,
  // num_kv_heads 8, 60 layers.
  const ModelConfig c = load_hf_config(kConfigs + "falcon_40b.json");
  EXPECT_EQ(c.kv_heads(), 8);
  const Plan p = build_model_plan(c);
  // QKV N = (128 + 2 x 8) x 64 = 9216.
  EXPECT_EQ(fprop(p, Op::Qkv).shape(), "2048x8192x9216");
  EXPECT_EQ(fprop(p, Op::AttnOut).shape(), "2048x8192x8192");
  EXPECT_EQ(fprop(p, Op::MlpUp).shape(), "2048x8192x32768");
  // Under tensor parallelism 4: 32 query and 2 key/value heads per rank: (32 + 4) x 64 = 2304.
  ModelConfig tp = c;
  tp.tensor_parallel = 4;
  EXPECT_EQ(fprop(build_model_plan(tp), Op::Qkv).n, 2304);
}

TEST(AttentionLayout, FalconVariants) {
  const std::string base = R"("model_type":"falcon","hidden_size":1024,"num_attention_heads":16,"num_hidden_layers":2)";
  auto parse = [&](const std::string& extra) { return parse_hf_config("{" + base + extra + "}", "f.json"); };
  // RefinedWeb-style names: n_head_kv with the new architecture.
  EXPECT_EQ(parse(R"(,"new_decoder_architecture":true,"n_head_kv":4)").kv_heads(), 4);
  // New architecture without num_kv_heads: FalconConfig sets it to the head count (noted).
  const ModelConfig mha = parse(R"(,"new_decoder_architecture":true)");
  EXPECT_EQ(mha.kv_heads(), 16);
  EXPECT_TRUE(has_note(mha, "FalconConfig's default"));
  // Neither: multi_query's class default (true) = one key/value head, noted.
  const ModelConfig mq = parse("");
  EXPECT_EQ(mq.kv_heads(), 1);
  EXPECT_TRUE(has_note(mq, "'multi_query': FalconConfig's default true"));
  // multi_query false (Falcon-RW): multi-head.
  EXPECT_EQ(parse(R"(,"multi_query":false)").kv_heads(), 16);
  // num_kv_heads without the new architecture is ignored by FalconAttention: a file that says a
  // different number is refused, not planned either way silently.
  EXPECT_NE(error_of([&] { parse(R"(,"new_decoder_architecture":false,"num_kv_heads":8)"); }).find("ignores it"),
            std::string::npos);
  EXPECT_EQ(parse(R"(,"num_kv_heads":1)").kv_heads(), 1);  // says what multi_query says
  EXPECT_EQ(parse(R"(,"ffn_hidden_size":3000)").intermediate_size, 3000);
}

TEST(AttentionLayout, OtherFamiliesKvSpellingsAreRefusedWithTheirMeaning) {
  const std::string base = R"("model_type":"mystery","hidden_size":1024,"intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":2)";
  auto err = [&](const std::string& extra) { return error_of([&] { parse_hf_config("{" + base + extra + "}", "m.json"); }); };
  std::string e = err(R"(,"multi_query":true)");
  EXPECT_NE(e.find("'multi_query' = true means one key/value head shared by all query heads"), std::string::npos) << e;
  EXPECT_NE(e.find("refusing rather than planning 16 key/value heads"), std::string::npos) << e;
  EXPECT_NE(err(R"(,"num_kv_heads":4)").find("'num_kv_heads' = 4 means the number of key/value heads"), std::string::npos);
  EXPECT_NE(err(R"(,"multi_query_group_num":2)").find("ChatGLM"), std::string::npos);
  EXPECT_NE(err(R"(,"n_head_kv":2)").find("'n_head_kv'"), std::string::npos);
  // The same number as num_key_value_heads, or false: nothing to refuse.
  EXPECT_EQ(err(R"(,"num_key_value_heads":4,"num_kv_heads":4)"), "(accepted)");
  EXPECT_EQ(err(R"(,"multi_query":false)"), "(accepted)");
}

TEST(AttentionLayout, ParallelResidualIsAccepted) {
  // Attention and MLP read the same input: the GEMMs are those of the sequential layout.
  const std::string base = R"("model_type":"llama","hidden_size":1024,"intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":2)";
  const ModelConfig a = parse_hf_config("{" + base + R"(,"parallel_attn":true})", "p.json");
  const ModelConfig b = parse_hf_config("{" + base + R"(,"use_parallel_residual":true})", "p.json");
  const ModelConfig s = parse_hf_config("{" + base + "}", "p.json");
  EXPECT_EQ(plan_flops(build_model_plan(a)).per_layer(), plan_flops(build_model_plan(s)).per_layer());
  EXPECT_EQ(plan_flops(build_model_plan(b)).per_layer(), plan_flops(build_model_plan(s)).per_layer());
  // Falcon's new architecture has num_ln_in_parallel_attn (layer norms only): accepted too.
  EXPECT_NO_THROW(parse_hf_config(
      R"({"model_type":"falcon","hidden_size":1024,"num_attention_heads":16,"num_hidden_layers":2,)"
      R"("new_decoder_architecture":true,"num_kv_heads":4,"num_ln_in_parallel_attn":2})",
      "f.json"));
}

TEST(AttentionLayout, UnmodelledFieldsAreRefusedWithTheirMeaning) {
  const std::string base = R"("hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,"num_hidden_layers":4)";
  auto err = [&](const std::string& extra) { return error_of([&] { parse_hf_config("{" + base + "," + extra + "}", "c.json"); }); };
  EXPECT_NE(err(R"("mamba_d_state":16)").find("means Mamba (state-space) layers in place of attention"), std::string::npos);
  EXPECT_NE(err(R"("attn_layer_period":8)").find("attention only in some layers (Jamba)"), std::string::npos);
  EXPECT_NE(err(R"("intermediate_size_mlp":16384)").find("FFN sizes that differ between layers"), std::string::npos);
  EXPECT_NE(err(R"("add_cross_attention":true)").find("cross-attention block"), std::string::npos);
  EXPECT_EQ(err(R"("add_cross_attention":false)"), "(accepted)");
  // A nested value is quoted short.
  const std::string e = err(R"("ffn_config":{"moe_num_experts":16,"moe_top_k":4,"ffn_hidden_size":10752,"moe_jitter_eps":0.01})");
  EXPECT_NE(e.find("'ffn_config' = {"), std::string::npos) << e;
  EXPECT_NE(e.find("... means a nested FFN description (DBRX's experts)"), std::string::npos) << e;
}

TEST(AttentionLayout, FlagsFillMissingRequiredFields) {
  // A family without class defaults that leaves out intermediate_size: a flag fills it.
  const std::string text =
      R"({"model_type":"mystery","hidden_size":1024,"num_attention_heads":16,"num_hidden_layers":2})";
  ModelConfig c = parse_hf_config(text, "m.json");
  ASSERT_EQ(c.missing_fields, std::vector<std::string>{"intermediate_size"});
  EXPECT_NE(error_of([&] { build_model_plan(c); })
                .find("m.json: missing required field 'intermediate_size' (pass --intermediate_size to give it)"),
            std::string::npos);
  ModelOverrides o;
  o.intermediate_size = 2816;
  apply_overrides(c, o);
  EXPECT_TRUE(c.missing_fields.empty());
  EXPECT_EQ(fprop(build_model_plan(c), Op::MlpUp).n, 2816);
  // Missing hidden size and layers: the name shows them unknown until a flag gives them.
  const ModelConfig h = parse_hf_config(R"({"model_type":"mystery","intermediate_size":64,"num_attention_heads":2})", "m.json");
  EXPECT_NE(h.name.find("hidden ?, ? layers"), std::string::npos) << h.name;
  EXPECT_EQ(h.missing_fields.front(), "hidden_size");
  ModelConfig filled = h;
  ModelOverrides hl;
  hl.hidden_size = 256;
  hl.num_hidden_layers = 3;
  apply_overrides(filled, hl);
  EXPECT_TRUE(filled.missing_fields.empty());
  EXPECT_NE(filled.name.find("[mystery, hidden 256, 3 layers]"), std::string::npos) << filled.name;
  EXPECT_NO_THROW(build_model_plan(filled));
}

TEST(AttentionLayout, CommandLine) {
  const auto dir = test::scratch_dir("attention_layout");
  const std::string f = (dir / "mystery.json").string();
  std::ofstream(f) << R"({"model_type":"mystery","hidden_size":1024,"num_attention_heads":16,"num_hidden_layers":2})";
  test::Out o = test::run_gemmscope("--config " + f + " --dry-run", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("missing required field 'intermediate_size' (pass --intermediate_size"), std::string::npos) << o.err;
  o = test::run_gemmscope("--config " + f + " --intermediate_size 2816 --dry-run", dir);
  EXPECT_EQ(o.rc, 0) << o.err;
  o = test::run_gemmscope("--config " + kConfigs + "starcoder.json --dry-run", dir);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("4096x6144x6400"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("kv_heads=1"), std::string::npos);
  o = test::run_gemmscope("--config " + kConfigs + "falcon_40b.json --dry-run", dir);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("2048x8192x9216"), std::string::npos) << o.out;
  std::filesystem::remove_all(dir);
}

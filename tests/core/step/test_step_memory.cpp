// Memory per GPU (core/step/step_memory.hpp) against the frameworks' published accounting.
#include "core/step/step_memory.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/model/model_config.hpp"
#include "core/step/step_params.hpp"
#include "test_util.hpp"

namespace gs {
namespace {

StepPlan step(const Plan& p, StepContextKind k = StepContextKind::TransformerEngine, StepOptions o = {},
              Precision prec = Precision::BF16) {
  return build_step_plan(p, k, o, prec, Mode::Training, RecipeOptions{});
}

// Megatron-LM's docs/distrib_optimizer.md: 18 bytes per parameter without the distributed optimizer
// (BF16 param 2, FP32 grad 4, FP32 main param 4, Adam m 4, v 4), 6 + 12/d with it over d ranks.
TEST(StepMemory, MegatronBytesPerParameter) {
  EXPECT_DOUBLE_EQ(state_bytes_per_param(ParamStorage::Bf16MainFp32).total(), 18);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(ParamStorage::Bf16).total(), 8);   // PyTorch, BF16 params and states
  EXPECT_DOUBLE_EQ(state_bytes_per_param(ParamStorage::Fp32).total(), 16);  // PyTorch, FP32 params (autocast)
  const Plan plan = build_model_plan(find_preset("llama-3-8b").config);
  const StepPlan sp = step(plan);
  MemoryInputs in = memory_inputs(plan, sp, RecipeOptions{});
  const double P = 8030261248.0;
  MemoryBreakdown m = memory_per_gpu(in, std::nullopt);
  EXPECT_DOUBLE_EQ(m.weights + m.grads + m.main_params + m.optimizer_states, 18 * P);
  in.layout.optimizer_shards = 8;
  m = memory_per_gpu(in, std::nullopt);
  EXPECT_DOUBLE_EQ(m.weights + m.grads + m.main_params + m.optimizer_states, (6 + 12.0 / 8) * P);
  EXPECT_FALSE(m.device_bytes);
  EXPECT_FALSE(m.fits());
}

// A GPT layer as Korthikanti et al. 2022 count it (MHA, plain 4h MLP, 16-bit activations):
// 34 sbh + 5 a s^2 b bytes per layer. Without dropout (two masks of sbh each) and with flash
// attention (no s^2 scores, its softmax statistics instead: 4 bytes per head and token), plus the two
// norms' statistics (4 bytes each per token): 32 h + 4 a + 8 per token.
TEST(StepMemory, KorthikantiLayerAdapted) {
  ModelConfig c = default_config();  // hidden 4096, MHA 32, plain GELU MLP 16384 = 4h
  c.num_hidden_layers = 4;
  const Plan plan = build_model_plan(c);
  const MemoryInputs in = memory_inputs(plan, step(plan), RecipeOptions{});
  const double h = 4096, a = 32;
  EXPECT_DOUBLE_EQ(in.dense.total(), 32 * h + 4 * a + 8);
  // Full recompute keeps each layer's input (2 s b h) and one layer's activations at a time.
  StepOptions o;
  o.recompute = Recompute::Full;
  const MemoryInputs full = memory_inputs(plan, step(plan, StepContextKind::TransformerEngine, o), RecipeOptions{});
  const double T = static_cast<double>(c.tokens());
  EXPECT_DOUBLE_EQ(memory_per_gpu(full, std::nullopt).activations, (4 * 2 * h + in.dense.total()) * T);
  EXPECT_DOUBLE_EQ(memory_per_gpu(in, std::nullopt).activations, (4 * in.dense.total() + in.dense.total()) * T);
  // Selective: flash attention's statistics of every layer not kept.
  o.recompute = Recompute::Selective;
  const MemoryInputs sel = memory_inputs(plan, step(plan, StepContextKind::TransformerEngine, o), RecipeOptions{});
  EXPECT_DOUBLE_EQ(memory_per_gpu(in, std::nullopt).activations - memory_per_gpu(sel, std::nullopt).activations,
                   4 * 4 * a * T);
}

// GQA narrows K and V; SwiGLU keeps both up outputs; FP8 recipes keep the linear inputs in one byte
// and Transformer Engine's two FP8 copies of every FP8 weight (the BF16 LM head excluded).
TEST(StepMemory, GqaSwigluFp8) {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 2;
  c.micro_batch_size = 1;
  const Plan plan = build_model_plan(c);
  const MemoryInputs bf16 = memory_inputs(plan, step(plan), RecipeOptions{});
  const double h = 4096, q = 4096, kv = 1024, f = 14336, heads = 32;
  EXPECT_DOUBLE_EQ(bf16.dense.attention, 2 * h + 4 + 2 * h + 2 * (q + 2 * kv) + 2 * q + 4 * heads);
  EXPECT_DOUBLE_EQ(bf16.dense.mlp, 2 * h + 4 + 2 * h + 2 * 2 * f + 2 * f);
  // The token ids the embedding's backward scatters by: 8 bytes a token, with the layers' activations.
  EXPECT_DOUBLE_EQ(bf16.ids_per_token, 8);
  const double T = static_cast<double>(c.tokens());
  EXPECT_DOUBLE_EQ(memory_per_gpu(bf16, std::nullopt).activations,
                   (2 * bf16.dense.total() + 8 + bf16.dense.total() + bf16.head_per_token) * T);
  const MemoryInputs fp8 = memory_inputs(plan, step(plan, StepContextKind::TransformerEngine, {}, Precision::FP8Current),
                                         RecipeOptions{});
  EXPECT_DOUBLE_EQ(fp8.dense.mlp, 2 * h + 4 + h + 2 * 2 * f + f);
  EXPECT_DOUBLE_EQ(fp8.fp8_copy_params, 2 * 218103808.0);
  EXPECT_DOUBLE_EQ(memory_per_gpu(fp8, std::nullopt).fp8_copies, 2 * 2 * 218103808.0);
  // Eager PyTorch's attention saves the repeated K and V.
  const MemoryInputs eager = memory_inputs(plan, step(plan, StepContextKind::Eager), RecipeOptions{});
  EXPECT_GT(eager.dense.attention, bf16.dense.attention + 2 * 2 * (q - kv));
}

TEST(StepMemory, FitsAgainstTheDevice) {
  const Plan plan = build_model_plan(find_preset("llama-3-8b").config);
  const MemoryInputs in = memory_inputs(plan, step(plan), RecipeOptions{});
  const MemoryBreakdown small = memory_per_gpu(in, 80e9);
  EXPECT_FALSE(small.fits());  // 18 bytes x 8.03e9 alone is 144.5 GB
  EXPECT_LT(*small.margin(), 0);
  const MemoryBreakdown big = memory_per_gpu(in, 1e12);
  EXPECT_TRUE(big.fits());
  EXPECT_DOUBLE_EQ(*big.margin(), 1e12 - big.total());
  // The unfused loss keeps the FP32 upcast: more than the fused one's BF16 logits.
  StepOptions o;
  o.loss = LossImpl::Unfused;
  const MemoryInputs unfused = memory_inputs(plan, step(plan, StepContextKind::TransformerEngine, o), RecipeOptions{});
  EXPECT_DOUBLE_EQ(unfused.head_per_token - in.head_per_token, 4 * 128256.0);
}

// A config.json that leaves MoE and MLA fields out plans the transformers class's defaults in the
// whole step too: its parameters, FP8 weight copies and activations are those of the same file with
// the defaults written in (core/model/moe_families.hpp), not those of intermediate_size or no
// shared expert.
TEST(StepMemory, ConfigFieldsLeftOutAsTransformersReadsThem) {
  const std::string dir = std::string(GS_TEST_DATA_DIR) + "/configs/";
  struct Case {
    const char* file;
    const char* key;
    int64_t class_default;
  };
  for (const Case& t : {Case{"deepseek_v2_lite.json", "moe_intermediate_size", 1407},
                        Case{"deepseek_v2_lite.json", "n_shared_experts", 2},
                        Case{"deepseek_v2_lite.json", "q_lora_rank", 1536},
                        Case{"deepseek_v3.json", "kv_lora_rank", 512},
                        Case{"qwen2_moe_a2.7b.json", "shared_expert_intermediate_size", 5632},
                        Case{"llama4_maverick.json", "intermediate_size_mlp", 16384}}) {
    nlohmann::json j = nlohmann::json::parse(test::slurp(dir + t.file));
    nlohmann::json& fields = j.contains("text_config") ? j["text_config"] : j;
    ASSERT_TRUE(fields.contains(t.key)) << t.file << " " << t.key;
    fields[t.key] = t.class_default;
    const ModelConfig written = parse_hf_config(j.dump(), t.file);
    fields.erase(t.key);
    const ModelConfig left_out = parse_hf_config(j.dump(), t.file);
    const Plan a = build_model_plan(left_out), b = build_model_plan(written);
    const std::string what = std::string(t.file) + " without " + t.key;
    EXPECT_DOUBLE_EQ(count_params(a).total(), count_params(b).total()) << what;
    for (Precision p : {Precision::BF16, Precision::FP8Current}) {
      const MemoryInputs ma = memory_inputs(a, step(a, StepContextKind::TransformerEngine, {}, p), RecipeOptions{});
      const MemoryInputs mb = memory_inputs(b, step(b, StepContextKind::TransformerEngine, {}, p), RecipeOptions{});
      EXPECT_DOUBLE_EQ(ma.fp8_copy_params, mb.fp8_copy_params) << what;
      EXPECT_DOUBLE_EQ(ma.moe.total(), mb.moe.total()) << what;
      EXPECT_DOUBLE_EQ(ma.dense.total(), mb.dense.total()) << what;
      EXPECT_EQ(ma.moe_layers, mb.moe_layers) << what;
    }
  }
  // The case: DeepSeek-V2 experts of 1407, not intermediate_size (10944): far fewer
  // parameters than experts as wide as the dense MLP.
  nlohmann::json j = nlohmann::json::parse(test::slurp(dir + "deepseek_v2_lite.json"));
  j.erase("moe_intermediate_size");
  const ModelConfig c = parse_hf_config(j.dump(), "deepseek_v2_lite.json");
  ModelConfig wide = c;
  wide.moe.expert_intermediate_size = c.intermediate_size;
  EXPECT_LT(count_params(build_model_plan(c)).total() * 4, count_params(build_model_plan(wide)).total());
}

}  // namespace
}  // namespace gs

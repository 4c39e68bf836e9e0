// Memory per rank (core/parallel/memory.hpp) against Megatron-LM's formulas
// (theoretical_memory_usage.py) and hand counts.
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/memory.hpp"

using namespace gs;

namespace {

// GPT-3 175B as Megatron's paper counts it: MHA, a 4h GELU MLP, dropout.
ModelConfig gpt3_175b() {
  ModelConfig c;
  c.name = "gpt3-175b";
  c.hidden_size = 12288;
  c.intermediate_size = 4 * 12288;
  c.num_attention_heads = 96;
  c.num_hidden_layers = 96;
  c.micro_batch_size = 1;
  c.sequence_length = 2048;
  c.vocab_size = 51200;
  return c;
}

ParallelLayout L(const std::string& s) {
  ParallelLayout l;
  parse_layout(s, l);
  return l;
}

}  // namespace

TEST(Memory, GptLayerMatchesMegatronsActivationFormula) {
  const ModelConfig c = gpt3_175b();
  for (const char* layout : {"tp1", "tp4", "tp8"}) {
    const ParallelLayout l = L(layout);
    // 34 s b h / t with sequence parallelism and selective recompute (Korthikanti et al., Table 2).
    EXPECT_NEAR(layer_activation_bytes(c, l, false, /*dropout=*/true),
                megatron_layer_activation_bytes(c.sequence_length, 1, c.hidden_size, c.intermediate_size, l.tp), 1e-3)
        << layout;
  }
  EXPECT_DOUBLE_EQ(megatron_layer_activation_bytes(2048, 1, 12288, 4 * 12288, 8), 2048.0 * 12288 * 34 / 8);
  // Full recompute keeps the layer's input only: 2 s b h / t.
  ParallelLayout full = L("tp8");
  full.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, full, false), 2.0 * 2048 * 12288 / 8);
}

TEST(Memory, ParameterCountsByHand) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  const ModelParams p = model_params(c);
  EXPECT_DOUBLE_EQ(p.attention, 8192.0 * (8192 + 2 * 1024) + 8192.0 * 8192);
  EXPECT_DOUBLE_EQ(p.dense_mlp, 3.0 * 8192 * 28672);
  EXPECT_NEAR(p.total(c) / 1e9, 70.55, 0.05);  // Llama 3 70B's published 70.6 B
}

TEST(Memory, BytesPerParameterAsMegatron) {
  const ModelConfig c = find_preset("llama-3-8b").config;
  for (int dp : {1, 4, 16}) {
    ParallelLayout l = L("tp1");
    l.dp = dp;
    l.sharding = DpSharding::Zero1;
    const RankMemory m = rank_memory(c, l, 0);
    // Megatron: 6 + 12 / DP bytes per parameter with the distributed optimizer, 18 without.
    EXPECT_NEAR(m.model_state_bytes(), m.params * (6.0 + 12.0 / dp), 1.0);
    l.sharding = DpSharding::Ddp;
    EXPECT_NEAR(rank_memory(c, l, 0).model_state_bytes(), m.params * 18.0, 1.0);
  }
}

TEST(Memory, InflightMicrobatchesPerStage) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  ParallelLayout l = L("tp8.pp4.dp1.gb8");
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 0).inflight_microbatches, 4);  // 1F1B: p - s
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 3).inflight_microbatches, 1);
  l.vpp = 5;
  // Megatron's interleaving penalty on the first stage: 1 + (p - 1) / (p v), in units of a whole stage.
  EXPECT_NEAR(rank_memory(c, l, 0).inflight_microbatches / 4, 1 + 3.0 / 20, 1e-12);
  // The embedding on the first stage, the LM head on the last: the middle stages hold layers only.
  const RankMemory first = rank_memory(c, l, 0), mid = rank_memory(c, l, 1);
  EXPECT_NEAR(first.params - mid.params, 129024.0 * 8192 / 8, 1.0);  // vocabulary padded to 128 x TP
}

TEST(Memory, ShardedParametersUnderFsdp) {
  const ModelConfig c = find_preset("llama-3-8b").config;
  ParallelLayout l = L("dp8");
  l.sharding = DpSharding::FsdpFull;
  const RankMemory m = rank_memory(c, l, 0);
  EXPECT_NEAR(m.weights_bytes + m.grads_bytes + m.optimizer_bytes, m.params * 16.0 / 8, 1.0);
  EXPECT_GT(m.gathered_bytes, 0);
  l.sharding = DpSharding::FsdpGradOp;
  EXPECT_NEAR(rank_memory(c, l, 0).gathered_bytes, 2 * m.params, 1.0);
}

// The bytes per parameter are the one-GPU step's (core/step/step_memory.hpp state_bytes_per_param):
// plain PyTorch's BF16 storage keeps 2 + 2 + 4, FSDP's FP32 shards whatever the step's setting.
TEST(Memory, StorageFromTheWholeStepsRule) {
  const ModelConfig c = find_preset("llama-3-8b").config;
  RankState bf16;
  bf16.storage = ParamStorage::Bf16;
  const RankMemory m = rank_memory(c, L("tp1"), 0, bf16);
  EXPECT_NEAR(m.model_state_bytes(), 8.0 * m.params, 1.0);
  ParallelLayout fsdp = L("tp1.dp8");
  fsdp.sharding = DpSharding::FsdpGradOp;
  const RankMemory f = rank_memory(c, fsdp, 0, bf16);
  EXPECT_NEAR(f.weights_bytes + f.grads_bytes + f.optimizer_bytes, 16.0 * f.params / 8, 1.0);
  EXPECT_EQ(rank_storage(fsdp, ParamStorage::Bf16), ParamStorage::Fp32);
}

// FP8 recipes keep each linear weight's FP8 copies (Transformer Engine: rowwise and transposed,
// 2 bytes per parameter), not the embedding, the BF16 LM head or the norms.
TEST(Memory, Fp8WeightCopiesAsTheWholeStepCountsThem) {
  const ModelConfig c = find_preset("llama-3-8b").config;
  const ParallelLayout l = L("tp2");
  RankState fp8;
  fp8.fp8_inputs = true;
  fp8.fp8_copy_bytes = fp8_weight_copy_bytes(Precision::FP8Current, StepContextKind::TransformerEngine);
  EXPECT_DOUBLE_EQ(fp8.fp8_copy_bytes, 2.0);
  const RankMemory m = rank_memory(c, l, 0, fp8);
  const ModelParams p = model_params(c);
  const double linear = (p.attention + p.dense_mlp) / 2 * static_cast<double>(c.num_hidden_layers);
  EXPECT_NEAR(m.fp8_copy_bytes, 2.0 * linear, 1.0);
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 0).fp8_copy_bytes, 0.0);
  EXPECT_GT(m.model_state_bytes(), rank_memory(c, l, 0).model_state_bytes());
}

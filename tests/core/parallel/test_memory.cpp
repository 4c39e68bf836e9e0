// Memory per rank (core/parallel/memory.hpp) against Megatron-LM's formulas
// (theoretical_memory_usage.py) and hand counts.
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/layout_check.hpp"
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


// Korthikanti et al. 2022 (arXiv 2205.05198), Table 2: activation bytes of one GPT layer (16-bit
// activations, dropout, no flash attention) with tensor and sequence parallelism over t:
// s b h (34 + 5 a s / h) / t without recompute, 34 s b h / t with selective recompute (the core
// attention's s x s scores, softmax and its dropout recomputed), 2 s b h / t with full recompute.
double korthikanti_layer_bytes(double s, double b, double h, double a, double t, Recompute r) {
  switch (r) {
    case Recompute::None: return s * b * h * (34 + 5 * a * s / h) / t;
    case Recompute::Selective: return 34 * s * b * h / t;
    case Recompute::Full: return 2 * s * b * h / t;
  }
  return 0;
}

// The activations of one rank: the one accounting (core/step/step_memory.hpp) for this rank's
// config and the layout's splits, as rank_memory calls it.
MemoryInputs rank_activations(const ModelConfig& c, const ParallelLayout& l, bool dropout) {
  MemoryInputs in;
  ActivationSetup a;
  a.sequence_parallel = l.tp > 1 && l.sequence_parallel ? l.tp : 1;
  a.dropout = dropout;
  set_activations(in, rank_config(c, l), a);
  return in;
}

}  // namespace

// The one accounting against Korthikanti's formulas for a GPT layer with dropout under sequence
// parallelism. Flash attention stores no s x s tensors (the 5 a s / h term) but its softmax
// statistics (4 bytes per head and token); both norms keep their statistics (4 bytes per token
// each), which the paper leaves out. Everything else is the paper's 34 s b h / t, term by term.
TEST(Memory, GptLayerMatchesKorthikantisFormulas) {
  const ModelConfig c = gpt3_175b();
  const double s = 2048, b = 1, h = 12288, a = 96;
  for (const char* layout : {"tp1", "tp4", "tp8"}) {
    const ParallelLayout l = L(layout);
    const double t = static_cast<double>(l.tp), T = s * b;
    const MemoryInputs in = rank_activations(c, l, /*dropout=*/true);
    const double norm_stats = 2 * 4 * T / t, flash_stats = 4 * a * T / t;
    EXPECT_DOUBLE_EQ(in.dense.total() * T, korthikanti_layer_bytes(s, b, h, a, t, Recompute::None) -
                                               5 * a * s * s * b / t + flash_stats + norm_stats)
        << layout;
    EXPECT_DOUBLE_EQ((in.dense.total() - in.selective_saving) * T,
                     korthikanti_layer_bytes(s, b, h, a, t, Recompute::Selective) + norm_stats)
        << layout;
    EXPECT_DOUBLE_EQ(in.layer_input * T, korthikanti_layer_bytes(s, b, h, a, t, Recompute::Full)) << layout;
  }
  // Without sequence parallelism only the per-head tensors are split: the norms' and the linear
  // inputs' s b h stay whole on every rank.
  ParallelLayout no_sp = L("tp8");
  no_sp.sequence_parallel = false;
  EXPECT_GT(rank_activations(c, no_sp, false).dense.total(), 2 * rank_activations(c, L("tp8"), false).dense.total());
}

// A rank of Llama 3 70B on tp8.pp4.dp16 (1F1B, 32 micro-batches of 1 x 8192 tokens), by hand.
// Per layer and token on a TP rank (sequence parallel over 8): 8 query heads and 1 key/value head
// of 128; attention: norm input and statistics (2 h + 4) / 8, QKV's input 2 h / 8, Q, K, V
// 2 x (1024 + 128 + 128), the output 2 x 1024, softmax statistics 4 x 8 = 8736.5; MLP: norm
// (2 h + 4) / 8, up's input 2 h / 8, SwiGLU's two up outputs 2 x 2 x 3584, down's input 2 x 3584 =
// 25600.5. The first stage holds 20 layers and the token ids (8 bytes) for 4 micro-batches plus
// one layer's working set; the last stage one micro-batch, the working set and the loss's tensors:
// the final norm's input and statistics and the LM head's input ((2 h + 4 + 2 h) / 8) and the
// fused loss's BF16 logits over its 129024 / 8 vocabulary rows.
TEST(Memory, RankActivationsByHand) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  const ParallelLayout l = L("tp8.pp4.dp16.gb512");
  const double h = 8192, T = 8192;
  const double layer = (2 * h + 4) / 8 + 2 * h / 8 + 2 * (1024 + 128 + 128) + 2 * 1024 + 4 * 8 +  //
                       (2 * h + 4) / 8 + 2 * h / 8 + 2 * 2 * 3584 + 2 * 3584;
  EXPECT_DOUBLE_EQ(layer, 8736.5 + 25600.5);
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 0).activation_bytes, ((20 * layer + 8) * 4 + layer) * T);
  const double head = (2 * h + 4 + 2 * h) / 8 + 2 * 129024.0 / 8;
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 3).activation_bytes, (20 * layer + layer + head) * T);
  // Selective recompute drops the softmax statistics of every layer kept; full keeps each layer's
  // input (2 h / 8 per token) and one layer's activations.
  ParallelLayout sel = l, full = l;
  sel.recompute = Recompute::Selective;
  full.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 0).activation_bytes - rank_memory(c, sel, 0).activation_bytes, 20 * 4 * 8 * 4 * T);
  EXPECT_DOUBLE_EQ(rank_memory(c, full, 0).activation_bytes, ((20 * 2 * h / 8 + 8) * 4 + layer) * T);
  // Context parallelism splits the tokens; the one-GPU step's accounting is the same function.
  ParallelLayout cp = l;
  cp.cp = 2, cp.dp = 8;
  EXPECT_DOUBLE_EQ(rank_memory(c, cp, 0).activation_bytes, rank_memory(c, l, 0).activation_bytes / 2);
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
  fp8.precision = Precision::FP8Current;
  EXPECT_DOUBLE_EQ(fp8_weight_copy_bytes(fp8.precision, fp8.framework), 2.0);
  const RankMemory m = rank_memory(c, l, 0, fp8);
  const ModelParams p = model_params(c);
  const double linear = (p.attention + p.dense_mlp) / 2 * static_cast<double>(c.num_hidden_layers);
  EXPECT_NEAR(m.fp8_copy_bytes, 2.0 * linear, 1.0);
  EXPECT_DOUBLE_EQ(rank_memory(c, l, 0).fp8_copy_bytes, 0.0);
  EXPECT_GT(m.model_state_bytes(), rank_memory(c, l, 0).model_state_bytes());
}

// --fp8-param-gather (Transformer Engine's FP8 parameters): under the distributed optimizer each
// FP8-linear weight is its FP8 parameter, 1 byte in place of 2, and of TE's two FP8 copies only the
// transposed one remains (the rowwise one is the parameter); the norms, embedding and LM head stay
// BF16, the FP32 main parameters, gradients and Adam states are unchanged. Counted from Llama 3
// 8B's shapes on one rank (tp1, 32 layers).
TEST(Memory, Fp8ParametersReplaceTheBf16WeightsOfTheLinears) {
  const ModelConfig c = find_preset("llama-3-8b").config;
  const double h = 4096, kv = 8 * 128, ffn = 14336;
  const double linear = 32 * (h * (h + 2 * kv) + h * h + 3 * h * ffn);
  RankState fp8;
  fp8.precision = Precision::FP8Current;
  RankState kept = fp8;
  kept.fp8_param_gather = true;
  for (const char* layout : {"dp16.zero1", "dp16.zero2"}) {
    const RankMemory off = rank_memory(c, L(layout), 0, fp8), on = rank_memory(c, L(layout), 0, kept);
    EXPECT_DOUBLE_EQ(off.weights_bytes, 2 * off.params) << layout;
    EXPECT_DOUBLE_EQ(on.weights_bytes, 2 * on.params - 1 * linear) << layout;  // 1 B per FP8 linear, 2 B the rest
    EXPECT_DOUBLE_EQ(off.fp8_copy_bytes, 2 * linear) << layout;
    EXPECT_DOUBLE_EQ(on.fp8_copy_bytes, 1 * linear) << layout;  // the transposed copy only
    EXPECT_DOUBLE_EQ(on.grads_bytes, off.grads_bytes) << layout;
    EXPECT_DOUBLE_EQ(on.optimizer_bytes, off.optimizer_bytes) << layout;
    EXPECT_DOUBLE_EQ(on.activation_bytes, off.activation_bytes) << layout;
  }
  // ZeRO-3 (Megatron FSDP): the BF16 shard of the linears is an FP8 one, the gathered units FP8.
  const RankMemory z_off = rank_memory(c, L("dp8.zero3"), 0, fp8), z_on = rank_memory(c, L("dp8.zero3"), 0, kept);
  const double layer = h * (h + 2 * kv) + h * h + 3 * h * ffn, norms = 2 * h;
  EXPECT_DOUBLE_EQ(z_on.weights_bytes, z_off.weights_bytes - 1 * linear / 8);
  EXPECT_DOUBLE_EQ(z_off.gathered_bytes, 2 * 2 * (layer + norms));
  EXPECT_DOUBLE_EQ(z_on.gathered_bytes, 2 * (1 * layer + 2 * norms));
  // PyTorch FSDP: its FP32 shards are the optimizer's parameters and stay; only the gathered units shrink.
  const RankMemory f_off = rank_memory(c, L("dp8.fsdp"), 0, fp8), f_on = rank_memory(c, L("dp8.fsdp"), 0, kept);
  EXPECT_DOUBLE_EQ(f_on.weights_bytes, f_off.weights_bytes);
  EXPECT_DOUBLE_EQ(f_on.gathered_bytes, 2 * (1 * layer + 2 * norms));
  // BF16, NVFP4 (Megatron's --fp4-param-gather) and ddp: nothing kept in FP8.
  for (Precision p : {Precision::BF16, Precision::NVFP4}) {
    RankState a, b;
    a.precision = b.precision = p;
    b.fp8_param_gather = true;
    EXPECT_DOUBLE_EQ(rank_memory(c, L("dp16.zero1"), 0, a).total_bytes(), rank_memory(c, L("dp16.zero1"), 0, b).total_bytes());
  }
  EXPECT_DOUBLE_EQ(rank_memory(c, L("dp16.ddp"), 0, fp8).total_bytes(), rank_memory(c, L("dp16.ddp"), 0, kept).total_bytes());
}

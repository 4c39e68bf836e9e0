// The whole-step plan (core/step/step_plan.hpp) and its parameter count, against hand counts.
#include "core/step/step_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

namespace gs {
namespace {

// Llama-3-8B at 1 x 8192 tokens (the model): h 4096, GQA 32/8 x 128, SwiGLU 14336, 32 layers,
// vocab 128256 (no padding at TP 1).
Plan llama(int64_t layers = 32) {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.micro_batch_size = 1;
  c.sequence_length = 8192;
  c.num_hidden_layers = layers;
  return build_model_plan(c);
}

StepPlan step(const Plan& p, StepContextKind k = StepContextKind::TransformerEngine, StepOptions o = {},
              Precision prec = Precision::BF16, Mode m = Mode::Training) {
  return build_step_plan(p, k, o, prec, m, RecipeOptions{});
}

using test::step_group;

// Per layer: QKV 4096 x 6144, attention-out 4096 x 4096, MLP up 4096 x 28672, down 14336 x 4096 =
// 218,103,808; x 32 = 6,979,321,856; LM head and embedding 4096 x 128256 = 525,336,576 each; norms
// 2 x 4096 per layer + the final 4096 = 266,240. Total 8,030,261,248 (Llama 3 8B's 8.03B).
TEST(StepParams, Llama3_8bHandCount) {
  const ParamCount p = count_params(llama());
  EXPECT_DOUBLE_EQ(p.linear, 6979321856.0 + 525336576.0);
  EXPECT_DOUBLE_EQ(p.head, 525336576.0);
  EXPECT_DOUBLE_EQ(p.embedding, 525336576.0);
  EXPECT_DOUBLE_EQ(p.norms, 266240.0);
  EXPECT_DOUBLE_EQ(p.total(), 8030261248.0);
  EXPECT_EQ(p.tensors, 4 * 32 + 1 + 1 + 2 * 32 + 1);  // linears, LM head, embedding, norms
  EXPECT_THROW(count_params(build_shapes_plan("1024")), UsageError);
}

TEST(StepPlan, EmbeddingAndLossBytesOfLlama3_8b) {
  const StepPlan sp = step(llama());
  const double T = 8192, h = 4096, V = 128256;
  EXPECT_DOUBLE_EQ(step_group(sp, "embedding fwd").bytes, T * h * 2 * 2);          // BF16 rows read and written
  EXPECT_DOUBLE_EQ(step_group(sp, "embedding bwd").bytes, V * h * 2 + T * h * 6);  // table zeroed, rows added
  // Transformer Engine / Megatron: the fused cross-entropy over 8192 x 128256 logits.
  EXPECT_TRUE(sp.setup.loss_fused);
  EXPECT_DOUBLE_EQ(step_group(sp, "loss fwd").bytes, T * V * 2);
  EXPECT_DOUBLE_EQ(step_group(sp, "loss bwd").bytes, T * V * 4);
  // Eager PyTorch: upcast, log-softmax and NLL as separate kernels.
  const StepPlan eager = step(llama(), StepContextKind::Eager);
  EXPECT_FALSE(eager.setup.loss_fused);
  EXPECT_DOUBLE_EQ(step_group(eager, "loss fwd").bytes, T * V * 14);
  // Megatron's FP32 main gradient of the table: read BF16 and FP32, write FP32.
  EXPECT_DOUBLE_EQ(step_group(sp, "embedding main-grad add").bytes, V * h * 10);
  StepOptions bf16;
  bf16.storage = ParamStorage::Bf16;  // plain PyTorch: no FP32 main gradient
  EXPECT_EQ(step(llama(), StepContextKind::Eager, bf16).find("embedding main-grad add"), nullptr);
  StepOptions o;
  o.loss = LossImpl::Unfused;
  EXPECT_FALSE(step(llama(), StepContextKind::TransformerEngine, o).setup.loss_fused);
}

TEST(StepPlan, OptimizerAsTheFrameworkKeepsParameters) {
  const double P = 8030261248.0;
  const StepPlan mega = step(llama());
  const StepGroup& adam = step_group(mega, "optimizer");
  ASSERT_TRUE(adam.kernel);
  EXPECT_EQ(adam.kernel->kind, StepKernelKind::AdamW);
  EXPECT_EQ(adam.kernel->elements, static_cast<int64_t>(P));
  EXPECT_DOUBLE_EQ(adam.bytes, P * 30);  // FP32 p, g, m, v read; p, m, v written; the BF16 copy
  EXPECT_NE(mega.find("zero-grad"), nullptr);  // Megatron zeroes its FP32 gradient buffer
  EXPECT_DOUBLE_EQ(step_group(mega, "zero-grad").bytes, P * 4);
  EXPECT_DOUBLE_EQ(step_group(mega, "grad norm").bytes, P * 4);
  EXPECT_EQ(mega.find("grad clip scale"), nullptr);  // Megatron scales only past the threshold
  // Plain PyTorch with BF16 parameters: 14 bytes a parameter, no zero-grad, the clip scale always.
  StepOptions o;
  o.storage = ParamStorage::Bf16;
  const StepPlan torch = step(llama(), StepContextKind::Eager, o);
  EXPECT_DOUBLE_EQ(step_group(torch, "optimizer").bytes, P * 14);
  EXPECT_EQ(torch.find("zero-grad"), nullptr);
  EXPECT_DOUBLE_EQ(step_group(torch, "grad clip scale").bytes, P * 2 * 2);
  // foreach: modelled, no engine kernel; multi-tensor launches of one fused AdamW over 8.03e9 values.
  o.optimizer = OptimizerImpl::Foreach;
  const StepPlan foreach_plan = step(llama(), StepContextKind::Eager, o);  // the group refers into it
  const StepGroup& fe = step_group(foreach_plan, "optimizer");
  EXPECT_FALSE(fe.kernel);
  EXPECT_EQ(fe.basis, TimeBasis::Bytes);
  EXPECT_GT(fe.bytes, P * 14);
  EXPECT_DOUBLE_EQ(adam.launches, std::ceil(P / 65536 / 320));  // 383 chunks of 320 blocks
  o.grad_clip = false;
  EXPECT_EQ(step(llama(), StepContextKind::Eager, o).find("grad norm"), nullptr);
}

TEST(StepPlan, LayersAndOrder) {
  const StepPlan sp = step(llama());
  EXPECT_DOUBLE_EQ(step_group(sp, "GEMMs fwd, dense layer").count, 32);
  EXPECT_DOUBLE_EQ(step_group(sp, "attention bwd").count, 32);
  EXPECT_DOUBLE_EQ(step_group(sp, "LM head fwd").count, 1);
  // Step order: zero-grad, embedding, the layers' forward, final norm, LM head, loss, backward, optimizer.
  std::vector<std::string> order;
  for (const StepGroup& g : sp.groups) order.push_back(g.name);
  auto at = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  EXPECT_EQ(at("zero-grad"), 0);
  EXPECT_LT(at("embedding fwd"), at("GEMMs fwd, dense layer"));
  EXPECT_LT(at("attention fwd"), at("final norm fwd"));
  EXPECT_LT(at("loss fwd"), at("loss bwd"));
  EXPECT_LT(at("LM head bwd"), at("attention bwd"));
  EXPECT_LT(at("GEMMs bwd, dense layer"), at("embedding bwd"));
  EXPECT_EQ(order.back(), "optimizer");
  // The per-layer memory-bound work split between forward and backward, all of it.
  EXPECT_DOUBLE_EQ(step_group(sp, "other fwd").share + step_group(sp, "other bwd").share, 1.0);
  // MFU's FLOPs: 6 x T x every linear parameter, and attention's 12 x s^2 x (heads x d) per layer.
  const double T = 8192;
  EXPECT_DOUBLE_EQ(sp.model_flops, 6 * T * (6979321856.0 + 525336576.0) + 12 * T * T * 4096 * 32);
  EXPECT_DOUBLE_EQ(sp.hardware_flops, sp.model_flops);
}

TEST(StepPlan, RecomputeAsMegatronDefinesIt) {
  StepOptions o;
  o.recompute = Recompute::Selective;
  const StepPlan sel = step(llama(), StepContextKind::TransformerEngine, o);
  EXPECT_NE(sel.find("recompute: attention fwd"), nullptr);
  EXPECT_EQ(sel.find("recompute: GEMMs fwd, dense layer"), nullptr);  // only the core attention
  EXPECT_DOUBLE_EQ(sel.hardware_flops - sel.model_flops, 4.0 * 8192 * 8192 * 4096 * 32);
  o.recompute = Recompute::Full;
  const StepPlan full = step(llama(), StepContextKind::TransformerEngine, o);
  const StepGroup& g = step_group(full, "recompute: GEMMs fwd, dense layer");
  EXPECT_EQ(g.category, StepCategory::Recompute);
  EXPECT_EQ(g.phase, StepPhase::Backward);
  EXPECT_NE(full.find("recompute: other fwd"), nullptr);
  EXPECT_GT(full.hardware_flops, sel.hardware_flops);
  EXPECT_DOUBLE_EQ(full.model_flops, sel.model_flops);  // MFU never counts recompute
}

TEST(StepPlan, Fp8Bookkeeping) {
  // Delayed scaling: Transformer Engine's fused amax-history update, 3 + 2 slots per FP8 linear; the
  // LM head stays BF16 (--lm-head-precision bf16).
  const StepPlan d = step(llama(2), StepContextKind::TransformerEngine, {}, Precision::FP8Delayed);
  const StepGroup& h = step_group(d, "FP8 amax history and scale update");
  EXPECT_DOUBLE_EQ(h.bytes, 4 * 2 * 5 * (2 * 4 * 1024 + 24));
  EXPECT_EQ(step(llama(2)).find("FP8 amax history and scale update"), nullptr);
  // Current scaling: one tiny scale kernel per quantized tensor (X, W per Fprop; dY per Dgrad).
  const StepPlan c = step(llama(2), StepContextKind::TransformerEngine, {}, Precision::FP8Current);
  EXPECT_DOUBLE_EQ(step_group(c, "FP8 scales from amax").launches, 4 * 2 * 3);
  EXPECT_EQ(step_group(c, "FP8 scales from amax").basis, TimeBasis::Launches);
  // Pre-quantized cells leave the casts out: the step has them, forward and backward.
  const StepPlan pq = step(llama(2), StepContextKind::TransformerEngine, {}, Precision::FP8Current, Mode::PreQuantized);
  EXPECT_DOUBLE_EQ(step_group(pq, "FP8 casts fwd").share + step_group(pq, "FP8 casts bwd").share, 1.0);
  EXPECT_EQ(c.find("FP8 casts fwd"), nullptr);
}

TEST(StepPlan, MoeRouterBookkeeping) {
  ModelConfig c = find_preset("qwen3-30b-a3b").config;
  c.num_hidden_layers = 4;
  const StepPlan sp = step(build_model_plan(c));
  const StepGroup& r = step_group(sp, "router fwd");
  EXPECT_DOUBLE_EQ(r.count, 4);
  EXPECT_DOUBLE_EQ(r.bytes, 4096.0 * 128 * 22);  // tokens x experts, FP32 softmax, top-k, aux statistics
  EXPECT_NE(sp.find("GEMMs fwd, MoE layer"), nullptr);
  EXPECT_EQ(sp.find("GEMMs fwd, dense layer"), nullptr);
}

// Eager and compiled PyTorch MoE steps say what they leave out: a host synchronization per expert
// (Hugging Face's loop over the experts); Transformer Engine's grouped experts need no such note,
// nor does a dense model.
TEST(StepPlan, EagerMoeSaysItHasNoHostSyncPerExpert) {
  ModelConfig c = find_preset("qwen3-30b-a3b").config;
  c.num_hidden_layers = 2;
  auto says = [](const StepPlan& sp) {
    for (const std::string& n : sp.notes)
      if (n.find("host synchronization per expert") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(says(step(build_model_plan(c), StepContextKind::Eager)));
  EXPECT_TRUE(says(step(build_model_plan(c), StepContextKind::Compiled)));
  EXPECT_FALSE(says(step(build_model_plan(c), StepContextKind::TransformerEngine)));
  EXPECT_FALSE(says(step(llama(2), StepContextKind::Eager)));
}

TEST(StepPlan, Refusals) {
  StepOptions o;
  o.host_form = HostForm::Compiled;
  EXPECT_THROW(step(llama(2), StepContextKind::TransformerEngine, o), UsageError);
  EXPECT_NO_THROW(step(llama(2), StepContextKind::Compiled, o));
  EXPECT_THROW(step(build_shapes_plan("1024")), UsageError);
}

TEST(StepPlan, HostForms) {
  EXPECT_EQ(step(llama(2)).setup.form, HostForm::Eager);
  EXPECT_EQ(step(llama(2), StepContextKind::Compiled).setup.form, HostForm::Compiled);
  StepOptions o;
  o.host_form = HostForm::CudaGraph;
  EXPECT_EQ(step(llama(2), StepContextKind::TransformerEngine, o).setup.form, HostForm::CudaGraph);
  // Eager PyTorch launches more kernels per layer than Transformer Engine's fused modules.
  const StepPlan eager = step(llama(2), StepContextKind::Eager), te = step(llama(2));
  EXPECT_GT(step_group(eager, "other fwd").launches, step_group(te, "other fwd").launches);
}

TEST(StepPlan, MultiTensorLaunches) {
  EXPECT_DOUBLE_EQ(multi_tensor_launches(1000, 100, 4), 3);  // 36 tensors a launch
  EXPECT_DOUBLE_EQ(multi_tensor_launches(65536.0 * 320 * 10, 5, 1), 10);
  EXPECT_DOUBLE_EQ(multi_tensor_launches(0, 5, 1), 0);
}

}  // namespace
}  // namespace gs

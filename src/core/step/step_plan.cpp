#include "core/step/step_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/plan/attention_matmuls.hpp"
#include "core/model/layout_rules.hpp"
#include "core/util/error.hpp"

namespace gs {

namespace {
// Each category's key (JSON) and label (reports), in kAllStepCategories' order.
constexpr const char* kCategoryNames[][2] = {{"gemm", "GEMMs"},      {"attention", "attention"}, {"other", "other"},
                                             {"loss", "loss"},       {"optimizer", "optimizer"}, {"recompute", "recompute"}};
}  // namespace

const char* to_string(StepCategory c) { return kCategoryNames[static_cast<size_t>(c)][0]; }
const char* category_label(StepCategory c) { return kCategoryNames[static_cast<size_t>(c)][1]; }

const char* to_string(StepPhase p) {
  switch (p) {
    case StepPhase::Forward: return "forward";
    case StepPhase::Backward: return "backward";
    case StepPhase::Optimizer: return "optimizer";
  }
  return "?";
}

const char* to_string(TimeBasis b) {
  switch (b) {
    case TimeBasis::GemmCells: return "gemm-cells";
    case TimeBasis::Attention: return "attention";
    case TimeBasis::LayerOther: return "layer-other";
    case TimeBasis::Casts: return "casts";
    case TimeBasis::StepKernel: return "step-kernel";
    case TimeBasis::Bytes: return "bytes";
    case TimeBasis::Launches: return "launches";
  }
  return "?";
}

const StepGroup* StepPlan::find(const std::string& name) const {
  for (const StepGroup& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

double multi_tensor_launches(double elements, double tensors, int depth) {
  // PyTorch's ATen/native/cuda/MultiTensorApply.cuh (and Apex's): depth_to_max_tensors {110, 64, 48,
  // 36, 30}, 320 blocks per launch, 65536-value chunks.
  static const double max_tensors[] = {110, 64, 48, 36, 30};
  const double per = max_tensors[std::clamp(depth, 1, 5) - 1];
  if (elements <= 0) return 0;
  return std::max(std::ceil(tensors / per), std::ceil(elements / 65536.0 / 320.0));
}

namespace {

// Kernel launches of the framework's memory-bound groups, per instance (forward, backward). Counted
// from the op lists each framework runs (docs/step.md): Transformer Engine / Megatron-LM's fused
// modules, a Hugging Face Llama layer in eager PyTorch (RMSNorm as seven ops), Inductor's fused
// kernels. Modelled, not measured: the validation's profiles count them (bench/validate_model_step.py).
struct Launches {
  double fwd = 0, bwd = 0;
};
struct LaunchTable {
  Launches norm, layer_other, repeat_kv, moe_move, rope, router, embedding, loss_fused, loss_unfused;
};
LaunchTable launch_table(StepContextKind k) {
  switch (k) {
    case StepContextKind::Eager:
      // norm: to(fp32), pow, mean, add + rsqrt, mul, to(bf16), weight mul | their backward;
      // layer: two norms, two residual adds, SiLU and the product | backward, the QKV concatenation.
      return {{7, 10}, {2 * 7 + 2 + 2, 2 * 10 + 2 + 4 + 1}, {2, 2}, {6, 6}, {10, 10}, {12, 12}, {1, 6}, {1, 1},
              {4, 5}};
    case StepContextKind::Compiled:
      return {{1, 2}, {4, 5}, {0, 0}, {4, 4}, {0, 0}, {3, 3}, {1, 2}, {1, 1}, {4, 5}};
    case StepContextKind::TransformerEngine:
    case StepContextKind::None:
      break;
  }
  // Megatron-LM: its unfused vocab_parallel_cross_entropy is about twelve ops forward and five backward.
  return {{1, 2}, {5, 6}, {0, 0}, {2, 2}, {2, 2}, {8, 8}, {1, 6}, {1, 1}, {12, 5}};
}

bool is_fp8_cast_gemm(const Gemm& g, Precision p, const RecipeOptions& ro) {
  if (p == Precision::BF16 || g.op == Op::Router) return false;
  return !(g.scope == Scope::Model && ro.lm_head_bf16);
}

bool in_scope(const Gemm& g, GemmScope s) {
  switch (s) {
    case GemmScope::DenseLayer: return g.scope == Scope::Layer || g.scope == Scope::DenseLayer;
    case GemmScope::MoeLayer: return g.scope == Scope::Layer || g.scope == Scope::MoeLayer;
    case GemmScope::Head: return g.scope == Scope::Model;
  }
  return false;
}

// The GEMMs of one pass of a scope: FLOPs and launches (one per GEMM, one per expert with rows for a
// grouped one; the FP8 casts the cells time in the quantizing modes: X and W per Fprop, dY per
// Dgrad, an amax pass and a cast each under current scaling, one cast otherwise).
struct GemmWork {
  double flops = 0, launches = 0;
  int gemms = 0;
};
GemmWork gemm_work(const Plan& plan, GemmScope s, bool forward, Precision p, Mode m, const RecipeOptions& ro) {
  GemmWork w;
  const double per_tensor = p == Precision::FP8Current ? 2 : 1;
  for (const Gemm& g : plan.gemms) {
    if (!in_scope(g, s) || (g.pass == Pass::Fprop) != forward) continue;
    ++w.gemms;
    w.flops += g.flops();
    w.launches += g.grouped() ? static_cast<double>(g.groups_with_rows()) : 1.0;
    if (m != Mode::PreQuantized && is_fp8_cast_gemm(g, p, ro))
      w.launches += per_tensor * (g.pass == Pass::Fprop ? 2 : g.pass == Pass::Dgrad ? 1 : 0);
  }
  return w;
}

// FP8 tensors a step quantizes (X and W of every FP8 Fprop, dY of every FP8 Dgrad), and Transformer
// Engine's delayed-scaling meta slots (three per Fprop: input, weight, output; two per backward:
// output gradient, input gradient).
struct Fp8Tensors {
  double quantized = 0, slots = 0;
};
Fp8Tensors fp8_tensors(const Plan& plan, Precision p, const RecipeOptions& ro) {
  Fp8Tensors t;
  const double layers = static_cast<double>(plan.layers()), moe = static_cast<double>(plan.moe_layers());
  for (const Gemm& g : plan.gemms) {
    if (!is_fp8_cast_gemm(g, p, ro)) continue;
    const double times = g.scope == Scope::Model      ? 1.0
                         : g.scope == Scope::MoeLayer ? moe
                         : g.scope == Scope::DenseLayer ? layers - moe
                                                        : layers;
    const double experts = g.grouped() ? static_cast<double>(g.group.size()) : 1.0;
    if (g.pass == Pass::Fprop) {
      t.quantized += 2 * experts * times;
      t.slots += 3 * experts * times;
    } else if (g.pass == Pass::Dgrad) {
      t.quantized += experts * times;
      t.slots += 2 * experts * times;
    }
  }
  return t;
}

class Builder {
 public:
  // The layer counts once (a plan counts its MoE layers layer by layer).
  Builder(const Plan& plan, StepPlan& out)
      : layers_(static_cast<double>(plan.layers())), moe_(static_cast<double>(plan.moe_layers())), out_(out) {}
  StepGroup& add(std::string name, StepCategory c, StepPhase ph, LayerSet layers, TimeBasis b, std::string what) {
    StepGroup g{.name = std::move(name), .category = c, .phase = ph, .layers = layers, .basis = b};
    g.what = std::move(what);
    g.count = layers == LayerSet::Once    ? 1.0
              : layers == LayerSet::Every ? layers_
              : layers == LayerSet::Dense ? layers_ - moe_
                                          : moe_;
    out_.groups.push_back(std::move(g));
    return out_.groups.back();
  }

 private:
  double layers_, moe_;
  StepPlan& out_;
};

}  // namespace

StepPlan build_step_plan(const Plan& plan, StepContextKind framework, const StepOptions& options, Precision precision,
                         Mode mode, const RecipeOptions& recipe) {
  StepPlan sp;
  sp.params = count_params(plan);  // refuses a plan without a model
  const ModelConfig& c = *plan.config;
  const StepContextKind fw = framework == StepContextKind::None ? StepContextKind::TransformerEngine : framework;
  if (options.host_form == HostForm::Compiled && fw != StepContextKind::Compiled)
    throw UsageError(fmt::format("--host-form compiled launches Inductor's generated kernels: it needs --step-context "
                                 "compile (got {})",
                                 to_string(framework)));
  sp.setup = {framework, options, host_form(options, fw), loss_fused(options, fw), precision, mode, c.tokens()};
  const bool fused_loss = sp.setup.loss_fused;
  const LaunchTable lt = launch_table(fw);
  const StepWorkModel work = step_work_model(plan, fw);
  const double T = static_cast<double>(c.tokens()), h = static_cast<double>(c.hidden_size);
  const double L = static_cast<double>(plan.layers()), n_moe = static_cast<double>(plan.moe_layers());
  const bool moe = n_moe > 0, dense = L > n_moe;
  const bool head = c.vocab_size > 0;
  const AttentionShape att = work.attention;
  const double q_width = static_cast<double>(att.heads_q * att.d_qk);
  const double kv_width = static_cast<double>(attention_shape(c).heads_kv * att.d_qk);
  const bool pre_quantized_fp8 = mode == Mode::PreQuantized && precision != Precision::BF16;
  Builder b(plan, sp);

  // A group the engine can time (core/step/step_kernels.hpp), once per step.
  auto kernel_group = [&](std::string name, StepCategory cat, StepPhase ph, const StepKernelSpec& k, double launches,
                          std::string what) -> StepGroup& {
    StepGroup& g = b.add(std::move(name), cat, ph, LayerSet::Once, TimeBasis::StepKernel, std::move(what));
    g.kernel = k;
    g.bytes = step_kernel_bytes(k);
    g.launches = launches;
    return g;
  };
  // ---- zero-grad, at the step's start ----
  if (zeroes_grad_buffer(options)) {
    kernel_group("zero-grad", StepCategory::Optimizer, StepPhase::Forward,
                 {StepKernelKind::ZeroGrad, static_cast<int64_t>(sp.params.total()), 1, 0, 0, 0, options.storage, false},
                 1, "Megatron-LM zeroes its contiguous FP32 gradient buffer (one memset)");
  } else {
    sp.notes.push_back("zero-grad: set_to_none (PyTorch's default) launches nothing; the backward writes fresh gradients");
  }

  // ---- forward ----
  auto embedding_spec = [&](StepKernelKind k) {
    StepKernelSpec s;
    s.kind = k;
    s.rows = c.tokens();
    s.cols = c.hidden_size;
    s.vocab = vocab_per_rank(c);
    return s;
  };
  if (head)
    kernel_group("embedding fwd", StepCategory::Other, StepPhase::Forward, embedding_spec(StepKernelKind::EmbeddingFwd),
                 lt.embedding.fwd, "token embedding: a gather of the step's rows from the table");
  auto gemm_group = [&](const std::string& name, StepCategory cat, StepPhase ph, LayerSet ls, GemmScope s, bool fwd) {
    const GemmWork w = gemm_work(plan, s, fwd, precision, mode, recipe);
    if (w.gemms == 0) return;
    StepGroup& g = b.add(name, cat, ph, ls, TimeBasis::GemmCells,
                         fmt::format("{} GEMM{} of the plan ({}){}", w.gemms, w.gemms == 1 ? "" : "s",
                                     fwd ? "Fprop" : "Dgrad and Wgrad",
                                     mode != Mode::PreQuantized && precision != Precision::BF16
                                         ? ", their FP8 casts timed with them"
                                         : ""));
    g.gemm_scope = s;
    g.forward = fwd;
    g.flops = w.flops;
    g.launches = w.launches;
  };
  // The average layer's memory-bound work (the step context's), its RoPE, MoE router bookkeeping.
  const double other_total = work.other_bytes;
  const double other_fwd_share = other_total > 0 ? work.other_fwd_bytes / other_total : 0.5;
  const double moe_share = n_moe / L;
  const bool repeat = kv_width < q_width && repeats_kv_heads(fw);
  const double layer_fwd_launches = lt.layer_other.fwd + (repeat ? lt.repeat_kv.fwd : 0) + lt.moe_move.fwd * moe_share;
  const double layer_bwd_launches = lt.layer_other.bwd + (repeat ? lt.repeat_kv.bwd : 0) + lt.moe_move.bwd * moe_share;
  // RoPE on Q and K (MLA: the rope part only): a fused kernel reads and writes them (Transformer
  // Engine's fused RoPE, Inductor's fusion); eager PyTorch runs q*cos + rotate_half(q)*sin as five ops.
  const double rope_elems = c.mla.enabled()
                                ? T * static_cast<double>(c.mla.qk_rope_head_dim) * static_cast<double>(att.heads_q + 1)
                                : T * (q_width + kv_width);
  const double rope_bytes = 2.0 * rope_elems * (fw == StepContextKind::Eager ? 11 : 2);
  const double router_bytes = moe ? T * static_cast<double>(c.moe.num_experts) * 22 : 0;
  auto layer_forward = [&](const std::string& prefix, StepCategory cat, StepPhase ph) {
    // Selective recompute runs the core attention's forward again, nothing else.
    const bool attention_only = cat == StepCategory::Recompute && options.recompute == Recompute::Selective;
    if (dense && !attention_only)
      gemm_group(prefix + "GEMMs fwd, dense layer", cat, ph, moe ? LayerSet::Dense : LayerSet::Every, GemmScope::DenseLayer, true);
    if (moe && !attention_only) gemm_group(prefix + "GEMMs fwd, MoE layer", cat, ph, LayerSet::Moe, GemmScope::MoeLayer, true);
    if (pre_quantized_fp8 && !attention_only) {
      StepGroup& g = b.add(prefix + "FP8 casts fwd", cat == StepCategory::Recompute ? cat : StepCategory::Other, ph,
                           LayerSet::Every, TimeBasis::Casts,
                           "X and W of every Fprop: read for the amax and the cast, written rowwise and transposed");
      g.share = work.cast_bytes > 0 ? work.cast_fwd_bytes / work.cast_bytes : 0;
      g.bytes = work.cast_fwd_bytes;
      g.launches = 2 * gemm_work(plan, GemmScope::DenseLayer, true, precision, Mode::Training, recipe).gemms;
    }
    if (!attention_only) {
      StepGroup& g = b.add(prefix + "RoPE fwd", cat == StepCategory::Recompute ? cat : StepCategory::Other, ph,
                           LayerSet::Every, TimeBasis::Bytes,
                           fw == StepContextKind::Eager ? "rotary embedding of Q and K as eager ops (mul, neg, cat, mul, add)"
                                                        : "rotary embedding of Q and K, one fused pass");
      g.bytes = rope_bytes;
      g.launches = lt.rope.fwd;
    }
    {
      StepGroup& g = b.add(prefix + "attention fwd", cat == StepCategory::Recompute ? cat : StepCategory::Attention, ph,
                           LayerSet::Every, TimeBasis::Attention, describe(att));
      g.forward = true;
      g.flops = attention_fwd_flops(att);
      g.launches = 1;
    }
    if (attention_only) return;
    {
      StepGroup& g = b.add(prefix + "other fwd", cat == StepCategory::Recompute ? cat : StepCategory::Other, ph,
                           LayerSet::Every, TimeBasis::LayerOther,
                           "norms, activation, residual adds, layout copies (and MoE dispatch) of an average layer");
      g.share = other_fwd_share;
      g.move_share = 0.5;
      g.bytes = work.other_fwd_bytes + work.move_bytes / 2;
      g.launches = layer_fwd_launches;
    }
    if (moe) {
      StepGroup& g = b.add(prefix + "router fwd", cat == StepCategory::Recompute ? cat : StepCategory::Other, ph,
                           LayerSet::Moe, TimeBasis::Bytes,
                           "router logits upcast, softmax, top-k, aux-loss statistics over tokens x experts (FP32)");
      g.bytes = router_bytes;
      g.launches = lt.router.fwd;
    }
  };
  layer_forward("", StepCategory::Gemm, StepPhase::Forward);
  if (head) {
    StepGroup& g = b.add("final norm fwd", StepCategory::Other, StepPhase::Forward, LayerSet::Once, TimeBasis::Bytes,
                         "the final norm: read and write tokens x hidden");
    g.bytes = 2.0 * 2 * T * h;
    g.launches = lt.norm.fwd;
    gemm_group("LM head fwd", StepCategory::Gemm, StepPhase::Forward, LayerSet::Once, GemmScope::Head, true);
    StepKernelSpec ce;
    ce.kind = StepKernelKind::CrossEntropyFwd;
    ce.rows = c.tokens();
    ce.cols = vocab_per_rank(c);
    ce.fused = fused_loss;
    kernel_group("loss fwd", StepCategory::Loss, StepPhase::Forward, ce,
                 fused_loss ? lt.loss_fused.fwd : lt.loss_unfused.fwd,
                 fused_loss ? "fused cross-entropy: BF16 logits read once, FP32 math in registers"
                            : "logits upcast to FP32, log-softmax, NLL: separate kernels");
    // ---- backward ----
    ce.kind = StepKernelKind::CrossEntropyBwd;
    kernel_group("loss bwd", StepCategory::Loss, StepPhase::Backward, ce,
                 fused_loss ? lt.loss_fused.bwd : lt.loss_unfused.bwd,
                 fused_loss ? "fused: the logits' gradient written in BF16" : "softmax gradient in FP32, then cast to BF16");
    gemm_group("LM head bwd", StepCategory::Gemm, StepPhase::Backward, LayerSet::Once, GemmScope::Head, false);
    StepGroup& nb = b.add("final norm bwd", StepCategory::Other, StepPhase::Backward, LayerSet::Once, TimeBasis::Bytes,
                          "the final norm's backward: read x and dy, write dx (and its weight gradient)");
    nb.bytes = 2.0 * 3 * T * h;
    nb.launches = lt.norm.bwd;
  }
  if (options.recompute != Recompute::None)
    layer_forward("recompute: ", StepCategory::Recompute, StepPhase::Backward);
  if (moe) {
    StepGroup& g = b.add("router bwd", StepCategory::Other, StepPhase::Backward, LayerSet::Moe, TimeBasis::Bytes,
                         "router softmax and aux-loss gradients over tokens x experts (FP32), cast back");
    g.bytes = router_bytes;
    g.launches = lt.router.bwd;
  }
  {
    StepGroup& g = b.add("other bwd", StepCategory::Other, StepPhase::Backward, LayerSet::Every, TimeBasis::LayerOther,
                         "norm, activation and residual gradients, layout copies (and MoE dispatch) of an average layer");
    g.share = 1 - other_fwd_share;
    g.move_share = 0.5;
    g.bytes = other_total - work.other_fwd_bytes + work.move_bytes / 2;
    g.launches = layer_bwd_launches;
  }
  {
    StepGroup& g = b.add("attention bwd", StepCategory::Attention, StepPhase::Backward, LayerSet::Every,
                         TimeBasis::Attention, describe(att));
    g.forward = false;
    g.flops = attention_bwd_flops(att);
    g.launches = 2;
  }
  {
    StepGroup& g = b.add("RoPE bwd", StepCategory::Other, StepPhase::Backward, LayerSet::Every, TimeBasis::Bytes,
                         "the rotary embedding's gradient of Q and K");
    g.bytes = rope_bytes;
    g.launches = lt.rope.bwd;
  }
  if (pre_quantized_fp8) {
    StepGroup& g = b.add("FP8 casts bwd", StepCategory::Other, StepPhase::Backward, LayerSet::Every, TimeBasis::Casts,
                         "dY of every Dgrad: read for the amax and the cast, written rowwise and transposed");
    g.share = work.cast_bytes > 0 ? 1 - work.cast_fwd_bytes / work.cast_bytes : 0;
    g.bytes = work.cast_bytes - work.cast_fwd_bytes;
    g.launches = gemm_work(plan, GemmScope::DenseLayer, false, precision, Mode::Training, recipe).gemms;
  }
  if (dense) gemm_group("GEMMs bwd, dense layer", StepCategory::Gemm, StepPhase::Backward, moe ? LayerSet::Dense : LayerSet::Every, GemmScope::DenseLayer, false);
  if (moe) gemm_group("GEMMs bwd, MoE layer", StepCategory::Gemm, StepPhase::Backward, LayerSet::Moe, GemmScope::MoeLayer, false);
  if (head) {
    kernel_group("embedding bwd", StepCategory::Other, StepPhase::Backward, embedding_spec(StepKernelKind::EmbeddingBwd),
                 lt.embedding.bwd, "the table's gradient zeroed, the step's rows added into it");
    if (options.storage == ParamStorage::Bf16MainFp32) {
      StepGroup& m = b.add("embedding main-grad add", StepCategory::Other, StepPhase::Backward, LayerSet::Once,
                           TimeBasis::Bytes,
                           "Megatron-LM's gradient hook adds the BF16 table gradient into its FP32 main gradient");
      m.bytes = sp.params.embedding * (2 + 4 + 4);
      m.launches = 1;
    }
  }
  // ---- after the backward: FP8 scale bookkeeping, clipping, the optimizer ----
  const Fp8Tensors f8 = fp8_tensors(plan, precision, recipe);
  if (precision == Precision::FP8Delayed && f8.slots > 0) {
    const double len = static_cast<double>(recipe.amax_history_len);
    StepGroup& g = b.add("FP8 amax history and scale update", StepCategory::Other, StepPhase::Optimizer,
                         LayerSet::Once, TimeBasis::Bytes,
                         fmt::format("delayed scaling: {:.0f} amax histories of {:.0f} rolled and reduced, scales "
                                     "recomputed (Transformer Engine's fused update, forward and backward tensors)",
                                     f8.slots, len));
    g.bytes = f8.slots * (2 * 4 * len + 3 * 2 * 4);
    g.launches = 2;
  } else if (precision == Precision::FP8Current && f8.quantized > 0) {
    StepGroup& g = b.add("FP8 scales from amax", StepCategory::Other, StepPhase::Optimizer, LayerSet::Once,
                         TimeBasis::Launches,
                         fmt::format("current scaling: a scale computed from each of the step's {:.0f} amaxes (one "
                                     "tiny kernel each, not in the GEMM cells)",
                                     f8.quantized));
    g.launches = f8.quantized;
  }
  const double params = sp.params.total(), tensors = static_cast<double>(sp.params.tensors);
  if (options.grad_clip) {
    // The gradients' bytes, read before the next group is added (a reference into the groups would dangle).
    const double grads = kernel_group("grad norm", StepCategory::Optimizer, StepPhase::Optimizer,
                                      {StepKernelKind::GradNorm, static_cast<int64_t>(params), sp.params.tensors, 0, 0,
                                       0, options.storage, false},
                                      multi_tensor_launches(params, tensors, 1) + 2,
                                      "the gradients' global L2 norm (multi-tensor)")
                             .bytes;
    if (options.storage != ParamStorage::Bf16MainFp32) {
      StepGroup& s = b.add("grad clip scale", StepCategory::Optimizer, StepPhase::Optimizer, LayerSet::Once,
                           TimeBasis::Bytes,
                           "clip_grad_norm_ multiplies every gradient by the clamped coefficient (read, write)");
      s.bytes = 2 * grads;
      s.launches = multi_tensor_launches(params, tensors, 1);
    } else {
      sp.notes.push_back("grad clip: Megatron-LM scales the gradients only when the norm exceeds the threshold "
                         "(not counted)");
    }
  }
  {
    StepKernelSpec a{StepKernelKind::AdamW, static_cast<int64_t>(params), sp.params.tensors, 0, 0, 0, options.storage,
                     false};
    const bool fused = options.optimizer == OptimizerImpl::Fused;
    StepGroup& g = b.add("optimizer", StepCategory::Optimizer, StepPhase::Optimizer, LayerSet::Once,
                         fused ? TimeBasis::StepKernel : TimeBasis::Bytes,
                         fused ? fmt::format("AdamW, one multi-tensor kernel over {} ({})", to_string(options.storage),
                                             options.storage == ParamStorage::Bf16MainFp32
                                                 ? "FP32 main params, grads and states, the BF16 copy written"
                                                 : "params, grads and states in their own dtype")
                               : "AdamW as PyTorch's foreach ops: about ten multi-tensor passes over params and states");
    if (fused) g.kernel = a;
    // foreach: lerp m, mul v, addcmul v, sqrt, div, add eps, addcdiv p, weight decay: ~20 values moved per parameter.
    const double value = options.storage == ParamStorage::Bf16 ? 2 : 4;
    g.bytes = fused ? step_kernel_bytes(a) : params * (20 * value + (options.storage == ParamStorage::Bf16MainFp32 ? 2 : 0));
    g.launches = fused ? multi_tensor_launches(params, tensors, 4) : 10 * multi_tensor_launches(params, tensors, 3);
  }
  // ---- FLOPs per step ----
  const AttentionMatmuls am = attention_matmuls(c);
  const double attention_model = am.flops_per_layer(false) * L;  // full s x s, forward + backward
  const PlanFlops f = plan_flops(plan);
  sp.model_flops = f.full_model(plan.layers()) + attention_model;
  sp.hardware_flops = sp.model_flops;
  if (options.recompute != Recompute::None) {
    sp.hardware_flops += attention_model / 3;  // the attention's forward again
    if (options.recompute == Recompute::Full) sp.hardware_flops += f.fprop * (L - n_moe) + f.moe_fprop * n_moe;
  }
  if (repeat)
    sp.notes.push_back("GQA: eager and compiled PyTorch repeat the key/value heads before attention (Hugging Face's "
                       "repeat_kv): attention runs, and is timed, with every query head its own key and value");
  sp.notes.push_back("RoPE on Q and K in every layer (rotary position embeddings, as the presets' model families use)");
  if (n_moe > 0 && fw != StepContextKind::TransformerEngine)
    sp.notes.push_back("the experts' kernels launch without a host synchronization per expert (as grouped GEMMs run them); "
                       "a Hugging Face-style Python loop over the experts that waits for each expert's token list is not "
                       "modelled, and such a step is host-bound far beyond this estimate (docs/step.md)");
  return sp;
}

}  // namespace gs

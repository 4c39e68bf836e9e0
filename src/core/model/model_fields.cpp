// The model-field table (model_fields.hpp). A new integer field of ModelConfig gets one line here:
// its flags and help come from it.
#include "core/model/model_fields.hpp"

#include <stdexcept>
#include <string_view>

namespace gs {

namespace {

// One row: the ModelOverrides member a flag fills and the ModelConfig member it sets.
// `read`: how a result file gives it (ReadRule).
#define GS_MODEL_FIELD(flags, help, group, section, key, plain, read, given_member, config_member)               \
  ModelField {                                                                                                    \
    flags, help, group, section, key, plain, read.required, read.allow_zero, read.absent,                         \
        [](ModelOverrides& o) -> std::optional<int64_t>& { return o.given_member; },                              \
        [](ModelConfig& c) -> int64_t& { return c.config_member; }                                                \
  }

constexpr const char* kModel = "Model";
constexpr const char* kMoe = "MoE and MLA";

struct ReadRule {
  bool required, allow_zero;
  int64_t absent;
};
constexpr ReadRule kRequired{true, false, 0};      // > 0, and there
constexpr ReadRule kZeroIfAbsent{false, true, 0};  // >= 0 (0: derived, none or off), 0 when absent
constexpr ReadRule kOneIfAbsent{false, false, 1};  // > 0, 1 when absent

const ModelField kFields[] = {
    GS_MODEL_FIELD("--hidden_size,--hidden-size", "Hidden size", kModel, "config", "hidden_size", true, kRequired, hidden_size,
                   hidden_size),
    GS_MODEL_FIELD("--intermediate_size,--intermediate-size", "MLP intermediate size", kModel, "config",
                   "intermediate_size", true, kRequired, intermediate_size, intermediate_size),
    GS_MODEL_FIELD("--num_attention_heads,--num-attention-heads", "Attention heads", kModel, "config",
                   "num_attention_heads", true, kRequired, num_attention_heads, num_attention_heads),
    GS_MODEL_FIELD("--num_key_value_heads,--num-key-value-heads", "KV heads for GQA/MQA (default: = heads)", kModel,
                   "config", "num_key_value_heads", true, kZeroIfAbsent, num_key_value_heads, num_key_value_heads),
    GS_MODEL_FIELD("--head_dim,--head-dim", "Head dimension (default: hidden / heads)", kModel, "config", "head_dim", true, kZeroIfAbsent, head_dim, head_dim),
    GS_MODEL_FIELD("--num_hidden_layers,--num-hidden-layers", "Transformer layers", kModel, "config",
                   "num_hidden_layers", true, kRequired, num_hidden_layers, num_hidden_layers),
    GS_MODEL_FIELD("--micro_batch_size,--micro-batch-size", "Micro-batch size", kModel, "config", "micro_batch_size", true, kRequired, micro_batch_size, micro_batch_size),
    GS_MODEL_FIELD("--sequence_length,--sequence-length,--seq_length", "Sequence length", kModel, "config",
                   "sequence_length", true, kRequired, sequence_length, sequence_length),
    GS_MODEL_FIELD("--vocab_size,--vocab-size", "Vocabulary size: adds the LM-head GEMMs (once per step)", kModel,
                   "config", "vocab_size", true, kZeroIfAbsent, vocab_size, vocab_size),
    GS_MODEL_FIELD("--tensor-parallel,--tensor_parallel,--tp", "Tensor-parallel degree (per-rank shapes)", kModel,
                   "config", "tensor_parallel", true, kOneIfAbsent, tensor_parallel, tensor_parallel),
    GS_MODEL_FIELD("--make-vocab-size-divisible-by,--make_vocab_size_divisible_by",
                   "Pad the LM head's vocabulary to a multiple of this x TP, as Megatron-LM (default: 128 at any "
                   "TP under --step-context te or none, as Megatron-LM pads; no padding under eager or compile, as "
                   "Hugging Face / PyTorch)",
                   kModel, "config", "make_vocab_size_divisible_by", true, kZeroIfAbsent, vocab_divisible_by, vocab_divisible_by),
    // Mixture-of-Experts and Multi-head Latent Attention (docs/moe.md).
    GS_MODEL_FIELD("--num-experts,--num_experts", "Routed experts per MoE layer (0: dense MLP)", kMoe, "config.moe",
                   "num_experts", true, kRequired, moe.num_experts, moe.num_experts),
    GS_MODEL_FIELD("--top-k,--top_k,--num-experts-per-tok", "Experts per token", kMoe, "config.moe", "top_k", true, kRequired,
                   moe.top_k, moe.top_k),
    GS_MODEL_FIELD("--moe-intermediate-size,--moe_intermediate_size",
                   "One routed expert's FFN size (default: --intermediate_size)", kMoe, "config.moe",
                   "expert_intermediate_size", true, kZeroIfAbsent, moe.expert_intermediate_size, moe.expert_intermediate_size),
    GS_MODEL_FIELD("--shared-experts,--n-shared-experts", "Shared experts (every token; dense GEMMs)", kMoe,
                   "config.moe", "shared_experts", true, kZeroIfAbsent, moe.shared_experts, moe.shared_experts),
    GS_MODEL_FIELD("--shared-expert-intermediate-size", "One shared expert's FFN size (default: the routed expert size)",
                   kMoe, "config.moe", "shared_expert_intermediate_size", true, kZeroIfAbsent, moe.shared_expert_intermediate_size,
                   moe.shared_expert_intermediate_size),
    GS_MODEL_FIELD("--first-dense-layers,--first-k-dense-replace",
                   "Leading layers with a dense MLP of --intermediate_size instead of experts", kMoe, "config.moe",
                   "first_dense_layers", true, kZeroIfAbsent, moe.first_dense_layers, moe.first_dense_layers),
    GS_MODEL_FIELD("--moe-layer-freq", "Experts only in layers i with i % N == 0 (after the dense ones)", kMoe,
                   "config.moe", "layer_freq", true, kOneIfAbsent, moe.layer_freq, moe.layer_freq),
    GS_MODEL_FIELD("--expert-parallel,--ep", "Expert-parallel ranks: E/N experts each; the busiest rank's experts are planned",
                   kMoe, "config.moe", "expert_parallel", true, kOneIfAbsent, moe.expert_parallel, moe.expert_parallel),
    // Takes 'none' too (a plain q projection): the CLI binds it, after --routing and --capacity-factor.
    GS_MODEL_FIELD("--q-lora-rank,--q_lora_rank", "MLA q low rank, or 'none' (a plain q projection)", kMoe,
                   "config.mla", "q_lora_rank", false, kZeroIfAbsent, moe.q_lora_rank, mla.q_lora_rank),
    GS_MODEL_FIELD("--kv-lora-rank,--kv_lora_rank", "MLA kv low rank (enables MLA)", kMoe, "config.mla", "kv_lora_rank", true, kRequired, moe.kv_lora_rank, mla.kv_lora_rank),
    GS_MODEL_FIELD("--qk-nope-head-dim,--qk_nope_head_dim", "MLA per-head q/k dimension without rope", kMoe,
                   "config.mla", "qk_nope_head_dim", true, kRequired, moe.qk_nope_head_dim, mla.qk_nope_head_dim),
    GS_MODEL_FIELD("--qk-rope-head-dim,--qk_rope_head_dim", "MLA per-head rope dimension", kMoe, "config.mla",
                   "qk_rope_head_dim", true, kRequired, moe.qk_rope_head_dim, mla.qk_rope_head_dim),
    GS_MODEL_FIELD("--v-head-dim,--v_head_dim", "MLA per-head value dimension", kMoe, "config.mla", "v_head_dim", true, kRequired,
                   moe.v_head_dim, mla.v_head_dim),
};

#undef GS_MODEL_FIELD

}  // namespace

std::string ModelField::first_flag() const {
  const std::string_view f(flags);
  return std::string(f.substr(0, f.find(',')));
}

std::string ModelField::path() const { return std::string(section) + "." + key; }

std::span<const ModelField> model_fields() { return kFields; }

const ModelField& find_model_field(const std::string& key) {
  for (const ModelField& f : kFields)
    if (key == f.key || key == f.path()) return f;
  throw std::logic_error("no model field '" + key + "'");
}

}  // namespace gs

// The Mixture-of-Experts and Multi-head Latent Attention fields of the transformers configuration
// classes gemmscope knows, as those classes and their models read them: each field's default (the
// class's own), which config field sizes the routed experts, the shared experts and the dense MLP,
// and which layers have experts. A config.json that leaves a field out plans the class's default,
// noted in the header (moe_config.cpp: parse_hf_moe_mla); a family not listed here is read by the
// generic rule (docs/config-json.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gs {

struct MlaDefaults {
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
};

// Which field sizes one routed expert's FFN.
enum class ExpertWidth {
  MoeIntermediate,  // moe_intermediate_size (DeepSeek, Qwen2-MoE, Qwen3-MoE)
  Intermediate,     // intermediate_size (Mixtral, OLMoE, gpt-oss, Llama 4)
};

struct MoeFamily {
  const char* model_type;
  const char* cls;            // the transformers configuration class
  const char* experts_key;    // the class's own spelling of the routed-expert count
  int64_t experts;            // its default
  int64_t top_k;              // num_experts_per_tok's default; 0: none (DeepseekV2Config: None)
  ExpertWidth width;
  int64_t moe_intermediate;   // moe_intermediate_size's default (ExpertWidth::MoeIntermediate)
  int64_t shared_experts;     // n_shared_experts' default (DeepSeek: count x the expert size); 0: none
  // Qwen2-MoE: one shared expert of shared_expert_intermediate_size, this default; 0: not a field.
  int64_t shared_expert_intermediate;
  // Llama 4: one shared expert as wide as a routed expert in every MoE layer.
  bool one_shared_expert;
  int64_t first_dense;        // first_k_dense_replace's default
  // Llama 4: the dense layers' MLP is intermediate_size_mlp (this default), not intermediate_size.
  int64_t dense_mlp;
  std::optional<MlaDefaults> mla;  // the family's attention is MLA (DeepSeek-V2/V3), with these defaults
  // The expert-layout fields its model reads, space-separated (moe_family_reads): another family's
  // field in its config.json is ignored by transformers, and so by gemmscope, with a note.
  const char* reads;
};

// The expert-layout fields any family reads (moe_intermediate_size, n_shared_experts, ...): those a
// known family's model may ignore.
bool is_expert_layout_field(std::string_view key);
bool moe_family_reads(const MoeFamily& f, std::string_view key);

// The family of a config.json's model_type (text_config's for multimodal wrappers); nullptr for
// one gemmscope does not know.
const MoeFamily* moe_family(std::string_view model_type);

}  // namespace gs

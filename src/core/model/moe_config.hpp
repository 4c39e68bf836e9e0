// Mixture-of-Experts and Multi-head Latent Attention parts of a model config: how many experts,
// how many each token picks, their FFN size, shared experts, which layers are dense, and the MLA
// projection ranks. Pure data plus the rules that say which layer is which; parsing of
// config.json fields and validation live in moe_config.cpp (see docs/moe.md).
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gs {

struct ModelConfig;

// Bounds on a plan's size, so that any accepted input plans in well under 2 s and 1 GiB
// (docs/hostile-input.md): layers, routed experts (DeepSeek-V3 has 256, the largest published models
// a few hundred) and tokens per rank in a routing (micro-batch x sequence, itself at most 2^24).
constexpr int64_t kMaxExperts = 16384;
// Transformer layers (the deepest published models have a few hundred).
constexpr int64_t kMaxLayers = 65536;
constexpr int64_t kMaxRoutingTokens = int64_t{1} << 24;

struct MoeConfig {
  int64_t num_experts = 0;               // routed experts E; 0 = a dense model
  int64_t top_k = 0;                     // experts per token
  int64_t expert_intermediate_size = 0;  // one routed expert's FFN size; 0 = intermediate_size
  int64_t shared_experts = 0;            // shared experts (every token, dense GEMMs)
  int64_t shared_expert_intermediate_size = 0;  // one shared expert's FFN size; 0 = the routed expert size
  // Which layers have experts (the rest run the dense MLP of intermediate_size):
  int64_t first_dense_layers = 0;  // DeepSeek first_k_dense_replace: layers 0..N-1 dense
  int64_t layer_freq = 1;          // DeepSeek moe_layer_freq: MoE only where layer % freq == 0
  int64_t sparse_step = 1;         // Qwen decoder_sparse_step: MoE only where (layer + 1) % step == 0
  std::set<int64_t> dense_layer_list;     // Qwen mlp_only_layers: these layers dense (a set: one lookup per layer)
  int64_t expert_parallel = 1;            // ranks sharing the experts (E / N local experts each)
  // Where expert_parallel comes from: a preset's published training layout or a stated typical
  // one, "--expert-parallel", or empty (a config.json or flags: 1 unless given).
  std::string parallel_source;
  std::string routing = "random";         // routing.hpp: balanced | random | lognormal:S | hot:F | file:PATH
  double capacity_factor = 0;             // > 0: tokens over ceil(F * assignments / E) per expert dropped
  uint64_t routing_seed = 1234;           // --seed

  bool enabled() const { return num_experts > 0; }
};

struct MlaConfig {
  int64_t q_lora_rank = 0;   // 0: a plain q projection (config.json q_lora_rank null)
  int64_t kv_lora_rank = 0;  // > 0: MLA
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// Flag values; std::nullopt = not given.
struct MoeOverrides {
  std::optional<int64_t> num_experts, top_k, expert_intermediate_size, shared_experts,
      shared_expert_intermediate_size, first_dense_layers, layer_freq, expert_parallel;
  std::optional<int64_t> q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
  std::optional<std::string> routing;
  std::optional<double> capacity_factor;
  bool any_model_field() const;  // anything but expert parallelism, routing and capacity
};

// Routed expert FFN size (falls back to intermediate_size) and the total shared-expert FFN size.
int64_t expert_ffn(const ModelConfig& c);
int64_t shared_ffn_total(const ModelConfig& c);
// Whether layer `i` (0-based) has experts; always false for a dense model.
bool is_moe_layer(const ModelConfig& c, int64_t i);
int64_t moe_layer_count(const ModelConfig& c);

// Reads the expert and MLA fields of a Hugging Face config.json object of family `type`
// (model_type) into `c`, and refuses (UsageError naming the field) a field that changes the linear
// layers in a way gemmscope does not model. For the families of moe_families.hpp a field left out
// takes the transformers class's default (noted in c.notes), and a layout field the family's
// model does not read is ignored (noted). `origin` names the file in messages.
void parse_hf_moe_mla(const nlohmann::json& j, const std::string& type, ModelConfig& c, const std::string& origin);

// The MoE flags that are not integer fields (--routing, --capacity-factor; where --expert-parallel
// came from) and the rules between them, after apply_overrides set the integer fields through the
// model-field table (model_fields.hpp): expert flags need a model with experts, MLA flags need
// --kv-lora-rank.
void apply_moe_overrides(ModelConfig& c, const MoeOverrides& o);

// The MoE/MLA checks of validate(): top-k within experts, expert parallelism dividing experts,
// MLA ranks > 0, tensor-parallel splits. UsageError with one sentence.
void validate_moe_mla(const ModelConfig& c);

}  // namespace gs

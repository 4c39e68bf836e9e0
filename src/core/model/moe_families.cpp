// The transformers configuration classes' MoE and MLA defaults (moe_families.hpp), as the classes
// declare them (huggingface/transformers, src/transformers/models/<family>/configuration_*.py) and
// their models build the layers:
//   DeepseekV2Config   n_routed_experts 64, num_experts_per_tok None, moe_intermediate_size 1407,
//                      n_shared_experts 2 (x moe_intermediate_size), first_k_dense_replace 0,
//                      q_lora_rank 1536, kv_lora_rank 512, qk_nope/rope 128/64, v_head_dim 128
//   DeepseekV3Config   n_routed_experts 256, top-8, moe_intermediate_size 2048, n_shared_experts 1,
//                      first_k_dense_replace 3, the same MLA ranks
//   Qwen2MoeConfig     num_experts 60, top-4, moe_intermediate_size 1408, one shared expert of
//                      shared_expert_intermediate_size 5632 (always built), decoder_sparse_step 1
//   Qwen3MoeConfig     num_experts 128, top-8, moe_intermediate_size 768, no shared expert
//   MixtralConfig      num_local_experts 8, top-2, experts of intermediate_size
//   OlmoeConfig        num_experts 64, top-8, experts of intermediate_size
//   GptOssConfig       num_local_experts 128, top-4, experts of intermediate_size
//   Llama4TextConfig   num_local_experts 16, top-1, experts and one shared expert of
//                      intermediate_size, dense layers of intermediate_size_mlp 16384, MoE layers
//                      moe_layers or every interleave_moe_layer_step-th (default 1)
#include "core/model/moe_families.hpp"

namespace gs {

namespace {

constexpr MlaDefaults kDeepSeekMla{1536, 512, 128, 64, 128};

// DeepSeek's moe_layer_freq is read as DeepSeek's own modelling code reads it (MoE where layer %
// freq == 0; its published configs say 1); transformers' DeepSeek classes build experts in every
// layer after first_k_dense_replace.
constexpr const char* kDeepSeekReads = "moe_intermediate_size n_shared_experts first_k_dense_replace moe_layer_freq";

// model_type, class, experts key, experts, top-k, width, moe_intermediate, shared, shared size,
// one shared expert, first dense, dense MLP, MLA, the layout fields it reads.
const MoeFamily kFamilies[] = {
    {"deepseek_v2", "DeepseekV2Config", "n_routed_experts", 64, 0, ExpertWidth::MoeIntermediate, 1407, 2, 0, false, 0,
     0, kDeepSeekMla, kDeepSeekReads},
    {"deepseek_v3", "DeepseekV3Config", "n_routed_experts", 256, 8, ExpertWidth::MoeIntermediate, 2048, 1, 0, false, 3,
     0, kDeepSeekMla, kDeepSeekReads},
    {"qwen2_moe", "Qwen2MoeConfig", "num_experts", 60, 4, ExpertWidth::MoeIntermediate, 1408, 0, 5632, false, 0, 0,
     std::nullopt, "moe_intermediate_size shared_expert_intermediate_size decoder_sparse_step mlp_only_layers"},
    {"qwen3_moe", "Qwen3MoeConfig", "num_experts", 128, 8, ExpertWidth::MoeIntermediate, 768, 0, 0, false, 0, 0,
     std::nullopt, "moe_intermediate_size decoder_sparse_step mlp_only_layers"},
    {"mixtral", "MixtralConfig", "num_local_experts", 8, 2, ExpertWidth::Intermediate, 0, 0, 0, false, 0, 0, std::nullopt,
     ""},
    {"olmoe", "OlmoeConfig", "num_experts", 64, 8, ExpertWidth::Intermediate, 0, 0, 0, false, 0, 0, std::nullopt, ""},
    {"gpt_oss", "GptOssConfig", "num_local_experts", 128, 4, ExpertWidth::Intermediate, 0, 0, 0, false, 0, 0,
     std::nullopt, ""},
    {"llama4_text", "Llama4TextConfig", "num_local_experts", 16, 1, ExpertWidth::Intermediate, 0, 0, 0, true, 0, 16384,
     std::nullopt, "interleave_moe_layer_step moe_layers intermediate_size_mlp"},
};

constexpr const char* kLayoutFields[] = {"moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size",
                                         "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
                                         "mlp_only_layers", "interleave_moe_layer_step", "moe_layers",
                                         "intermediate_size_mlp"};

// Whether `key` is one of the space-separated words of `list`.
bool listed(std::string_view list, std::string_view key) {
  while (!list.empty()) {
    const size_t end = list.find(' ');
    if (list.substr(0, end) == key) return true;
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return false;
}

}  // namespace

bool is_expert_layout_field(std::string_view key) {
  for (const char* k : kLayoutFields)
    if (key == k) return true;
  return false;
}

bool moe_family_reads(const MoeFamily& f, std::string_view key) { return listed(f.reads, key); }

const MoeFamily* moe_family(std::string_view model_type) {
  for (const MoeFamily& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

}  // namespace gs

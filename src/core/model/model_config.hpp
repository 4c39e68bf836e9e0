// Transformer configuration: what a model and a batch are, where they come from (flags, a
// preset, a Hugging Face config.json) and the checks that make a config usable.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/layout_rules.hpp"
#include "core/model/moe_config.hpp"

namespace gs {

struct ModelConfig {
  std::string name = "custom";
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // 0: same as num_attention_heads
  int64_t head_dim = 0;             // 0: hidden_size / num_attention_heads
  int64_t num_hidden_layers = 0;
  int64_t micro_batch_size = 0;
  int64_t sequence_length = 0;
  int64_t vocab_size = 0;           // 0: no LM head GEMMs
  bool gated_mlp = false;           // SwiGLU / GeGLU: MLP-up produces 2*intermediate
  int64_t tensor_parallel = 1;
  // Megatron's --make-vocab-size-divisible-by: the LM head's vocabulary is padded up to a multiple
  // of this x tensor_parallel. 0: not given = the framework's rule (layout_rules.hpp: Megatron-LM
  // 128 at any TP, Hugging Face / PyTorch no padding).
  int64_t vocab_divisible_by = 0;
  // Whose layout rules the plan follows (layout_rules.hpp): Megatron-LM's unless the step context
  // names eager PyTorch or torch.compile.
  LayoutFramework layout = LayoutFramework::Megatron;
  // Where the config came from, for reports and JSON: the config.json path ("" for presets and
  // flags), what its parsing filled in (class defaults, a missing vocab_size), and where each batch
  // number came from ("--micro_batch_size", "preset codonfm-5b", ...).
  std::string source;
  std::vector<std::string> notes;
  std::string micro_batch_from, sequence_from;
  // Required fields the config.json lacks ("intermediate_size"), left 0: a flag fills them
  // (apply_overrides), else validate() refuses the config naming the first.
  std::vector<std::string> missing_fields;
  MoeConfig moe;  // experts (moe_config.hpp); num_experts 0 = dense MLP in every layer
  MlaConfig mla;  // Multi-head Latent Attention projections; kv_lora_rank 0 = QKV projection

  int64_t kv_heads() const { return num_key_value_heads ? num_key_value_heads : num_attention_heads; }
  int64_t head_dimension() const {
    return head_dim ? head_dim : (num_attention_heads ? hidden_size / num_attention_heads : 0);
  }
  int64_t tokens() const { return micro_batch_size * sequence_length; }
};

// Fields a user may set; std::nullopt = not given. Applied on top of a base config.
struct ModelOverrides {
  std::optional<int64_t> hidden_size, intermediate_size, num_attention_heads, num_key_value_heads,
      head_dim, num_hidden_layers, micro_batch_size, sequence_length, vocab_size, tensor_parallel,
      vocab_divisible_by;
  std::optional<bool> gated_mlp;
  MoeOverrides moe;  // expert and MLA flags
  bool any_model_field() const;  // any field other than batch and tensor parallel
};

struct Preset {
  std::string name;
  std::string description;
  ModelConfig config;  // includes the preset's default batch
};

const std::vector<Preset>& presets();
// Case-insensitive. Throws UsageError listing the known names when `name` is unknown.
const Preset& find_preset(const std::string& name);

// The seed tutorial's 5B config (hidden 4096, intermediate 16384, 32 heads, 24 layers, 31x512).
ModelConfig default_config();

// Default batch for configs read from config.json when no batch flag is given.
constexpr int64_t kDefaultConfigMicroBatch = 1;
constexpr int64_t kDefaultConfigSequence = 4096;

// Reads a Hugging Face config.json as the transformers classes do: GPT-2 names (n_embd, n_head,
// n_layer, n_inner = null -> 4 x n_embd, n_positions), the language model of multimodal configs
// (text_config), the attention layout (attention_layout.hpp: gpt_bigcode's multi_query, Falcon's
// num_kv_heads / new_decoder_architecture / multi_query, Falcon's ffn_hidden_size), and for known
// families (llama, mistral, qwen2/3, gemma/2/3, phi3, gpt2, gpt_bigcode, falcon) the class's
// published default for a missing field, each such fill-in recorded in ModelConfig::notes. A
// required field with no default is listed in ModelConfig::missing_fields (flags may fill it).
// The default sequence length is 4096, or the model's maximum positions when smaller.
// Throws UsageError on an unreadable file (saying why) or malformed fields.
ModelConfig load_hf_config(const std::string& path);
// Parses the JSON text of a config.json (`origin` names it in error messages).
ModelConfig parse_hf_config(const std::string& json_text, const std::string& origin);

void apply_overrides(ModelConfig& c, const ModelOverrides& o);

// Throws UsageError with one clear sentence for the first problem found: non-positive sizes,
// overflow, heads not dividing hidden (when head_dim is derived), kv heads not dividing heads. The
// tensor-parallel splits are the framework's rules (layout_rules.hpp: check_tensor_parallel),
// applied when a plan is built.
void validate(const ModelConfig& c);

}  // namespace gs

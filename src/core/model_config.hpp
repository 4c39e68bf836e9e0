// Transformer configuration: what a model and a batch are, where they come from (flags, a
// preset, a Hugging Face config.json) and the checks that make a config usable.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/moe_config.hpp"

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
  MoeConfig moe;  // experts (moe_config.hpp); num_experts 0 = dense MLP in every layer
  MlaConfig mla;  // Multi-head Latent Attention projections; kv_lora_rank 0 = QKV projection
  std::vector<std::string> notes;  // what the plan leaves out, said in the report (config.json)

  int64_t kv_heads() const { return num_key_value_heads ? num_key_value_heads : num_attention_heads; }
  int64_t head_dimension() const {
    return head_dim ? head_dim : (num_attention_heads ? hidden_size / num_attention_heads : 0);
  }
  int64_t tokens() const { return micro_batch_size * sequence_length; }
};

// Fields a user may set; std::nullopt = not given. Applied on top of a base config.
struct ModelOverrides {
  std::optional<int64_t> hidden_size, intermediate_size, num_attention_heads, num_key_value_heads,
      head_dim, num_hidden_layers, micro_batch_size, sequence_length, vocab_size, tensor_parallel;
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
// Throws UsageError listing the known names when `name` is unknown.
const Preset& find_preset(const std::string& name);

// The seed tutorial's 5B config (hidden 4096, intermediate 16384, 32 heads, 24 layers, 31x512).
ModelConfig default_config();

// Default batch for configs read from config.json when no batch flag is given.
constexpr int64_t kDefaultConfigMicroBatch = 1;
constexpr int64_t kDefaultConfigSequence = 4096;

// Reads a Hugging Face config.json. Throws UsageError on a missing/malformed file or fields.
ModelConfig load_hf_config(const std::string& path);
// Parses the JSON text of a config.json (`origin` names it in error messages).
ModelConfig parse_hf_config(const std::string& json_text, const std::string& origin);

void apply_overrides(ModelConfig& c, const ModelOverrides& o);

// Throws UsageError with one clear sentence for the first problem found: non-positive sizes,
// overflow, heads not dividing hidden (when head_dim is derived), kv heads not dividing heads,
// tensor-parallel splits that are not exact.
void validate(const ModelConfig& c);

}  // namespace gs

// How a Hugging Face config.json states its attention heads, read as the transformers classes read
// them: num_key_value_heads (Llama and most families), gpt_bigcode's multi_query (one key/value
// head), Falcon's num_kv_heads / n_head_kv with new_decoder_architecture and multi_query. A
// key/value-head spelling of a family whose layout is not read here is refused, never planned as
// multi-head attention. docs/config-json.md lists the rules.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gs {

struct ModelConfig;

// Sets c.num_key_value_heads from the layout fields of `j` for `model_type` (c.num_attention_heads
// and any num_key_value_heads already read). Records class defaults it used in c.notes. UsageError
// naming the field and its meaning for a spelling it does not read, a disagreement between two
// spellings, or a value that is not of its type.
void read_hf_attention_layout(const nlohmann::json& j, const std::string& model_type, ModelConfig& c,
                              const std::string& origin);

}  // namespace gs

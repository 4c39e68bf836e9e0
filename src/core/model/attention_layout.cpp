#include "core/model/attention_layout.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "core/model/model_config.hpp"

namespace gs {

namespace {

using nlohmann::json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A boolean field: absent or null = `dflt` (`*defaulted` set), else it must be true or false.
bool flag(const json& j, const char* key, bool dflt, const std::string& origin, bool* defaulted = nullptr) {
  if (!present(j, key)) {
    if (defaulted) *defaulted = true;
    return dflt;
  }
  if (!j[key].is_boolean())
    throw UsageError(fmt::format("{}: '{}' must be true or false, got {}", origin, key, j[key].dump()));
  return j[key].get<bool>();
}

// A count of heads: a positive integer.
int64_t heads_field(const json& j, const char* key, const std::string& origin) {
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    throw UsageError(fmt::format("{}: '{}' must be a positive integer (a number of key/value heads), got {}", origin,
                                 key, v.dump()));
  return v.get<int64_t>();
}

// Spellings of "how many key/value heads" that other families use, with what they mean there.
struct KvSpelling {
  const char* key;
  const char* meaning;
};
constexpr KvSpelling kOtherSpellings[] = {
    {"num_kv_heads", "the number of key/value heads (Falcon, OpenELM)"},
    {"n_head_kv", "the number of key/value heads (Falcon's RefinedWeb configs)"},
    {"n_kv_heads", "the number of key/value heads"},
    {"num_query_groups", "the number of key/value heads (Megatron's query groups)"},
    {"multi_query_group_num", "the number of key/value heads (ChatGLM's multi-query groups)"},
    {"kv_n_heads", "the number of key/value heads (MPT/DBRX attn_config)"},
    {"multi_query", "one key/value head shared by all query heads (gpt_bigcode, Falcon)"},
    {"multi_query_attention", "multi-query attention: key/value heads given by multi_query_group_num (ChatGLM)"},
    {"new_decoder_architecture", "Falcon's grouped-query layout (key/value heads from num_kv_heads)"},
};

// The key/value heads of a layout: equal to num_key_value_heads where the file also gives that.
void set_kv(ModelConfig& c, int64_t kv, const char* from, const std::string& origin) {
  if (c.num_key_value_heads != 0 && c.num_key_value_heads != kv)
    throw UsageError(fmt::format("{}: 'num_key_value_heads' = {} and {} ({} key/value heads) disagree", origin,
                                 c.num_key_value_heads, from, kv));
  c.num_key_value_heads = kv;
}

void read_gpt_bigcode(const json& j, ModelConfig& c, const std::string& origin) {
  // GPTBigCodeAttention: multi_query (class default true) = one key/value head of head_dim,
  // c_attn N = hidden + 2 x head_dim; else 3 x hidden.
  bool defaulted = false;
  const bool mq = flag(j, "multi_query", true, origin, &defaulted);
  if (defaulted) c.notes.push_back(fmt::format("{} has no 'multi_query': GPTBigCodeConfig's default true used", origin));
  set_kv(c, mq ? 1 : c.num_attention_heads, mq ? "'multi_query' = true" : "'multi_query' = false", origin);
}

void read_falcon(const json& j, ModelConfig& c, const std::string& origin) {
  // FalconAttention: new_decoder_architecture -> (heads + 2 x num_kv_heads) x head_dim, with
  // num_kv_heads = heads when null; else multi_query (class default true) -> hidden + 2 x head_dim;
  // else 3 x hidden.
  const bool new_arch = flag(j, "new_decoder_architecture", false, origin);
  bool mq_defaulted = false;
  const bool mq = flag(j, "multi_query", true, origin, &mq_defaulted);
  const char* kv_key = present(j, "num_kv_heads") ? "num_kv_heads" : present(j, "n_head_kv") ? "n_head_kv" : nullptr;
  if (present(j, "num_kv_heads") && present(j, "n_head_kv") &&
      heads_field(j, "num_kv_heads", origin) != heads_field(j, "n_head_kv", origin))
    throw UsageError(fmt::format("{}: 'num_kv_heads' and 'n_head_kv' disagree", origin));
  if (new_arch) {
    const int64_t kv = kv_key ? heads_field(j, kv_key, origin) : c.num_attention_heads;
    if (!kv_key)
      c.notes.push_back(fmt::format("{} has no 'num_kv_heads': FalconConfig's default (= num_attention_heads) used", origin));
    set_kv(c, kv, kv_key ? kv_key : "'new_decoder_architecture' without 'num_kv_heads'", origin);
    return;
  }
  if (kv_key && heads_field(j, kv_key, origin) != (mq ? 1 : c.num_attention_heads))
    throw UsageError(fmt::format(
        "{}: '{}' = {} but 'new_decoder_architecture' is false, where transformers' FalconAttention ignores it and "
        "uses {} key/value heads (multi_query = {}); refusing a file that says both", origin, kv_key,
        j[kv_key].dump(), mq ? int64_t{1} : c.num_attention_heads, mq ? "true" : "false"));
  if (mq_defaulted) c.notes.push_back(fmt::format("{} has no 'multi_query': FalconConfig's default true used", origin));
  set_kv(c, mq ? 1 : c.num_attention_heads, mq ? "'multi_query' = true" : "'multi_query' = false", origin);
}

// Sliding-window layers (sliding_window with use_sliding_window not false; layer_types when given):
// the linear layers are the same, attention's own matmuls are not. gemmscope plans full causal
// attention in every layer, so the file says so in a note rather than leave it unsaid.
void note_sliding_window(const json& j, ModelConfig& c, const std::string& origin) {
  if (!present(j, "sliding_window") || !j["sliding_window"].is_number_integer() ||
      j["sliding_window"].get<int64_t>() < 1)
    return;
  if (present(j, "use_sliding_window") && j["use_sliding_window"] == json(false)) return;
  std::string where = "in the layers its family applies it to";
  if (present(j, "layer_types") && j["layer_types"].is_array()) {
    size_t sliding = 0;
    for (const json& t : j["layer_types"])
      if (t == json("sliding_attention") || t == json("chunked_attention")) ++sliding;
    if (sliding == 0) return;
    where = fmt::format("in {} of {} layers (layer_types)", sliding, j["layer_types"].size());
  }
  c.notes.push_back(fmt::format(
      "{}: 'sliding_window' = {} {}: those layers attend over at most {} keys; attention's own matmuls and the step "
      "context's attention are planned as full causal attention over the sequence, more than those layers compute "
      "where the sequence is longer (not modelled; the linear layers are the same)",
      origin, j["sliding_window"].get<int64_t>(), where, j["sliding_window"].get<int64_t>()));
}

// Chunked attention (Llama 4: attention_chunk_size, default 8192, in the layers that use RoPE,
// every layer but each no_rope_layer_interval-th; layer_types or no_rope_layers when given): the
// linear layers are the same; attention within each chunk is the same as full causal attention up
// to the chunk's length and less beyond it.
void note_chunked_attention(const json& j, const std::string& type, ModelConfig& c, const std::string& origin) {
  const bool llama4 = type == "llama4_text";
  int64_t chunk = 0;
  if (present(j, "attention_chunk_size") && j["attention_chunk_size"].is_number_integer())
    chunk = j["attention_chunk_size"].get<int64_t>();
  else if (llama4 && !j.contains("attention_chunk_size"))
    chunk = 8192;  // Llama4TextConfig's default
  if (chunk < 1) return;
  int64_t chunked = 0, layers = c.num_hidden_layers;
  if (present(j, "layer_types") && j["layer_types"].is_array()) {
    layers = static_cast<int64_t>(j["layer_types"].size());
    for (const json& t : j["layer_types"]) chunked += t == json("chunked_attention");
  } else if (present(j, "no_rope_layers") && j["no_rope_layers"].is_array() && !j["no_rope_layers"].empty()) {
    for (const json& t : j["no_rope_layers"]) chunked += t == json(1);
  } else if (llama4) {
    int64_t interval = 4;  // Llama4TextConfig's no_rope_layer_interval
    if (present(j, "no_rope_layer_interval") && j["no_rope_layer_interval"].is_number_integer() &&
        j["no_rope_layer_interval"].get<int64_t>() > 0)
      interval = j["no_rope_layer_interval"].get<int64_t>();
    chunked = layers - layers / interval;
  }
  if (chunked <= 0) return;
  c.notes.push_back(fmt::format(
      "{}: 'attention_chunk_size' = {} in {} of {} layers (chunked attention): those layers attend within chunks of "
      "{} tokens; attention's own matmuls and the step context's attention are planned as full causal attention "
      "over the sequence, the same up to {} tokens and more than those layers compute beyond (the linear layers "
      "are the same)",
      origin, chunk, chunked, layers, chunk, chunk));
}

}  // namespace

void read_hf_attention_layout(const json& j, const std::string& type, ModelConfig& c, const std::string& origin) {
  note_sliding_window(j, c, origin);
  note_chunked_attention(j, type, c, origin);
  if (type == "gpt_bigcode") return read_gpt_bigcode(j, c, origin);
  if (type == "falcon") return read_falcon(j, c, origin);
  // Any other family: num_key_value_heads (already read) is the one spelling. Another spelling
  // that says something (a count, or true) is refused rather than planned as multi-head attention.
  for (const KvSpelling& s : kOtherSpellings) {
    if (!present(j, s.key) || j[s.key] == json(false)) continue;
    if (j[s.key].is_number_integer() && c.num_key_value_heads != 0 && j[s.key].get<int64_t>() == c.num_key_value_heads)
      continue;  // says the same as num_key_value_heads
    throw UsageError(fmt::format(
        "{}: field '{}' = {} means {}, which gemmscope does not read for model_type '{}' (it reads "
        "num_key_value_heads; multi_query for gpt_bigcode; num_kv_heads, new_decoder_architecture and multi_query "
        "for falcon); refusing rather than planning {} key/value heads",
        origin, s.key, j[s.key].dump(), s.meaning, type.empty() ? "(none)" : type,
        c.num_key_value_heads ? c.num_key_value_heads : c.num_attention_heads));
  }
}

}  // namespace gs

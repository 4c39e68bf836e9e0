#include "core/model_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace gs {

bool ModelOverrides::any_model_field() const {
  return hidden_size || intermediate_size || num_attention_heads || num_key_value_heads ||
         head_dim || num_hidden_layers || vocab_size || gated_mlp;
}

namespace {

ModelConfig make(std::string name, int64_t h, int64_t inter, int64_t heads, int64_t kv,
                 int64_t hd, int64_t layers, int64_t vocab, bool gated, int64_t mbs, int64_t seq) {
  ModelConfig c;
  c.name = std::move(name);
  c.hidden_size = h;
  c.intermediate_size = inter;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = hd;
  c.num_hidden_layers = layers;
  c.vocab_size = vocab;
  c.gated_mlp = gated;
  c.micro_batch_size = mbs;
  c.sequence_length = seq;
  return c;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"codonfm-5b", "the seed tutorial's 5B model (default): MHA, plain GELU MLP, batch 31x512",
       make("codonfm-5b", 4096, 16384, 32, 0, 0, 24, 0, false, 31, 512)},
      {"llama-3-8b", "Llama 3 8B: GQA 32/8 heads, SwiGLU, vocab 128256, batch 2x8192",
       make("llama-3-8b", 4096, 14336, 32, 8, 0, 32, 128256, true, 2, 8192)},
      {"llama-3-70b", "Llama 3 70B: GQA 64/8 heads, SwiGLU, vocab 128256, batch 1x8192",
       make("llama-3-70b", 8192, 28672, 64, 8, 0, 80, 128256, true, 1, 8192)},
      {"mistral-7b", "Mistral 7B: GQA 32/8 heads, SwiGLU, vocab 32000, batch 2x4096",
       make("mistral-7b", 4096, 14336, 32, 8, 0, 32, 32000, true, 2, 4096)},
      {"qwen2.5-7b", "Qwen2.5 7B: GQA 28/4 heads, SwiGLU, vocab 152064, batch 2x4096",
       make("qwen2.5-7b", 3584, 18944, 28, 4, 0, 28, 152064, true, 2, 4096)},
  };
  return p;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const auto& p : presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw UsageError(fmt::format("unknown model preset '{}' (known: {}; see --list-models)", name, known));
}

ModelConfig default_config() { return find_preset("codonfm-5b").config; }

namespace {

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = j.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw UsageError(fmt::format("{}: '{}' = {} is too large", origin, key, json_value_hint(v)));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9.0e18 && d == std::trunc(d)) return static_cast<int64_t>(d);
  }
  throw UsageError(fmt::format("{}: '{}' must be an integer, got {}", origin, key, json_value_hint(v)));
}

// A size read from config.json: an integer, > 0 (or >= 0 where 0 means "derive it").
int64_t json_size(const nlohmann::json& j, const char* key, const std::string& origin, bool allow_zero = false) {
  const int64_t v = json_int(j, key, origin);
  if (v < 0 || (!allow_zero && v == 0))
    throw UsageError(fmt::format("{}: '{}' must be {}, got {}", origin, key, allow_zero ? ">= 0" : "> 0", v));
  return v;
}

std::string json_string(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

ModelConfig parse_hf_config(const std::string& text, const std::string& origin) {
  // The input-file policy (input_file.hpp): depth limit while parsing, no trailing content.
  nlohmann::json j = parse_json_text(text, origin);
  if (!j.is_object()) throw UsageError(fmt::format("{}: expected a JSON object", origin));
  // Multimodal / nested configs (e.g. Llama 4, Gemma 3) keep the language model under text_config.
  if (!j.contains("hidden_size") && j.contains("text_config") && j["text_config"].is_object())
    j = std::move(j["text_config"]);
  ModelConfig c;
  const std::string type = json_string(j, "model_type");
  c.name = type.empty() ? std::string("config.json") : type;
  for (const char* req : {"hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers"})
    if (!j.contains(req) || j[req].is_null())
      throw UsageError(fmt::format("{}: missing required field '{}'", origin, req));
  c.hidden_size = json_size(j, "hidden_size", origin);
  c.intermediate_size = json_size(j, "intermediate_size", origin);
  c.num_attention_heads = json_size(j, "num_attention_heads", origin);
  c.num_hidden_layers = json_size(j, "num_hidden_layers", origin);
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null())
    c.num_key_value_heads = json_size(j, "num_key_value_heads", origin, true);
  if (j.contains("head_dim") && !j["head_dim"].is_null()) c.head_dim = json_size(j, "head_dim", origin, true);
  if (j.contains("vocab_size") && !j["vocab_size"].is_null()) c.vocab_size = json_size(j, "vocab_size", origin, true);
  // Gated MLPs: the activation name says it (silu/swiglu/geglu in the Llama/Mistral/Qwen
  // families), as do architectures that always gate. A GELU name alone does not: Gemma's
  // gelu_pytorch_tanh is gated (by architecture) but StarCoder2's and GPT-J's GELUs are not.
  std::string act;
  for (const char* key : {"hidden_act", "hidden_activation", "activation_function"})
    if (!(act = json_string(j, key)).empty()) break;
  const bool gated_act = act == "silu" || act == "swiglu" || act == "geglu" || act == "swish" || act == "reglu";
  const bool gated_arch = type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
                          type == "gemma" || type == "gemma2" || type == "gemma3_text" || type == "mixtral";
  c.gated_mlp = gated_act || gated_arch;
  c.micro_batch_size = kDefaultConfigMicroBatch;
  c.sequence_length = kDefaultConfigSequence;
  return c;
}

ModelConfig load_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("config file '{}' is a directory (pass the config.json inside it)", path));
  return parse_hf_config(read_input_file(path, "config file"), path);
}

void apply_overrides(ModelConfig& c, const ModelOverrides& o) {
  auto set = [](int64_t& dst, const std::optional<int64_t>& v) { if (v) dst = *v; };
  set(c.hidden_size, o.hidden_size);
  set(c.intermediate_size, o.intermediate_size);
  set(c.num_attention_heads, o.num_attention_heads);
  set(c.num_key_value_heads, o.num_key_value_heads);
  set(c.head_dim, o.head_dim);
  set(c.num_hidden_layers, o.num_hidden_layers);
  set(c.micro_batch_size, o.micro_batch_size);
  set(c.sequence_length, o.sequence_length);
  set(c.vocab_size, o.vocab_size);
  set(c.tensor_parallel, o.tensor_parallel);
  if (o.gated_mlp) c.gated_mlp = *o.gated_mlp;
  if (o.any_model_field() && c.name != "custom" && c.name.find("(modified)") == std::string::npos)
    c.name += " (modified)";
}

namespace {

// Largest dimension we accept: keeps every product of three dimensions (FLOPs = 2*m*k*n) and
// every element count inside int64 and inside cuBLASLt's 64-bit sizes.
constexpr int64_t kMaxDim = int64_t{1} << 24;  // 16,777,216

void positive(const char* flag, int64_t v, bool allow_zero = false) {
  if (v < 0 || (!allow_zero && v == 0))
    throw UsageError(fmt::format("--{} must be {}, got {}", flag, allow_zero ? ">= 0" : "> 0", v));
  if (v > kMaxDim)
    throw UsageError(fmt::format("--{} = {} is too large (limit {})", flag, v, kMaxDim));
}

}  // namespace

void validate(const ModelConfig& c) {
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads, /*allow_zero=*/true);
  positive("head_dim", c.head_dim, true);
  positive("num_hidden_layers", c.num_hidden_layers);
  positive("micro_batch_size", c.micro_batch_size);
  positive("sequence_length", c.sequence_length);
  positive("vocab_size", c.vocab_size, true);
  positive("tensor-parallel", c.tensor_parallel);
  if (c.tokens() > kMaxDim)
    throw UsageError(fmt::format("micro_batch_size x sequence_length = {} tokens is too large (limit {})",
                                 c.tokens(), kMaxDim));
  if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    throw UsageError(fmt::format(
        "num_attention_heads ({}) does not divide hidden_size ({}); pass --head_dim to set it explicitly",
        c.num_attention_heads, c.hidden_size));
  if (c.num_attention_heads % c.kv_heads() != 0)
    throw UsageError(fmt::format("num_key_value_heads ({}) does not divide num_attention_heads ({})",
                                 c.kv_heads(), c.num_attention_heads));
  const int64_t tp = c.tensor_parallel;
  if (tp > 1) {
    // Column-parallel QKV and MLP-up split N; row-parallel attention-out and MLP-down split K.
    if (c.num_attention_heads % tp != 0)
      throw UsageError(fmt::format("--tensor-parallel {} does not divide num_attention_heads ({})", tp,
                                   c.num_attention_heads));
    if (c.kv_heads() % tp != 0 && tp % c.kv_heads() != 0)
      throw UsageError(fmt::format(
          "--tensor-parallel {} and num_key_value_heads ({}) do not split evenly (one must divide the other)", tp,
          c.kv_heads()));
    if (c.intermediate_size % tp != 0)
      throw UsageError(fmt::format("--tensor-parallel {} does not divide intermediate_size ({})", tp,
                                   c.intermediate_size));
    if (c.vocab_size % tp != 0)
      throw UsageError(fmt::format("--tensor-parallel {} does not divide vocab_size ({})", tp, c.vocab_size));
  }
  const int64_t qkv_n = (c.num_attention_heads + 2 * c.kv_heads()) * c.head_dimension();
  if (qkv_n > kMaxDim || c.num_attention_heads * c.head_dimension() > kMaxDim)
    throw UsageError("num_attention_heads x head_dim is too large");
  if ((c.gated_mlp ? 2 : 1) * c.intermediate_size > kMaxDim)
    throw UsageError("the MLP-up output (2 x intermediate_size) is too large");
}

}  // namespace gs

#include "core/util/text_util.hpp"
#include "core/model/model_config.hpp"
#include "core/model/model_fields.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "core/model/attention_layout.hpp"
#include "core/model/moe_families.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/util/suggest.hpp"

namespace gs {

bool ModelOverrides::any_model_field() const {
  return hidden_size || intermediate_size || num_attention_heads || num_key_value_heads ||
         head_dim || num_hidden_layers || vocab_size || gated_mlp || moe.any_model_field();
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
  c.micro_batch_from = c.sequence_from = "preset " + c.name;
  return c;
}

// Experts: E routed, top-k, each expert's FFN size, shared experts, leading dense layers, and the
// expert-parallel layout of the model's training run with its source (published, or a stated typical one).
ModelConfig moe(ModelConfig c, int64_t experts, int64_t top_k, int64_t expert_ffn, int64_t shared, int64_t first_dense,
                int64_t ep, const char* ep_source) {
  c.moe.expert_parallel = ep;
  c.moe.parallel_source = ep_source;
  c.moe.num_experts = experts;
  c.moe.top_k = top_k;
  c.moe.expert_intermediate_size = expert_ffn;
  c.moe.shared_experts = shared;
  c.moe.first_dense_layers = first_dense;
  return c;
}

// A preset with a note its header prints (what the plan leaves out).
ModelConfig noted(ModelConfig c, std::string note) {
  c.notes.push_back(std::move(note));
  return c;
}

ModelConfig mla(ModelConfig c, int64_t q_lora, int64_t kv_lora, int64_t nope, int64_t rope, int64_t v) {
  c.mla = {q_lora, kv_lora, nope, rope, v};
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
      // Mixture-of-Experts models, numbers from their published config.json (docs/moe.md).
      {"mixtral-8x7b", "Mixtral 8x7B: 8 experts of 14336, top-2, GQA 32/8, vocab 32000, batch 1x4096",
       moe(make("mixtral-8x7b", 4096, 14336, 32, 8, 0, 32, 32000, true, 1, 4096), 8, 2, 14336, 0, 0, 8,
           "typical: Mistral published no training layout; EP 8 is the Megatron-LM Mixtral recipe's")},
      {"deepseek-v3", "DeepSeek-V3: MLA (q 1536, kv 512), 256 experts of 2048 + 1 shared, top-8, first 3 layers "
                      "dense (18432), vocab 129280, batch 1x4096",
       mla(moe(make("deepseek-v3", 7168, 18432, 128, 128, 0, 61, 129280, true, 1, 4096), 256, 8, 2048, 1, 3, 64,
               "published: DeepSeek-V3 technical report, 64-way expert parallelism across 8 nodes, no tensor "
               "parallelism"),
           1536, 512, 128, 64, 128)},
      {"qwen3-30b-a3b", "Qwen3-30B-A3B: 128 experts of 768, top-8, GQA 32/4, head_dim 128, vocab 151936, batch 1x4096",
       moe(make("qwen3-30b-a3b", 2048, 6144, 32, 4, 128, 48, 151936, true, 1, 4096), 128, 8, 768, 0, 0, 8,
           "typical: Qwen published no training layout; EP 8 (one node)")},
      {"qwen3-235b-a22b", "Qwen3-235B-A22B: 128 experts of 1536, top-8, GQA 64/4, head_dim 128, vocab 151936, "
                          "batch 1x4096",
       moe(make("qwen3-235b-a22b", 4096, 12288, 64, 4, 128, 94, 151936, true, 1, 4096), 128, 8, 1536, 0, 0, 8,
           "typical: Qwen published no training layout; EP 8 (one node)")},
      {"gpt-oss-120b", "gpt-oss-120b: 128 experts of 2880, top-4, GQA 64/8, head_dim 64, vocab 201088, batch 1x4096",
       noted(moe(make("gpt-oss-120b", 2880, 2880, 64, 8, 64, 36, 201088, true, 1, 4096), 128, 4, 2880, 0, 0, 8,
                 "typical: OpenAI published no training layout; EP 8 (one node)"),
             "sliding_window = 128 in 18 of 36 layers (alternating, as its config.json's layer_types): those layers "
             "attend over at most 128 keys; attention's own matmuls and the step context's attention are planned as "
             "full causal attention over the sequence, more than those layers compute (not modelled; the linear "
             "layers are the same)")},
  };
  return p;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  std::vector<std::string> names;
  for (const auto& p : presets()) {
    if (iequals(p.name, name)) return p;
    known += (known.empty() ? "" : ", ") + p.name;
    names.push_back(p.name);
  }
  throw UsageError(fmt::format("unknown model preset '{}'{} (known: {}; see --list-models)", clip_text(name, 80),
                               did_you_mean(name, names), known));
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

namespace {

// The published defaults of the transformers configuration classes (their __init__ arguments), used
// for fields a config.json leaves out. 0: no default (kv heads = heads, head_dim = hidden / heads,
// GPT-2's n_inner = 4 x n_embd).
struct FamilyDefaults {
  const char* model_type;
  const char* cls;
  int64_t hidden, intermediate, heads, kv_heads, head_dim, layers, vocab, max_positions;
};
constexpr FamilyDefaults kFamilies[] = {
    {"llama", "LlamaConfig", 4096, 11008, 32, 0, 0, 32, 32000, 2048},
    {"mistral", "MistralConfig", 4096, 14336, 32, 8, 0, 32, 32000, 131072},
    {"qwen2", "Qwen2Config", 4096, 22016, 32, 32, 0, 32, 151936, 32768},
    {"qwen3", "Qwen3Config", 4096, 22016, 32, 32, 128, 32, 151936, 32768},
    {"gemma", "GemmaConfig", 3072, 24576, 16, 16, 256, 28, 256000, 8192},
    {"gemma2", "Gemma2Config", 2304, 9216, 8, 4, 256, 26, 256000, 8192},
    {"gemma3_text", "Gemma3TextConfig", 2304, 9216, 8, 4, 256, 26, 262208, 131072},
    {"phi3", "Phi3Config", 3072, 8192, 32, 0, 0, 32, 32064, 4096},
    {"gpt2", "GPT2Config", 768, 0, 12, 0, 0, 12, 50257, 1024},
    // Key/value heads of these two come from their layout fields (attention_layout.hpp).
    {"gpt_bigcode", "GPTBigCodeConfig", 768, 0, 12, 0, 0, 12, 50257, 1024},
    {"falcon", "FalconConfig", 4544, 0, 71, 0, 0, 32, 65024, 2048},
    // Families with experts (their expert and MLA fields: moe_families.hpp). DeepSeek's head_dim is
    // MLA's (not used); Llama 4's intermediate_size is its experts' width.
    {"deepseek_v2", "DeepseekV2Config", 4096, 11008, 32, 0, 0, 32, 32000, 2048},
    {"deepseek_v3", "DeepseekV3Config", 7168, 18432, 128, 128, 0, 61, 129280, 4096},
    {"qwen2_moe", "Qwen2MoeConfig", 2048, 5632, 16, 16, 0, 24, 151936, 32768},
    {"qwen3_moe", "Qwen3MoeConfig", 2048, 6144, 32, 4, 0, 24, 151936, 32768},
    {"mixtral", "MixtralConfig", 4096, 14336, 32, 8, 0, 32, 32000, 131072},
    {"olmoe", "OlmoeConfig", 2048, 2048, 16, 0, 0, 16, 50304, 4096},
    {"gpt_oss", "GptOssConfig", 2880, 2880, 64, 8, 64, 36, 201088, 131072},
    {"llama4_text", "Llama4TextConfig", 5120, 8192, 40, 8, 128, 48, 202048, 131072},
};

const FamilyDefaults* family(const std::string& type) {
  for (const FamilyDefaults& f : kFamilies)
    if (type == f.model_type) return &f;
  return nullptr;
}

// The text model type of a multimodal wrapper whose text_config does not name its own.
std::string text_model_type(const std::string& outer) {
  if (outer == "gemma3") return "gemma3_text";
  if (outer == "llava" || outer == "llava_next") return "llama";
  if (outer == "mistral3") return "mistral";
  if (outer == "llama4") return "llama4_text";
  return {};
}

// "meta-llama/Llama-3.1-8B" from _name_or_path, else the directory holding the file
// ("models/Llama-3.1-8B/config.json" -> "Llama-3.1-8B"), else the file's own name without
// ".json" ("gpt2-medium.json" -> "gpt2-medium").
std::string model_base_name(const nlohmann::json& j, const std::string& origin) {
  std::string n = json_string(j, "_name_or_path");
  while (!n.empty() && n.back() == '/') n.pop_back();
  if (!n.empty()) return n;
  const std::filesystem::path p(origin);
  const std::string dir = p.parent_path().filename().string();
  if (p.filename() == "config.json" && !dir.empty() && dir != "." && dir != "..") return dir;
  return p.stem().string();
}

}  // namespace

ModelConfig parse_hf_config(const std::string& text, const std::string& origin_path) {
  const std::string origin = clip_text(origin_path);  // as messages quote it
  // The input-file policy (input_file.hpp): depth and size checked in linear time, no trailing content.
  nlohmann::json top = parse_json_text(text, origin);
  if (!top.is_object()) throw UsageError(fmt::format("{}: expected a JSON object", origin));
  nlohmann::json j = top;
  ModelConfig c;
  std::string type = json_string(j, "model_type");
  // Multimodal / nested configs (e.g. Llama 4, Gemma 3) keep the language model under text_config.
  if (!j.contains("hidden_size") && !j.contains("n_embd") && j.contains("text_config") && j["text_config"].is_object()) {
    j = j["text_config"];
    const std::string inner = json_string(j, "model_type");
    type = !inner.empty() ? inner : text_model_type(type);
    if (top.contains("vision_config") && !top["vision_config"].is_null())
      c.notes.push_back(fmt::format("{}: the language model (text_config) is planned; the vision encoder "
                                    "(vision_config) and its projector are not", origin));
  }
  const FamilyDefaults* fam = family(type);
  // GPT-2 names for the same fields (GPT2Config's attribute_map).
  auto key_of = [&](const char* hf, const char* gpt2) { return !j.contains(hf) && j.contains(gpt2) ? gpt2 : hf; };
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  // A field the file leaves out: the family's class default (noted), or an error.
  auto field = [&](const char* hf, const char* gpt2, int64_t FamilyDefaults::*dflt, bool required,
                   bool allow_zero) -> int64_t {
    const char* key = gpt2 ? key_of(hf, gpt2) : hf;
    if (present(key)) return json_size(j, key, origin, allow_zero);
    if (fam && fam->*dflt > 0) {
      c.notes.push_back(fmt::format("{} has no '{}': {}'s default {} used", origin, hf, fam->cls, fam->*dflt));
      return fam->*dflt;
    }
    // A required field the file lacks may still come from a flag: validate() refuses it if none does.
    if (required) c.missing_fields.push_back(hf);
    return 0;
  };
  c.hidden_size = field("hidden_size", "n_embd", &FamilyDefaults::hidden, true, false);
  c.num_attention_heads = field("num_attention_heads", "n_head", &FamilyDefaults::heads, true, false);
  c.num_hidden_layers = field("num_hidden_layers", "n_layer", &FamilyDefaults::layers, true, false);
  if (present("intermediate_size")) {
    c.intermediate_size = json_size(j, "intermediate_size", origin);
  } else if (type == "falcon") {  // FalconConfig: ffn_hidden_size, null or absent = 4 x hidden_size
    if (present("ffn_hidden_size")) {
      c.intermediate_size = json_size(j, "ffn_hidden_size", origin);
    } else {
      c.intermediate_size = checked_mul(4, c.hidden_size, origin + ": 4 x hidden_size (Falcon's ffn_hidden_size)");
      c.notes.push_back(fmt::format("{} has no 'ffn_hidden_size': FalconConfig's default 4 x hidden_size = {} used",
                                    origin, c.intermediate_size));
    }
  } else if (j.contains("n_inner") || type == "gpt2" || type == "gpt_bigcode") {
    // GPT-2 and GPTBigCode: n_inner null (or absent) = 4 x n_embd
    c.intermediate_size = present("n_inner") ? json_size(j, "n_inner", origin)
                                             : checked_mul(4, c.hidden_size, origin + ": 4 x n_embd (GPT-2's n_inner)");
  } else {
    c.intermediate_size = field("intermediate_size", nullptr, &FamilyDefaults::intermediate, true, false);
  }
  c.num_key_value_heads = field("num_key_value_heads", nullptr, &FamilyDefaults::kv_heads, false, true);
  read_hf_attention_layout(j, type, c, origin);  // other spellings: multi_query, num_kv_heads, ...
  c.head_dim = field("head_dim", nullptr, &FamilyDefaults::head_dim, false, true);
  const bool had_vocab = present("vocab_size");
  c.vocab_size = field("vocab_size", nullptr, &FamilyDefaults::vocab, false, true);
  if (!had_vocab && c.vocab_size == 0)
    c.notes.push_back(fmt::format("{} has no 'vocab_size': no LM head GEMMs (--vocab_size V adds them)", origin));
  // Gated MLPs: the activation name says it (silu/swiglu/geglu in the Llama/Mistral/Qwen
  // families), as do architectures that always gate. A GELU name alone does not: Gemma's
  // gelu_pytorch_tanh is gated (by architecture) but StarCoder2's and GPT-J's GELUs are not.
  std::string act;
  for (const char* key : {"hidden_act", "hidden_activation", "activation_function"})
    if (!(act = json_string(j, key)).empty()) break;
  const bool gated_act = act == "silu" || act == "swiglu" || act == "geglu" || act == "swish" || act == "reglu";
  const bool gated_arch = type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
                          type == "gemma" || type == "gemma2" || type == "gemma3_text" || type == "mixtral" ||
                          type == "phi3" || moe_family(type) != nullptr;  // every expert family's MLPs gate
  c.gated_mlp = gated_act || gated_arch;
  // The name tells two models apart in reports, charts and compare: where the file says it came
  // from, its family and sizes ("Llama-3.1-8B [llama, hidden 4096, 32 layers]").
  auto size_or_flag = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string("?"); };
  c.name = fmt::format("{} [{}hidden {}, {} layers]", clip_text(model_base_name(top, origin_path), 80),
                       type.empty() ? "" : clip_text(type, 40) + ", ", size_or_flag(c.hidden_size), size_or_flag(c.num_hidden_layers));
  c.source = origin_path;
  parse_hf_moe_mla(j, type, c, origin);  // experts, MLA; refuses fields that change layers we do not model
  // A config.json has no batch: these are gemmscope's own defaults, and say so.
  c.micro_batch_size = kDefaultConfigMicroBatch;
  c.micro_batch_from = "gemmscope default";
  c.sequence_length = kDefaultConfigSequence;
  c.sequence_from = "gemmscope default";
  // A model trained on shorter sequences than the default is planned at its own maximum: the
  // file's, or without the field its class's default (LlamaConfig 2048, GPT2Config 1024), noted
  // like the other class defaults.
  int64_t max_pos = 0;
  std::string max_from;
  for (const char* key : {"max_position_embeddings", "n_positions"}) {
    if (!present(key) || !j[key].is_number_integer()) continue;
    max_pos = j[key].get<int64_t>();
    max_from = fmt::format("config.json {}", key);
    break;
  }
  const bool class_default = fam && !present("max_position_embeddings") && !present("n_positions");
  if (class_default) {
    max_pos = fam->max_positions;
    max_from = fmt::format("{} default max_position_embeddings", fam->cls);
  }
  if (max_pos > 0 && max_pos < c.sequence_length) {
    if (class_default)
      c.notes.push_back(fmt::format("{} has no '{}': {}'s default {} used", origin,
                                    type == "gpt2" ? "n_positions" : "max_position_embeddings", fam->cls, max_pos));
    c.sequence_length = max_pos;
    c.sequence_from = max_from;
  }
  return c;
}

ModelConfig load_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("config file '{}' is a directory (pass the config.json inside it)", clip_text(path)));
  return parse_hf_config(read_input_file(path, "config file"), path);
}

void apply_overrides(ModelConfig& c, const ModelOverrides& o) {
  // A flag fills a required field the config.json lacks.
  const std::pair<const char*, const std::optional<int64_t>*> fills[] = {
      {"hidden_size", &o.hidden_size}, {"intermediate_size", &o.intermediate_size},
      {"num_attention_heads", &o.num_attention_heads}, {"num_hidden_layers", &o.num_hidden_layers}};
  for (const auto& [name, v] : fills)
    if (v->has_value()) std::erase(c.missing_fields, std::string(name));
  // The name showed a size the file lacks as "?": the flag's value now.
  auto fill_name = [&c](const std::string& unknown, const std::string& known) {
    if (const size_t at = c.name.find(unknown); at != std::string::npos) c.name.replace(at, unknown.size(), known);
  };
  if (o.hidden_size) fill_name("hidden ?,", fmt::format("hidden {},", *o.hidden_size));
  if (o.num_hidden_layers) fill_name(", ? layers]", fmt::format(", {} layers]", *o.num_hidden_layers));
  // Every integer field a flag gives, the MoE and MLA ones too: the model-field table.
  for (const ModelField& f : model_fields())
    if (const std::optional<int64_t>& v = f.given_in(o)) f.value(c) = *v;
  if (o.micro_batch_size) c.micro_batch_from = "--micro_batch_size";
  if (o.sequence_length) c.sequence_from = "--sequence_length";
  if (o.gated_mlp) c.gated_mlp = *o.gated_mlp;
  apply_moe_overrides(c, o.moe);
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
  if (!c.missing_fields.empty())
    throw UsageError(fmt::format("{}: missing required field '{}' (pass --{} to give it)",
                                 c.source.empty() ? std::string("config") : c.source, c.missing_fields.front(),
                                 c.missing_fields.front()));
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads, /*allow_zero=*/true);
  positive("head_dim", c.head_dim, true);
  positive("num_hidden_layers", c.num_hidden_layers);
  if (c.num_hidden_layers > kMaxLayers)
    throw UsageError(fmt::format("--num_hidden_layers = {} is too large (limit {} layers)", c.num_hidden_layers, kMaxLayers));
  positive("micro_batch_size", c.micro_batch_size);
  positive("sequence_length", c.sequence_length);
  positive("vocab_size", c.vocab_size, true);
  positive("tensor-parallel", c.tensor_parallel);
  positive("make-vocab-size-divisible-by", c.vocab_divisible_by, true);
  if (padded_vocab(c) > kMaxDim) throw UsageError(fmt::format("the padded vocabulary {} is too large", padded_vocab(c)));
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
  const int64_t qkv_n = (c.num_attention_heads + 2 * c.kv_heads()) * c.head_dimension();
  if (qkv_n > kMaxDim || c.num_attention_heads * c.head_dimension() > kMaxDim)
    throw UsageError("num_attention_heads x head_dim is too large");
  if ((c.gated_mlp ? 2 : 1) * c.intermediate_size > kMaxDim)
    throw UsageError("the MLP-up output (2 x intermediate_size) is too large");
  validate_moe_mla(c);
}

}  // namespace gs

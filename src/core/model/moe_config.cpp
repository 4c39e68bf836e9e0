#include "core/util/text_util.hpp"
#include "core/model/moe_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/model/model_config.hpp"
#include "core/model/moe_families.hpp"

namespace gs {

bool MoeOverrides::any_model_field() const {
  return num_experts || top_k || expert_intermediate_size || shared_experts || shared_expert_intermediate_size ||
         first_dense_layers || layer_freq || q_lora_rank || kv_lora_rank || qk_nope_head_dim || qk_rope_head_dim ||
         v_head_dim;
}

int64_t expert_ffn(const ModelConfig& c) {
  return c.moe.expert_intermediate_size ? c.moe.expert_intermediate_size : c.intermediate_size;
}

int64_t shared_ffn_total(const ModelConfig& c) {
  const int64_t each = c.moe.shared_expert_intermediate_size ? c.moe.shared_expert_intermediate_size : expert_ffn(c);
  return c.moe.shared_experts * each;
}

namespace {

// The rules of is_moe_layer, given whether layer i is in the dense-layer list.
bool moe_by_rule(const MoeConfig& m, int64_t i, bool listed_dense) {
  if (!m.enabled() || i < m.first_dense_layers || listed_dense) return false;
  if (m.layer_freq > 1 && i % m.layer_freq != 0) return false;
  if (m.sparse_step > 1 && (i + 1) % m.sparse_step != 0) return false;
  return true;
}

}  // namespace

bool is_moe_layer(const ModelConfig& c, int64_t i) {
  // O(log n) in the list: a linear search per layer cost O(layers x list).
  return moe_by_rule(c.moe, i, c.moe.dense_layer_list.count(i) > 0);
}

int64_t moe_layer_count(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (!m.enabled() || c.num_hidden_layers <= 0) return 0;
  if (m.layer_freq <= 1 && m.sparse_step <= 1) {
    // Every layer from first_dense_layers on, less those listed dense: no walk over the layers
    // (summaries count them per run, and a fleet file holds thousands of runs).
    const int64_t first = std::clamp<int64_t>(m.first_dense_layers, 0, c.num_hidden_layers);
    const auto lo = m.dense_layer_list.lower_bound(first), hi = m.dense_layer_list.lower_bound(c.num_hidden_layers);
    return c.num_hidden_layers - first - static_cast<int64_t>(std::distance(lo, hi));
  }
  // The sorted list walked beside the layers: one pass, no lookup per layer (plans and the whole
  // step count a model's MoE layers many times; 65536 layers with 32768 listed took ~5 ms a count).
  int64_t n = 0;
  auto dense = c.moe.dense_layer_list.begin();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    while (dense != c.moe.dense_layer_list.end() && *dense < i) ++dense;
    n += moe_by_rule(c.moe, i, dense != c.moe.dense_layer_list.end() && *dense == i);
  }
  return n;
}

namespace {

using nlohmann::json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A non-negative integer field (JSON integers, or floats with an integral value as HF writes
// some); anything else is refused with the field named.
int64_t field_int(const json& j, const char* key, const std::string& origin, int64_t min_value) {
  const json& v = j.at(key);
  int64_t x = 0;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw UsageError(fmt::format("{}: '{}' = {} is too large", origin, key, json_value_hint(v)));
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) && std::fabs(v.get<double>()) < 9.0e18 &&
             v.get<double>() == std::trunc(v.get<double>())) {
    x = static_cast<int64_t>(v.get<double>());
  } else {
    throw UsageError(fmt::format("{}: '{}' must be an integer, got {}", origin, key, json_value_hint(v)));
  }
  if (x < min_value) throw UsageError(fmt::format("{}: '{}' must be >= {}, got {}", origin, key, min_value, x));
  return x;
}

// The first of `keys` present (non-null), checking that every other spelling present agrees.
std::optional<int64_t> one_of(const json& j, std::initializer_list<const char*> keys, const std::string& origin,
                              int64_t min_value, const char** which = nullptr) {
  std::optional<int64_t> v;
  const char* first = nullptr;
  for (const char* k : keys) {
    if (!present(j, k)) continue;
    const int64_t x = field_int(j, k, origin, min_value);
    if (v && *v != x)
      throw UsageError(fmt::format("{}: '{}' = {} and '{}' = {} disagree", origin, first, *v, k, x));
    if (!v) { v = x; first = k; }
  }
  if (which) *which = first;
  return v;
}

// A field's value for a message: short, never a whole nested object.
std::string json_hint(const json& v) {
  const std::string d = v.dump();
  return d.size() <= 40 ? d : d.substr(0, 37) + "...";
}

std::string lower(std::string_view s) { return ascii_lower(s); }

// Fields gemmscope reads, or knows to leave the linear layers' shapes alone (router scoring and
// losses, group-limited routing, inference-time expert placement, attention variants).
const char* const kKnownFields[] = {
    "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "experts_per_token",
    "moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size", "first_k_dense_replace",
    "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    // routing and its losses: which experts a token picks, not the GEMM shapes
    "norm_topk_prob", "router_aux_loss_coef", "output_router_logits", "router_jitter_noise", "routed_scaling_factor",
    "topk_method", "topk_group", "n_group", "scoring_func", "aux_loss_alpha", "seq_aux", "ep_size",
    "num_nextn_predict_layers", "router_z_loss_coef", "moe_aux_loss_coeff", "moe_z_loss_coeff",
    // layer_types is checked by value below
    "layer_types",
};

// Substrings of field names that change the linear layers in a way not modelled here, each with
// what such a field means. Parallel residual layouts (Falcon's parallel_attn, GPT-NeoX's
// use_parallel_residual) are not among them: attention and MLP read the same input, the GEMMs are
// the same.
struct Suspect {
  const char* part;
  const char* meaning;
};
constexpr Suspect kSuspect[] = {
    {"expert", "a mixture-of-experts layout"},
    {"moe", "a mixture-of-experts layout"},
    {"router_", "a mixture-of-experts router"},
    {"num_local", "a number of local experts"},
    {"lora", "low-rank (latent) projections"},
    {"mamba", "Mamba (state-space) layers in place of attention"},
    {"ssm", "state-space layers in place of attention"},
    {"linear_attn", "linear-attention layers"},
    {"linear_key", "linear-attention layers"},
    {"linear_value", "linear-attention layers"},
    {"linear_num", "linear-attention layers"},
    {"linear_conv", "linear-attention layers with a convolution"},
    {"ffn_config", "a nested FFN description (DBRX's experts)"},
    {"attn_layer_period", "attention only in some layers (Jamba)"},
    {"attn_layer_offset", "attention only in some layers (Jamba)"},
    {"interleave", "layers of two kinds interleaved"},
    {"intermediate_size_", "FFN sizes that differ between layers"},
    {"hybrid", "a hybrid of layer kinds"},
    {"index_n_heads", "a sparse-attention indexer with its own projections (DeepSeek-V3.2)"},
    {"index_head_dim", "a sparse-attention indexer with its own projections (DeepSeek-V3.2)"},
    {"block_sparse", "block-sparse layers"},
    {"add_cross_attention", "a cross-attention block in every layer (encoder-decoder use)"},
};

void refuse_unmodelled(const json& j, const MoeFamily* fam, const std::string& origin) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = lower(it.key());
    if (std::find_if(std::begin(kKnownFields), std::end(kKnownFields), [&](const char* k) { return key == k; }) !=
        std::end(kKnownFields))
      continue;
    if (fam && moe_family_reads(*fam, key)) continue;  // the family's own layout fields (Llama 4's)
    for (const Suspect& s : kSuspect)
      if (key.find(s.part) != std::string::npos && !it.value().is_null() && it.value() != json(false) &&
          it.value() != json(0))
        throw UsageError(fmt::format(
            "{}: field '{}' = {} means {}, which changes the model's linear layers in a way gemmscope does not model; "
            "refusing rather than planning it wrong (see docs/config-json.md)",
            origin, clip_text(it.key(), 80), json_hint(it.value()), s.meaning));
  }
  if (present(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array()) throw UsageError(fmt::format("{}: 'layer_types' must be a list, got {}", origin, json_value_hint(lt)));
    for (const json& t : lt) {
      const std::string* s = t.is_string() ? &t.get_ref<const std::string&>() : nullptr;
      if (!s || (*s != "full_attention" && *s != "sliding_attention" && *s != "attention" && *s != "chunked_attention"))
        throw UsageError(fmt::format(
            "{}: 'layer_types' has a layer of type {}, which gemmscope does not model (only attention layers); "
            "refusing rather than planning it as attention", origin,
            s ? "'" + clip_text(*s, 80) + "'" : json_value_hint(t)));
    }
  }
}

}  // namespace

namespace {

// Fills a field from the family's default, with a note naming the class.
void note_default(ModelConfig& c, const std::string& origin, const MoeFamily& fam, const char* key, int64_t value) {
  c.notes.push_back(fmt::format("{} has no '{}': {}'s default {} used", origin, key, fam.cls, value));
}

// A present field that the family's model does not read: transformers ignores it, and so does
// the plan, said in a note. True when the field may be read.
bool family_reads(const json& j, const MoeFamily* fam, const char* key, ModelConfig& c, const std::string& origin) {
  if (!fam || moe_family_reads(*fam, key)) return true;
  if (present(j, key))
    c.notes.push_back(fmt::format("{}: '{}' = {} is not read by transformers' {} model; ignored", origin, key,
                                  json_hint(j[key]), fam->cls));
  return false;
}

// A layer list of config.json (mlp_only_layers, moe_layers): indices from 0 to layers - 1.
std::set<int64_t> layer_list(const json& j, const char* key, const ModelConfig& c, const std::string& origin) {
  const json& l = j[key];
  if (!l.is_array())
    throw UsageError(fmt::format("{}: '{}' must be a list of layer indices, got {}", origin, key, json_value_hint(l)));
  if (l.size() > static_cast<size_t>(std::max<int64_t>(c.num_hidden_layers, 0)))
    throw UsageError(fmt::format("{}: '{}' lists {} layers, more than the model's {}", origin, key, l.size(),
                                 c.num_hidden_layers));
  std::set<int64_t> out;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!l[i].is_number_integer() || l[i].get<int64_t>() < 0 ||
        (c.num_hidden_layers > 0 && l[i].get<int64_t>() >= c.num_hidden_layers))
      throw UsageError(fmt::format("{}: '{}' item {} must be a layer index from 0 to {}, got {}", origin, key, i,
                                   c.num_hidden_layers - 1, json_value_hint(l[i])));
    out.insert(l[i].get<int64_t>());
  }
  return out;
}

// The expert FFN widths: the routed experts', the shared experts', and (Llama 4) the dense MLP's.
void read_expert_widths(const json& j, const MoeFamily* fam, const std::string& type, ModelConfig& c,
                        const std::string& origin) {
  MoeConfig& m = c.moe;
  if (fam && fam->width == ExpertWidth::Intermediate) {
    family_reads(j, fam, "moe_intermediate_size", c, origin);  // a note when present: the experts are intermediate_size
  } else if (present(j, "moe_intermediate_size")) {
    m.expert_intermediate_size = field_int(j, "moe_intermediate_size", origin, 1);
  } else if (fam) {
    m.expert_intermediate_size = fam->moe_intermediate;
    note_default(c, origin, *fam, "moe_intermediate_size", fam->moe_intermediate);
  } else {
    c.notes.push_back(fmt::format(
        "{} has no 'moe_intermediate_size' and its model_type '{}' is not a family gemmscope knows the defaults of: "
        "each expert planned as wide as intermediate_size ({}), as Mixtral's are (--moe-intermediate-size sets it)",
        origin, type.empty() ? "(none)" : clip_text(type, 40), c.intermediate_size));
  }
  if (family_reads(j, fam, "n_shared_experts", c, origin)) {
    if (present(j, "n_shared_experts")) m.shared_experts = field_int(j, "n_shared_experts", origin, 0);
    else if (fam && fam->shared_experts > 0 && !j.contains("n_shared_experts")) {  // null: none
      m.shared_experts = fam->shared_experts;
      note_default(c, origin, *fam, "n_shared_experts", fam->shared_experts);
    }
  }
  if (family_reads(j, fam, "shared_expert_intermediate_size", c, origin)) {
    std::optional<int64_t> s;
    if (present(j, "shared_expert_intermediate_size")) {
      s = field_int(j, "shared_expert_intermediate_size", origin, 0);
    } else if (fam && fam->shared_expert_intermediate > 0) {
      s = fam->shared_expert_intermediate;
      note_default(c, origin, *fam, "shared_expert_intermediate_size", *s);
    }
    if (s && *s > 0) {
      // Qwen2-MoE: one shared expert of this size (its sigmoid gate, hidden -> 1, is noted below).
      m.shared_expert_intermediate_size = *s;
      if (m.shared_experts == 0) m.shared_experts = 1;
      c.notes.push_back("the shared expert's gate (hidden -> 1, Qwen2-MoE's shared_expert_gate) is not in the plan: "
                        "2 x tokens x hidden FLOPs per pass");
    }
  }
  if (fam && fam->one_shared_expert) m.shared_experts = 1;  // Llama 4: as wide as a routed expert
  if (fam && fam->dense_mlp > 0) {
    // Llama 4: intermediate_size is the experts' width; the dense layers' MLP is intermediate_size_mlp.
    m.expert_intermediate_size = c.intermediate_size;
    if (present(j, "intermediate_size_mlp")) {
      c.intermediate_size = field_int(j, "intermediate_size_mlp", origin, 1);
    } else {
      c.intermediate_size = fam->dense_mlp;
      if (moe_layer_count(c) < c.num_hidden_layers) note_default(c, origin, *fam, "intermediate_size_mlp", fam->dense_mlp);
    }
  }
}

// Which layers have experts: DeepSeek's leading dense layers and layer frequency, Qwen's sparse step
// and dense-layer list, Llama 4's interleave step and MoE-layer list.
void read_moe_layers(const json& j, const MoeFamily* fam, ModelConfig& c, const std::string& origin) {
  MoeConfig& m = c.moe;
  if (family_reads(j, fam, "first_k_dense_replace", c, origin)) {
    if (present(j, "first_k_dense_replace")) m.first_dense_layers = field_int(j, "first_k_dense_replace", origin, 0);
    else if (fam && fam->first_dense > 0) {
      m.first_dense_layers = fam->first_dense;
      note_default(c, origin, *fam, "first_k_dense_replace", fam->first_dense);
    }
  }
  if (family_reads(j, fam, "moe_layer_freq", c, origin) && present(j, "moe_layer_freq")) {
    if (!j["moe_layer_freq"].is_number())
      throw UsageError(fmt::format("{}: 'moe_layer_freq' must be an integer (a per-layer pattern is not modelled), "
                                   "got {}", origin, json_value_hint(j["moe_layer_freq"])));
    m.layer_freq = field_int(j, "moe_layer_freq", origin, 1);
  }
  if (family_reads(j, fam, "decoder_sparse_step", c, origin) && present(j, "decoder_sparse_step"))
    m.sparse_step = field_int(j, "decoder_sparse_step", origin, 1);
  if (family_reads(j, fam, "mlp_only_layers", c, origin) && present(j, "mlp_only_layers"))
    m.dense_layer_list = layer_list(j, "mlp_only_layers", c, origin);
  // Llama 4: MoE in layers step-1, 2 step-1, ... (Qwen's sparse-step rule), or the layers moe_layers lists.
  if (family_reads(j, fam, "interleave_moe_layer_step", c, origin) && present(j, "interleave_moe_layer_step"))
    m.sparse_step = field_int(j, "interleave_moe_layer_step", origin, 1);
  if (family_reads(j, fam, "moe_layers", c, origin) && present(j, "moe_layers")) {
    const std::set<int64_t> moe = layer_list(j, "moe_layers", c, origin);
    m.sparse_step = 1;  // moe_layers overrides interleave_moe_layer_step (Llama4TextConfig)
    m.dense_layer_list.clear();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      if (!moe.count(i)) m.dense_layer_list.insert(i);
  }
}

// Multi-head Latent Attention: kv_lora_rank makes the attention latent; q_lora_rank null = a plain
// q projection. A DeepSeek family's attention is always MLA, its fields' defaults the class's.
void read_mla(const json& j, const MoeFamily* fam, ModelConfig& c, const std::string& origin) {
  MlaConfig& a = c.mla;
  if (fam && fam->mla) {
    const MlaDefaults& d = *fam->mla;
    auto rank = [&](const char* key, int64_t dflt) -> int64_t {
      if (present(j, key)) return field_int(j, key, origin, 1);
      if (j.contains(key))
        throw UsageError(fmt::format("{}: '{}' is null, but {}'s attention (Multi-head Latent Attention) needs it",
                                     origin, key, fam->cls));
      note_default(c, origin, *fam, key, dflt);
      return dflt;
    };
    a.kv_lora_rank = rank("kv_lora_rank", d.kv_lora_rank);
    a.qk_nope_head_dim = rank("qk_nope_head_dim", d.qk_nope_head_dim);
    a.qk_rope_head_dim = rank("qk_rope_head_dim", d.qk_rope_head_dim);
    a.v_head_dim = rank("v_head_dim", d.v_head_dim);
    if (present(j, "q_lora_rank")) a.q_lora_rank = field_int(j, "q_lora_rank", origin, 1);
    else if (!j.contains("q_lora_rank")) {  // null: a plain q projection
      a.q_lora_rank = d.q_lora_rank;
      note_default(c, origin, *fam, "q_lora_rank", d.q_lora_rank);
    }
    return;
  }
  if (present(j, "kv_lora_rank")) {
    a.kv_lora_rank = field_int(j, "kv_lora_rank", origin, 1);
    for (const char* key : {"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (!present(j, key))
        throw UsageError(fmt::format("{}: 'kv_lora_rank' is set (Multi-head Latent Attention) but '{}' is missing",
                                     origin, key));
    a.qk_nope_head_dim = field_int(j, "qk_nope_head_dim", origin, 1);
    a.qk_rope_head_dim = field_int(j, "qk_rope_head_dim", origin, 1);
    a.v_head_dim = field_int(j, "v_head_dim", origin, 1);
    if (present(j, "q_lora_rank")) a.q_lora_rank = field_int(j, "q_lora_rank", origin, 1);
  } else if (present(j, "q_lora_rank")) {
    throw UsageError(fmt::format("{}: 'q_lora_rank' without 'kv_lora_rank' is not a Multi-head Latent Attention "
                                 "config gemmscope knows",
                                 origin));
  }
}

}  // namespace

void parse_hf_moe_mla(const json& j, const std::string& type, ModelConfig& c, const std::string& origin) {
  const MoeFamily* fam = moe_family(type);
  refuse_unmodelled(j, fam, origin);
  MoeConfig& m = c.moe;
  const char* experts_key = nullptr;
  std::optional<int64_t> experts = one_of(j, {"n_routed_experts", "num_local_experts", "num_experts"}, origin, 0, &experts_key);
  const char* topk_key = nullptr;
  std::optional<int64_t> topk = one_of(j, {"num_experts_per_tok", "experts_per_token"}, origin, 0, &topk_key);
  if (!experts && fam) {  // the class's default expert count: its model has experts
    experts = fam->experts;
    experts_key = fam->experts_key;
    note_default(c, origin, *fam, fam->experts_key, fam->experts);
  }
  if (fam && fam->dense_mlp > 0 && experts && *experts == 0)  // its MoE layers would hold a shared expert alone
    throw UsageError(fmt::format("{}: '{}' = 0: a {} model without routed experts is not a layout gemmscope knows",
                                 origin, experts_key, fam->cls));
  if (experts && *experts > 0) {
    if (!topk && fam && fam->top_k > 0) {
      topk = fam->top_k;
      topk_key = "num_experts_per_tok";
      note_default(c, origin, *fam, "num_experts_per_tok", fam->top_k);
    }
    if (!topk)
      throw UsageError(fmt::format("{}: '{}' = {} but no 'num_experts_per_tok'{}: how many experts each token uses is "
                                   "unknown; pass --top-k",
                                   origin, experts_key, *experts,
                                   fam ? fmt::format(" ({} has no default for it)", fam->cls) : std::string()));
    m.num_experts = *experts;
    m.top_k = *topk;
    if (m.top_k < 1) throw UsageError(fmt::format("{}: '{}' must be >= 1 for a model with experts", origin, topk_key));
    read_moe_layers(j, fam, c, origin);  // before the widths: Llama 4's dense MLP note needs the MoE layers
    read_expert_widths(j, fam, type, c, origin);
    if (present(j, "num_nextn_predict_layers") && j["num_nextn_predict_layers"].is_number() &&
        j["num_nextn_predict_layers"].get<double>() > 0)
      c.notes.push_back(fmt::format(
          "num_nextn_predict_layers = {}: the multi-token-prediction module (an extra layer, a 2H -> H projection and a "
          "second LM head per module, used in training) is not in the plan", json_value_hint(j["num_nextn_predict_layers"])));
  } else if (topk && *topk > 0 && !experts) {
    throw UsageError(fmt::format("{}: '{}' = {} but no expert count ('num_experts', 'num_local_experts' or "
                                 "'n_routed_experts'); pass --num-experts",
                                 origin, topk_key, *topk));
  }
  read_mla(j, fam, c, origin);
}

void apply_moe_overrides(ModelConfig& c, const MoeOverrides& o) {
  MoeConfig& m = c.moe;
  if (o.expert_parallel) m.parallel_source = "--expert-parallel";
  if (o.routing) m.routing = *o.routing;
  if (o.capacity_factor) m.capacity_factor = *o.capacity_factor;
  // Expert flags on a model without experts would be ignored: refuse instead.
  if (!m.enabled()) {
    const char* given = o.top_k                             ? "--top-k"
                        : o.expert_intermediate_size        ? "--moe-intermediate-size"
                        : o.shared_experts                  ? "--shared-experts"
                        : o.shared_expert_intermediate_size ? "--shared-expert-intermediate-size"
                        : o.first_dense_layers              ? "--first-dense-layers"
                        : o.layer_freq                      ? "--moe-layer-freq"
                        : (o.expert_parallel && *o.expert_parallel != 1) ? "--expert-parallel"
                        : o.routing                         ? "--routing"
                        : o.capacity_factor                 ? "--capacity-factor"
                                                            : nullptr;
    if (given) throw UsageError(fmt::format("{} needs a model with experts (--num-experts, or a MoE preset/config)", given));
  }
  if (o.num_experts && *o.num_experts > 0 && m.top_k == 0)
    throw UsageError("--num-experts needs --top-k (experts per token)");
  if (!c.mla.enabled() && (o.q_lora_rank || o.qk_nope_head_dim || o.qk_rope_head_dim || o.v_head_dim))
    throw UsageError("the MLA flags (--q-lora-rank, --qk-nope-head-dim, ...) need --kv-lora-rank");
  if (o.kv_lora_rank && !(c.mla.qk_nope_head_dim && c.mla.qk_rope_head_dim && c.mla.v_head_dim) && *o.kv_lora_rank > 0)
    throw UsageError("--kv-lora-rank needs --qk-nope-head-dim, --qk-rope-head-dim and --v-head-dim");
}

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;

void in_range(const char* what, int64_t v, int64_t lo) {
  if (v < lo) throw UsageError(fmt::format("{} must be >= {}, got {}", what, lo, v));
  if (v > kMaxDim) throw UsageError(fmt::format("{} = {} is too large (limit {})", what, v, kMaxDim));
}

}  // namespace

void validate_moe_mla(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  const int64_t tp = c.tensor_parallel;
  in_range("--expert-parallel", m.expert_parallel, 1);
  if (m.enabled()) {
    in_range("--num-experts", m.num_experts, 1);
    if (m.num_experts > kMaxExperts)
      throw UsageError(fmt::format("--num-experts = {} is too large (limit {} experts)", m.num_experts, kMaxExperts));
    in_range("--top-k", m.top_k, 1);
    if (m.top_k > m.num_experts)
      throw UsageError(fmt::format("--top-k ({}) is larger than the number of experts ({})", m.top_k, m.num_experts));
    in_range("--moe-intermediate-size", expert_ffn(c), 1);
    in_range("--shared-experts", m.shared_experts, 0);
    in_range("--shared-expert-intermediate-size", m.shared_expert_intermediate_size, 0);
    in_range("--first-dense-layers", m.first_dense_layers, 0);
    if (m.first_dense_layers > c.num_hidden_layers)
      throw UsageError(fmt::format("--first-dense-layers ({}) exceeds num_hidden_layers ({})", m.first_dense_layers,
                                   c.num_hidden_layers));
    in_range("--moe-layer-freq", m.layer_freq, 1);
    in_range("decoder_sparse_step", m.sparse_step, 1);
    if (!m.dense_layer_list.empty() && (*m.dense_layer_list.begin() < 0 || *m.dense_layer_list.rbegin() >= c.num_hidden_layers))
      throw UsageError(fmt::format("mlp_only_layers must hold layer indices from 0 to {}", c.num_hidden_layers - 1));
    if (m.num_experts % m.expert_parallel != 0)
      throw UsageError(fmt::format("--expert-parallel {} does not divide the number of experts ({})", m.expert_parallel,
                                   m.num_experts));
    if (!(m.capacity_factor >= 0) || !std::isfinite(m.capacity_factor))
      throw UsageError("--capacity-factor must be a positive number");
    if ((c.gated_mlp ? 2 : 1) * std::max(expert_ffn(c), shared_ffn_total(c)) > kMaxDim)
      throw UsageError("the expert FFN up-projection output is too large");
    // Megatron's expert_tensor_parallel_size defaults to the tensor-parallel size: each expert's
    // FFN is split like the dense MLP (column-parallel up, row-parallel down).
    if (expert_ffn(c) % tp != 0)
      throw UsageError(fmt::format("--tensor-parallel {} does not divide the expert FFN size ({})", tp, expert_ffn(c)));
    if (shared_ffn_total(c) % tp != 0)
      throw UsageError(fmt::format("--tensor-parallel {} does not divide the shared-expert FFN size ({})", tp,
                                   shared_ffn_total(c)));
  } else if (m.expert_parallel != 1) {
    throw UsageError("--expert-parallel needs a model with experts");
  }
  const MlaConfig& a = c.mla;
  if (a.enabled() || a.q_lora_rank || a.qk_nope_head_dim || a.qk_rope_head_dim || a.v_head_dim) {
    in_range("--kv-lora-rank (kv_lora_rank)", a.kv_lora_rank, 1);
    in_range("--q-lora-rank (q_lora_rank)", a.q_lora_rank, 0);
    in_range("--qk-nope-head-dim (qk_nope_head_dim)", a.qk_nope_head_dim, 1);
    in_range("--qk-rope-head-dim (qk_rope_head_dim)", a.qk_rope_head_dim, 1);
    in_range("--v-head-dim (v_head_dim)", a.v_head_dim, 1);
    if (c.num_attention_heads * (a.qk_nope_head_dim + std::max(a.qk_rope_head_dim, a.v_head_dim)) > kMaxDim)
      throw UsageError("num_attention_heads x the MLA head dimensions is too large");
  }
}

}  // namespace gs

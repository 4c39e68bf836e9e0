// The transformers configuration classes' MoE and MLA defaults (core/model/moe_families.hpp): a
// field a config.json leaves out plans the class's default, with a note naming the field and the
// class; a layout field the family's model does not read is ignored, with a note.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/model/model_config.hpp"
#include "core/model/moe_families.hpp"
#include "core/plan/plan.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

const std::string kConfigs = std::string(GS_TEST_DATA_DIR) + "/configs/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The one note about `key` filled in from `cls`, or "".
std::string default_note(const ModelConfig& c, const std::string& key, const std::string& cls) {
  for (const std::string& n : c.notes)
    if (n.find("has no '" + key + "'") != std::string::npos && n.find(cls + "'s default") != std::string::npos) return n;
  return "";
}

// A fixture with `keys` removed (from text_config where it has one), parsed.
ModelConfig without(const std::string& file, const std::vector<std::string>& keys) {
  nlohmann::json j = nlohmann::json::parse(gs::test::slurp(kConfigs + file));
  nlohmann::json& t = j.contains("text_config") ? j["text_config"] : j;
  for (const std::string& k : keys) {
    EXPECT_TRUE(t.contains(k)) << file << " has no '" << k << "' to leave out";
    t.erase(k);
  }
  return parse_hf_config(j.dump(), file);
}

struct LeftOut {
  const char* file;
  std::vector<std::string> keys;  // removed together (two spellings of one field)
  const char* cls;
  std::function<int64_t(const ModelConfig&)> value;
  int64_t expected;
  bool noted = true;  // a default of 0 (none) changes nothing and says nothing
};

int64_t experts(const ModelConfig& c) { return c.moe.num_experts; }
int64_t top_k(const ModelConfig& c) { return c.moe.top_k; }
int64_t expert_width(const ModelConfig& c) { return expert_ffn(c); }
int64_t shared_total(const ModelConfig& c) { return shared_ffn_total(c); }
int64_t shared_count(const ModelConfig& c) { return c.moe.shared_experts; }
int64_t first_dense(const ModelConfig& c) { return c.moe.first_dense_layers; }
int64_t kv_lora(const ModelConfig& c) { return c.mla.kv_lora_rank; }
int64_t q_lora(const ModelConfig& c) { return c.mla.q_lora_rank; }
int64_t nope(const ModelConfig& c) { return c.mla.qk_nope_head_dim; }
int64_t rope(const ModelConfig& c) { return c.mla.qk_rope_head_dim; }
int64_t v_dim(const ModelConfig& c) { return c.mla.v_head_dim; }
int64_t dense_mlp(const ModelConfig& c) { return c.intermediate_size; }

}  // namespace

// Every MoE and MLA field of every family, left out of a real config.json one at a time: the
// class's default, and a note. DeepSeek-V2-Lite's own values differ from DeepseekV2Config's where
// it matters (moe_intermediate_size 1408 vs 1407, q_lora_rank null vs 1536, first_k_dense_replace
// 1 vs 0), so a default that only echoes the file would fail here.
TEST(MoeFamilies, EachFieldLeftOutTakesTheClassDefault) {
  const LeftOut cases[] = {
      {"deepseek_v2_lite.json", {"n_routed_experts"}, "DeepseekV2Config", experts, 64},
      {"deepseek_v2_lite.json", {"moe_intermediate_size"}, "DeepseekV2Config", expert_width, 1407},
      {"deepseek_v2_lite.json", {"n_shared_experts"}, "DeepseekV2Config", shared_count, 2},
      {"deepseek_v2_lite.json", {"first_k_dense_replace"}, "DeepseekV2Config", first_dense, 0, false},
      {"deepseek_v2_lite.json", {"kv_lora_rank"}, "DeepseekV2Config", kv_lora, 512},
      {"deepseek_v2_lite.json", {"q_lora_rank"}, "DeepseekV2Config", q_lora, 1536},
      {"deepseek_v2_lite.json", {"qk_nope_head_dim"}, "DeepseekV2Config", nope, 128},
      {"deepseek_v2_lite.json", {"qk_rope_head_dim"}, "DeepseekV2Config", rope, 64},
      {"deepseek_v2_lite.json", {"v_head_dim"}, "DeepseekV2Config", v_dim, 128},
      {"deepseek_v3.json", {"n_routed_experts"}, "DeepseekV3Config", experts, 256},
      {"deepseek_v3.json", {"num_experts_per_tok"}, "DeepseekV3Config", top_k, 8},
      {"deepseek_v3.json", {"moe_intermediate_size"}, "DeepseekV3Config", expert_width, 2048},
      {"deepseek_v3.json", {"n_shared_experts"}, "DeepseekV3Config", shared_count, 1},
      {"deepseek_v3.json", {"first_k_dense_replace"}, "DeepseekV3Config", first_dense, 3},
      {"deepseek_v3.json", {"kv_lora_rank"}, "DeepseekV3Config", kv_lora, 512},
      {"deepseek_v3.json", {"q_lora_rank"}, "DeepseekV3Config", q_lora, 1536},
      {"deepseek_v3.json", {"qk_nope_head_dim"}, "DeepseekV3Config", nope, 128},
      {"deepseek_v3.json", {"qk_rope_head_dim"}, "DeepseekV3Config", rope, 64},
      {"deepseek_v3.json", {"v_head_dim"}, "DeepseekV3Config", v_dim, 128},
      {"qwen2_moe_a2.7b.json", {"num_experts"}, "Qwen2MoeConfig", experts, 60},
      {"qwen2_moe_a2.7b.json", {"num_experts_per_tok"}, "Qwen2MoeConfig", top_k, 4},
      {"qwen2_moe_a2.7b.json", {"moe_intermediate_size"}, "Qwen2MoeConfig", expert_width, 1408},
      {"qwen2_moe_a2.7b.json", {"shared_expert_intermediate_size"}, "Qwen2MoeConfig", shared_total, 5632},
      {"qwen3_30b_a3b.json", {"num_experts"}, "Qwen3MoeConfig", experts, 128},
      {"qwen3_30b_a3b.json", {"num_experts_per_tok"}, "Qwen3MoeConfig", top_k, 8},
      {"qwen3_30b_a3b.json", {"moe_intermediate_size"}, "Qwen3MoeConfig", expert_width, 768},
      {"mixtral_8x7b.json", {"num_local_experts"}, "MixtralConfig", experts, 8},
      {"mixtral_8x7b.json", {"num_experts_per_tok"}, "MixtralConfig", top_k, 2},
      {"olmoe_1b_7b.json", {"num_experts"}, "OlmoeConfig", experts, 64},
      {"olmoe_1b_7b.json", {"num_experts_per_tok"}, "OlmoeConfig", top_k, 8},
      {"gpt_oss_120b.json", {"num_local_experts"}, "GptOssConfig", experts, 128},
      {"gpt_oss_120b.json", {"num_experts_per_tok", "experts_per_token"}, "GptOssConfig", top_k, 4},
      {"llama4_scout.json", {"num_local_experts"}, "Llama4TextConfig", experts, 16},
      {"llama4_scout.json", {"num_experts_per_tok"}, "Llama4TextConfig", top_k, 1},
      {"llama4_maverick.json", {"intermediate_size_mlp"}, "Llama4TextConfig", dense_mlp, 16384},
  };
  for (const LeftOut& t : cases) {
    const std::string what = std::string(t.file) + " without " + t.keys[0];
    const ModelConfig c = without(t.file, t.keys);
    EXPECT_EQ(t.value(c), t.expected) << what;
    const std::string note = default_note(c, t.keys[0], t.cls);
    if (t.noted)
      EXPECT_NE(note.find(std::to_string(t.expected)), std::string::npos) << what << ": no note naming the default";
    else
      EXPECT_EQ(note, "") << what;
    EXPECT_NO_THROW(build_model_plan(c)) << what;
  }
}

// The issue's two cases, end to end in the plan: a deepseek_v2 file without moe_intermediate_size
// plans experts of 1407, not intermediate_size (10944, 7.8x the FLOPs); a qwen2_moe file without
// shared_expert_intermediate_size keeps its shared expert.
TEST(MoeFamilies, FieldsLeftOutChangeThePlanAsTransformersWould) {
  const Plan ds = build_model_plan(without("deepseek_v2_lite.json", {"moe_intermediate_size"}));
  for (const Gemm& g : ds.gemms)
    if (g.op == Op::ExpertDown && g.pass == Pass::Fprop) EXPECT_EQ(g.k, 1407);
  const Plan qw = build_model_plan(without("qwen2_moe_a2.7b.json", {"shared_expert_intermediate_size"}));
  bool shared = false;
  for (const Gemm& g : qw.gemms)
    if (g.op == Op::SharedUp && g.pass == Pass::Fprop) shared = g.n == 2 * 5632;
  EXPECT_TRUE(shared);
}

// One fixture per family leaving out every MoE and MLA field with a default: the plan is the
// class's default model (DeepSeek-V3's defaults are DeepSeek-V3's published config), and one note
// per field filled in.
TEST(MoeFamilies, DefaultsFixtures) {
  {
    const ModelConfig d = load_hf_config(kConfigs + "deepseek_v3_defaults.json");
    const ModelConfig f = load_hf_config(kConfigs + "deepseek_v3.json");
    EXPECT_EQ(d.moe.num_experts, f.moe.num_experts);
    EXPECT_EQ(d.moe.top_k, f.moe.top_k);
    EXPECT_EQ(expert_ffn(d), expert_ffn(f));
    EXPECT_EQ(shared_ffn_total(d), shared_ffn_total(f));
    EXPECT_EQ(moe_layer_count(d), 58);
    EXPECT_EQ(d.mla.q_lora_rank, 1536);
    EXPECT_EQ(d.mla.kv_lora_rank, 512);
    for (const char* key : {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                            "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
                            "qk_rope_head_dim", "v_head_dim"})
      EXPECT_NE(default_note(d, key, "DeepseekV3Config"), "") << key;
  }
  {
    const ModelConfig c = load_hf_config(kConfigs + "deepseek_v2_defaults.json");
    EXPECT_EQ(c.moe.num_experts, 64);
    EXPECT_EQ(expert_ffn(c), 1407);
    EXPECT_EQ(shared_ffn_total(c), 2 * 1407);
    EXPECT_EQ(c.mla.q_lora_rank, 1536);
    EXPECT_EQ(moe_layer_count(c), 27);
  }
  struct Family {
    const char* file;
    const char* cls;
    const char* experts_key;
    int64_t experts, top_k, width, shared;
  };
  for (const Family& f : {Family{"qwen2_moe_defaults.json", "Qwen2MoeConfig", "num_experts", 60, 4, 1408, 5632},
                          Family{"qwen3_moe_defaults.json", "Qwen3MoeConfig", "num_experts", 128, 8, 768, 0},
                          Family{"mixtral_defaults.json", "MixtralConfig", "num_local_experts", 8, 2, 14336, 0},
                          Family{"olmoe_defaults.json", "OlmoeConfig", "num_experts", 64, 8, 1024, 0},
                          Family{"gpt_oss_defaults.json", "GptOssConfig", "num_local_experts", 128, 4, 2880, 0},
                          Family{"llama4_text_defaults.json", "Llama4TextConfig", "num_local_experts", 16, 1, 8192,
                                 8192}}) {
    const ModelConfig c = load_hf_config(kConfigs + f.file);
    EXPECT_EQ(c.moe.num_experts, f.experts) << f.file;
    EXPECT_EQ(c.moe.top_k, f.top_k) << f.file;
    EXPECT_EQ(expert_ffn(c), f.width) << f.file;
    EXPECT_EQ(shared_ffn_total(c), f.shared) << f.file;
    EXPECT_NE(default_note(c, f.experts_key, f.cls), "") << f.file;
    EXPECT_NE(default_note(c, "num_experts_per_tok", f.cls), "") << f.file;
    EXPECT_NO_THROW(build_model_plan(c)) << f.file;
  }
}

// DeepseekV2Config has no default for num_experts_per_tok (None): refused with the class named.
// An explicit null n_shared_experts means none (the class's "None"), q_lora_rank null a plain q
// projection; a null kv_lora_rank is refused (DeepSeek's attention needs it).
TEST(MoeFamilies, NoDefaultAndExplicitNulls) {
  const std::string err = error_of([] { without("deepseek_v2_lite.json", {"num_experts_per_tok"}); });
  EXPECT_NE(err.find("DeepseekV2Config has no default"), std::string::npos) << err;
  EXPECT_NE(err.find("--top-k"), std::string::npos) << err;
  nlohmann::json j = nlohmann::json::parse(gs::test::slurp(kConfigs + "deepseek_v2_lite.json"));
  EXPECT_TRUE(j["q_lora_rank"].is_null());
  EXPECT_EQ(parse_hf_config(j.dump(), "v2.json").mla.q_lora_rank, 0);  // null: plain q projection
  j["n_shared_experts"] = nullptr;
  EXPECT_EQ(parse_hf_config(j.dump(), "v2.json").moe.shared_experts, 0);
  j["kv_lora_rank"] = nullptr;
  EXPECT_NE(error_of([&] { parse_hf_config(j.dump(), "v2.json"); }).find("'kv_lora_rank' is null"),
            std::string::npos);
}

// A layout field another family reads is ignored by this family's model, said in a note; an unknown
// family with experts and no moe_intermediate_size plans intermediate_size, said in a note.
TEST(MoeFamilies, FieldsTheFamilyDoesNotReadAndUnknownFamilies) {
  nlohmann::json j = nlohmann::json::parse(gs::test::slurp(kConfigs + "mixtral_8x7b.json"));
  j["moe_intermediate_size"] = 1024;
  const ModelConfig c = parse_hf_config(j.dump(), "m.json");
  EXPECT_EQ(expert_ffn(c), 14336);  // MixtralExperts are intermediate_size wide
  bool ignored = false;
  for (const std::string& n : c.notes) ignored |= n.find("'moe_intermediate_size' = 1024 is not read") != std::string::npos;
  EXPECT_TRUE(ignored);
  const ModelConfig u = parse_hf_config(
      R"({"model_type":"somemoe","hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,
          "num_hidden_layers":4,"num_experts":8,"num_experts_per_tok":2})",
      "u.json");
  EXPECT_EQ(expert_ffn(u), 4096);
  bool generic = false;
  for (const std::string& n : u.notes) generic |= n.find("not a family gemmscope knows") != std::string::npos;
  EXPECT_TRUE(generic);
  EXPECT_EQ(moe_family("somemoe"), nullptr);
  ASSERT_NE(moe_family("qwen2_moe"), nullptr);
  EXPECT_TRUE(moe_family_reads(*moe_family("qwen2_moe"), "shared_expert_intermediate_size"));
  EXPECT_FALSE(moe_family_reads(*moe_family("mixtral"), "moe_intermediate_size"));
  EXPECT_TRUE(is_expert_layout_field("moe_layers"));
  EXPECT_FALSE(is_expert_layout_field("hidden_size"));
}

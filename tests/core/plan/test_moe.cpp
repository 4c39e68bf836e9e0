// Mixture-of-Experts and MLA: config.json parsing and refusals, presets, plans (shapes and FLOPs
// derived by hand here), routing generators, the runner over a MoE plan, JSON round trip, CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fmt/format.h>
#include <functional>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "core/recipes/grouped.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/plan/routing.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;
namespace fs = std::filesystem;

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

// The GEMM of `op` in `pass` (the test fails when it is missing or there twice).
const Gemm& find(const Plan& p, Op op, Pass pass) {
  const Gemm* hit = nullptr;
  int n = 0;
  for (const Gemm& g : p.gemms)
    if (g.op == op && g.pass == pass) { hit = &g; ++n; }
  EXPECT_EQ(n, 1) << to_string(op) << " " << to_string(pass);
  static Gemm none{};
  return hit ? *hit : none;
}

bool has(const Plan& p, Op op) {
  return std::any_of(p.gemms.begin(), p.gemms.end(), [&](const Gemm& g) { return g.op == op; });
}

void expect_shape(const Plan& p, Op op, int64_t m, int64_t k, int64_t n) {
  SCOPED_TRACE(to_string(op));
  const Gemm& f = find(p, op, Pass::Fprop);
  EXPECT_EQ(f.shape(), fmt::format("{}x{}x{}", m, k, n));
  EXPECT_EQ(find(p, op, Pass::Dgrad).shape(), fmt::format("{}x{}x{}", m, n, k));
  EXPECT_EQ(find(p, op, Pass::Wgrad).shape(), fmt::format("{}x{}x{}", n, m, k));
}

ModelConfig with_routing(ModelConfig c, const std::string& routing) {
  c.moe.routing = routing;
  return c;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("gs_moe_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

// ---- config.json ----

TEST(MoeConfig, DeepSeekV3FileIsMoeWithMla) {
  ModelConfig c = load_hf_config(kConfigs + "deepseek_v3.json");
  EXPECT_EQ(c.moe.num_experts, 256);
  EXPECT_EQ(c.moe.top_k, 8);
  EXPECT_EQ(expert_ffn(c), 2048);
  EXPECT_EQ(c.moe.shared_experts, 1);
  EXPECT_EQ(shared_ffn_total(c), 2048);
  EXPECT_EQ(c.moe.first_dense_layers, 3);
  EXPECT_EQ(moe_layer_count(c), 58);
  EXPECT_TRUE(c.mla.enabled());
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_TRUE(c.gated_mlp);
  // The multi-token-prediction module is said, not silently left out.
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes[0].find("num_nextn_predict_layers"), std::string::npos);
}

// DeepSeek-V3 at 1 x 4096 tokens, balanced routing: every shape and the step's FLOPs by hand.
TEST(MoePlan, DeepSeekV3ShapesAndFlops) {
  ModelConfig c = with_routing(load_hf_config(kConfigs + "deepseek_v3.json"), "balanced");
  const Plan p = build_model_plan(c);
  const int64_t T = 4096;
  EXPECT_FALSE(has(p, Op::Qkv));
  expect_shape(p, Op::QDown, T, 7168, 1536);
  expect_shape(p, Op::QUp, T, 1536, 128 * (128 + 64));
  expect_shape(p, Op::KvDown, T, 7168, 512 + 64);
  expect_shape(p, Op::KvUp, T, 512, 128 * (128 + 128));
  expect_shape(p, Op::AttnOut, T, 128 * 128, 7168);
  expect_shape(p, Op::MlpUp, T, 7168, 2 * 18432);
  expect_shape(p, Op::MlpDown, T, 18432, 7168);
  expect_shape(p, Op::Router, T, 7168, 256);
  expect_shape(p, Op::ExpertUp, T * 8, 7168, 2 * 2048);
  expect_shape(p, Op::ExpertDown, T * 8, 2048, 7168);
  expect_shape(p, Op::SharedUp, T, 7168, 2 * 2048);
  expect_shape(p, Op::SharedDown, T, 2048, 7168);
  EXPECT_EQ(find(p, Op::MlpUp, Pass::Fprop).scope, Scope::DenseLayer);
  EXPECT_EQ(find(p, Op::Router, Pass::Fprop).scope, Scope::MoeLayer);
  EXPECT_EQ(find(p, Op::QDown, Pass::Fprop).scope, Scope::Layer);
  // Grouped: Fprop and Dgrad along M, Wgrad along K; balanced = 32768 / 256 = 128 rows each.
  const Gemm& up = find(p, Op::ExpertUp, Pass::Fprop);
  EXPECT_EQ(up.group_dim, GroupDim::M);
  EXPECT_EQ(find(p, Op::ExpertDown, Pass::Dgrad).group_dim, GroupDim::M);
  EXPECT_EQ(find(p, Op::ExpertUp, Pass::Wgrad).group_dim, GroupDim::K);
  ASSERT_EQ(up.group.size(), 256u);
  EXPECT_TRUE(std::all_of(up.group.begin(), up.group.end(), [](int64_t r) { return r == 128; }));
  EXPECT_EQ(find(p, Op::Router, Pass::Fprop).group_dim, GroupDim::None);

  const double t = T;
  const double attention = 7168.0 * 1536 + 1536.0 * 24576 + 7168.0 * 576 + 512.0 * 32768 + 16384.0 * 7168;
  const double dense_mlp = 7168.0 * 36864 + 18432.0 * 7168;
  const double moe = 7168.0 * 256 + 8 * (7168.0 * 4096 + 2048.0 * 7168) + 7168.0 * 4096 + 2048.0 * 7168;
  const PlanFlops f = plan_flops(p);
  EXPECT_DOUBLE_EQ(f.fprop, 2 * t * (attention + dense_mlp));
  EXPECT_DOUBLE_EQ(f.moe_fprop, 2 * t * (attention + moe));
  EXPECT_DOUBLE_EQ(f.moe_wgrad, f.moe_fprop);
  EXPECT_EQ(f.moe_layers, 58);
  const double lm = 3 * 2 * t * 7168.0 * 129280;
  EXPECT_DOUBLE_EQ(f.full_model(61), 3 * 3 * 2 * t * (attention + dense_mlp) + 58 * 3 * 2 * t * (attention + moe) + lm);
}

TEST(MoePlan, DeepSeekV2LitePlainQProjectionAndTwoSharedExperts) {
  const Plan p = build_model_plan(with_routing(load_hf_config(kConfigs + "deepseek_v2_lite.json"), "balanced"));
  EXPECT_FALSE(has(p, Op::QDown));
  EXPECT_FALSE(has(p, Op::QUp));
  expect_shape(p, Op::QProj, 4096, 2048, 16 * 192);
  expect_shape(p, Op::SharedUp, 4096, 2048, 2 * 2 * 1408);
  expect_shape(p, Op::ExpertUp, 4096 * 6, 2048, 2 * 1408);
  EXPECT_EQ(p.moe_layers(), 26);
  EXPECT_EQ(p.dense_layers(), 1);
}

TEST(MoePlan, MixtralFileAndPresetAgree) {
  const Plan f = build_model_plan(load_hf_config(kConfigs + "mixtral_8x7b.json"));
  ModelConfig pc = find_preset("mixtral-8x7b").config;
  pc.moe.expert_parallel = 1;  // the file carries no layout; the preset's typical EP 8 is compared elsewhere
  const Plan p = build_model_plan(pc);
  EXPECT_EQ(f.moe_layers(), 32);
  EXPECT_EQ(f.dense_layers(), 0);
  EXPECT_FALSE(has(f, Op::MlpUp)) << "every layer has experts: no dense MLP";
  EXPECT_FALSE(has(f, Op::SharedUp));
  expect_shape(f, Op::Qkv, 4096, 4096, (32 + 16) * 128);
  expect_shape(f, Op::ExpertUp, 4096 * 2, 4096, 2 * 14336);  // top-2: twice the tokens, not one dense MLP
  expect_shape(f, Op::Router, 4096, 4096, 8);
  for (Op op : {Op::ExpertUp, Op::ExpertDown, Op::Router, Op::Qkv})
    EXPECT_EQ(find(f, op, Pass::Fprop).shape(), find(p, op, Pass::Fprop).shape());
  // Per-token FLOPs of one MoE layer: k experts' MLPs, not one (the dense plan's mistake).
  const PlanFlops fl = plan_flops(f);
  const double per_tok = 2 * (4096.0 * 6144 + 4096.0 * 4096 + 4096.0 * 8 + 2 * (4096.0 * 28672 + 14336.0 * 4096));
  EXPECT_DOUBLE_EQ(fl.moe_fprop, 4096 * per_tok);
}

TEST(MoePlan, Qwen3OlmoeGptOssAndQwen2Files) {
  {
    ModelConfig c = load_hf_config(kConfigs + "qwen3_30b_a3b.json");
    const Plan p = build_model_plan(with_routing(c, "balanced"));
    EXPECT_EQ(p.moe_layers(), 48);
    expect_shape(p, Op::Qkv, 4096, 2048, (32 + 8) * 128);
    expect_shape(p, Op::AttnOut, 4096, 32 * 128, 2048);
    expect_shape(p, Op::ExpertUp, 4096 * 8, 2048, 2 * 768);
    EXPECT_EQ(find(p, Op::ExpertUp, Pass::Fprop).group.size(), 128u);
  }
  {
    // OLMoE: OlmoeConfig's experts are intermediate_size wide (no moe_intermediate_size).
    const Plan p = build_model_plan(load_hf_config(kConfigs + "olmoe_1b_7b.json"));
    expect_shape(p, Op::ExpertDown, 4096 * 8, 1024, 2048);
    EXPECT_EQ(p.moe_layers(), 16);
  }
  {
    const ModelConfig c = load_hf_config(kConfigs + "gpt_oss_120b.json");
    EXPECT_EQ(c.moe.num_experts, 128);
    EXPECT_EQ(c.moe.top_k, 4);
    const Plan p = build_model_plan(c);
    expect_shape(p, Op::Qkv, 4096, 2880, (64 + 16) * 64);
    expect_shape(p, Op::AttnOut, 4096, 64 * 64, 2880);
    expect_shape(p, Op::ExpertUp, 4096 * 4, 2880, 2 * 2880);
  }
  {
    // Qwen2-MoE: one shared expert of shared_expert_intermediate_size; its gate is noted.
    const ModelConfig c = load_hf_config(kConfigs + "qwen2_moe_a2.7b.json");
    EXPECT_EQ(c.moe.shared_experts, 1);
    EXPECT_EQ(shared_ffn_total(c), 5632);
    const Plan p = build_model_plan(c);
    expect_shape(p, Op::SharedUp, 4096, 2048, 2 * 5632);
    expect_shape(p, Op::ExpertUp, 4096 * 4, 2048, 2 * 1408);
    ASSERT_FALSE(c.notes.empty());
    EXPECT_NE(c.notes[0].find("shared_expert_gate"), std::string::npos);
  }
}

// Llama 4 as Llama4TextConfig builds it (under text_config): experts of intermediate_size and one
// shared expert as wide, dense layers of intermediate_size_mlp, MoE in every
// interleave_moe_layer_step-th layer (Scout: all 48; Maverick: 1, 3, ..., 47) or the layers
// moe_layers lists; the chunked attention and the vision encoder are said in notes.
TEST(MoePlan, Llama4ScoutAndMaverick) {
  {
    const ModelConfig c = load_hf_config(kConfigs + "llama4_scout.json");
    EXPECT_EQ(c.moe.num_experts, 16);
    EXPECT_EQ(c.moe.top_k, 1);
    EXPECT_EQ(expert_ffn(c), 8192);
    EXPECT_EQ(c.moe.shared_experts, 1);
    EXPECT_EQ(shared_ffn_total(c), 8192);
    EXPECT_EQ(moe_layer_count(c), 48);
    EXPECT_TRUE(c.gated_mlp);
    const Plan p = build_model_plan(with_routing(c, "balanced"));
    EXPECT_FALSE(has(p, Op::MlpUp)) << "every layer has experts";
    expect_shape(p, Op::Qkv, 4096, 5120, (40 + 2 * 8) * 128);
    expect_shape(p, Op::AttnOut, 4096, 40 * 128, 5120);
    expect_shape(p, Op::Router, 4096, 5120, 16);
    expect_shape(p, Op::ExpertUp, 4096, 5120, 2 * 8192);  // top-1: each token once
    expect_shape(p, Op::SharedUp, 4096, 5120, 2 * 8192);
    bool vision = false, chunked = false;
    for (const std::string& n : c.notes) {
      vision |= n.find("vision encoder (vision_config)") != std::string::npos;
      chunked |= n.find("'attention_chunk_size' = 8192 in 36 of 48 layers") != std::string::npos;
    }
    EXPECT_TRUE(vision);
    EXPECT_TRUE(chunked);
  }
  {
    const ModelConfig c = load_hf_config(kConfigs + "llama4_maverick.json");
    EXPECT_EQ(c.moe.num_experts, 128);
    EXPECT_EQ(moe_layer_count(c), 24);
    EXPECT_FALSE(is_moe_layer(c, 0));
    EXPECT_TRUE(is_moe_layer(c, 1));
    EXPECT_TRUE(is_moe_layer(c, 47));
    const Plan p = build_model_plan(with_routing(c, "balanced"));
    expect_shape(p, Op::MlpUp, 4096, 5120, 2 * 16384);  // the dense layers' intermediate_size_mlp
    expect_shape(p, Op::ExpertDown, 4096, 8192, 5120);
    EXPECT_EQ(p.dense_layers(), 24);
  }
  // moe_layers overrides interleave_moe_layer_step, as Llama4TextConfig reads them.
  nlohmann::json j = nlohmann::json::parse(gs::test::slurp(kConfigs + "llama4_maverick.json"));
  j["text_config"]["moe_layers"] = {0, 5, 10};
  const ModelConfig c = parse_hf_config(j.dump(), "maverick.json");
  EXPECT_EQ(moe_layer_count(c), 3);
  EXPECT_TRUE(is_moe_layer(c, 10));
  EXPECT_FALSE(is_moe_layer(c, 1));
  j["text_config"]["moe_layers"] = {0, 48};
  EXPECT_NE(error_of([&] { parse_hf_config(j.dump(), "maverick.json"); }).find("'moe_layers' item 1"), std::string::npos);
  j["text_config"].erase("moe_layers");
  j["text_config"]["num_local_experts"] = 0;  // MoE layers holding a shared expert alone: not planned as dense
  EXPECT_NE(error_of([&] { parse_hf_config(j.dump(), "maverick.json"); }).find("without routed experts"),
            std::string::npos);
}

TEST(MoeConfig, DenseLayerRules) {
  // Qwen: decoder_sparse_step 2 -> MoE in layers 1, 3, 5, ...; mlp_only_layers forces dense.
  const char* js = R"({"model_type":"qwen3_moe","hidden_size":1024,"intermediate_size":4096,"moe_intermediate_size":512,
    "num_attention_heads":8,"num_hidden_layers":8,"num_experts":16,"num_experts_per_tok":2,
    "decoder_sparse_step":2,"mlp_only_layers":[3],"hidden_act":"silu"})";
  const ModelConfig c = parse_hf_config(js, "q.json");
  std::vector<int64_t> moe;
  for (int64_t i = 0; i < 8; ++i)
    if (is_moe_layer(c, i)) moe.push_back(i);
  EXPECT_EQ(moe, (std::vector<int64_t>{1, 5, 7}));
  // DeepSeek: first_k_dense_replace 1, moe_layer_freq 2 -> 2, 4, 6.
  const char* ds = R"({"hidden_size":1024,"intermediate_size":4096,"moe_intermediate_size":512,
    "num_attention_heads":8,"num_hidden_layers":8,"n_routed_experts":16,"num_experts_per_tok":2,
    "first_k_dense_replace":1,"moe_layer_freq":2})";
  const ModelConfig d = parse_hf_config(ds, "d.json");
  EXPECT_EQ(moe_layer_count(d), 3);
  EXPECT_FALSE(is_moe_layer(d, 1));
  EXPECT_TRUE(is_moe_layer(d, 2));
  const Plan p = build_model_plan(d);
  const PlanFlops f = plan_flops(p);
  EXPECT_DOUBLE_EQ(f.full_model(8), 5 * f.per_layer() + 3 * f.per_moe_layer() + f.model_once);
}

TEST(MoeConfig, RefusesWhatItDoesNotModel) {
  const std::string base = R"("hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,"num_hidden_layers":4)";
  auto err = [&](const std::string& extra) { return error_of([&] { parse_hf_config("{" + base + "," + extra + "}", "c.json"); }); };
  EXPECT_NE(err(R"("num_local_experts":8)").find("num_experts_per_tok"), std::string::npos);
  EXPECT_NE(err(R"("num_experts_per_tok":2)").find("no expert count"), std::string::npos);
  EXPECT_NE(err(R"("num_experts":8,"num_local_experts":16,"num_experts_per_tok":2)").find("disagree"), std::string::npos);
  // Unknown families: fields about experts, latent projections or other mixers are refused by name.
  EXPECT_NE(err(R"("num_experts":8,"num_experts_per_tok":2,"moe_layer_frequency":2)").find("'moe_layer_frequency'"),
            std::string::npos);
  EXPECT_NE(err(R"("ffn_config":{"moe_num_experts":16})").find("'ffn_config'"), std::string::npos);
  EXPECT_NE(err(R"("interleave_moe_layer_step":1)").find("'interleave_moe_layer_step'"), std::string::npos);
  EXPECT_NE(err(R"("intermediate_size_mlp":16384)").find("'intermediate_size_mlp'"), std::string::npos);
  EXPECT_NE(err(R"("mamba_d_state":16)").find("'mamba_d_state'"), std::string::npos);
  EXPECT_NE(err(R"("layer_types":["linear_attention","full_attention"])").find("'linear_attention'"), std::string::npos);
  EXPECT_NE(err(R"("moe_layer_freq":[0,1,1,1],"n_routed_experts":4,"num_experts_per_tok":1)").find("moe_layer_freq"),
            std::string::npos);
  // MLA: incomplete or out of range.
  EXPECT_NE(err(R"("kv_lora_rank":512)").find("qk_nope_head_dim"), std::string::npos);
  EXPECT_NE(err(R"("q_lora_rank":512)").find("kv_lora_rank"), std::string::npos);
  EXPECT_NE(err(R"("kv_lora_rank":0,"qk_nope_head_dim":1,"qk_rope_head_dim":1,"v_head_dim":1)").find("'kv_lora_rank' must be >= 1"),
            std::string::npos);
  // Known harmless fields are accepted; so are a dense model's.
  EXPECT_EQ(err(R"("num_experts":8,"num_experts_per_tok":2,"router_aux_loss_coef":0.01,"norm_topk_prob":true)"), "(accepted)");
  EXPECT_EQ(err(R"("layer_types":["sliding_attention","full_attention"])"), "(accepted)");
  // Planning refuses top-k > experts.
  EXPECT_NE(error_of([&] { build_model_plan(parse_hf_config("{" + base + R"(,"num_experts":4,"num_experts_per_tok":5})", "c.json")); })
                .find("--top-k (5) is larger than the number of experts (4)"),
            std::string::npos);
}

TEST(MoeConfig, PresetsHavePublishedNumbers) {
  const ModelConfig v3 = find_preset("deepseek-v3").config;
  EXPECT_EQ(v3.hidden_size, 7168);
  EXPECT_EQ(v3.moe.num_experts, 256);
  EXPECT_EQ(moe_layer_count(v3), 58);
  EXPECT_EQ(v3.mla.q_lora_rank, 1536);
  const ModelConfig q = find_preset("qwen3-235b-a22b").config;
  EXPECT_EQ(q.num_hidden_layers, 94);
  EXPECT_EQ(expert_ffn(q), 1536);
  EXPECT_EQ(q.kv_heads(), 4);
  const ModelConfig g = find_preset("gpt-oss-120b").config;
  EXPECT_EQ(g.moe.top_k, 4);
  EXPECT_EQ(g.head_dimension(), 64);
  EXPECT_EQ(find_preset("qwen3-30b-a3b").config.moe.top_k, 8);
  // The preset and its config.json give the same plan (same batch).
  ModelConfig file = load_hf_config(kConfigs + "deepseek_v3.json");
  file.moe.expert_parallel = 64;  // the preset's published layout (config.json has none)
  const Plan a = build_model_plan(find_preset("deepseek-v3").config), b = build_model_plan(file);
  ASSERT_EQ(a.gemms.size(), b.gemms.size());
  for (size_t i = 0; i < a.gemms.size(); ++i) EXPECT_EQ(a.gemms[i].shape(), b.gemms[i].shape());
}

TEST(MoePlan, TensorAndExpertParallel) {
  ModelConfig c = with_routing(find_preset("deepseek-v3").config, "balanced");
  c.tensor_parallel = 4;
  c.moe.expert_parallel = 8;
  const Plan p = build_model_plan(c);
  // MLA down projections replicated; q/kv up split by heads; out row-parallel.
  expect_shape(p, Op::QDown, 4096, 7168, 1536);
  expect_shape(p, Op::QUp, 4096, 1536, 32 * 192);
  expect_shape(p, Op::KvUp, 4096, 512, 32 * 256);
  expect_shape(p, Op::AttnOut, 4096, 32 * 128, 7168);
  // Experts split like the dense MLP (Megatron: expert TP = TP); 32 local experts; the busiest rank
  // of 8 receives 8 x 4096 x 8 / 8 rows under balanced routing.
  expect_shape(p, Op::ExpertUp, 4096 * 8, 7168, 2 * 2048 / 4);
  EXPECT_EQ(find(p, Op::ExpertUp, Pass::Fprop).group.size(), 32u);
  expect_shape(p, Op::Router, 4096, 7168, 256);
  c.moe.expert_parallel = 3;
  EXPECT_NE(error_of([&] { build_model_plan(c); }).find("--expert-parallel 3 does not divide the number of experts (256)"),
            std::string::npos);
}

// ---- routing ----

TEST(Routing, SumsAndBoundsForEveryGenerator) {
  for (const char* spec : {"balanced", "random", "lognormal:1.5", "hot:0.9", "lognormal:0"}) {
    SCOPED_TRACE(spec);
    const Routing r = route(parse_routing(spec), 64, 6, 1000, 2, 7);
    EXPECT_EQ(std::accumulate(r.counts.begin(), r.counts.end(), int64_t{0}), 2 * 1000 * 6);
    for (int64_t x : r.counts) {
      EXPECT_GE(x, 0);
      EXPECT_LE(x, 2000) << "an expert gets at most one row per token";
    }
    EXPECT_EQ(std::accumulate(r.rank_rows.begin(), r.rank_rows.end(), int64_t{0}), 12000);
    EXPECT_EQ(r.rank_rows[static_cast<size_t>(r.busiest_rank)], *std::max_element(r.rank_rows.begin(), r.rank_rows.end()));
    EXPECT_EQ(static_cast<int64_t>(r.busiest_counts().size()), 32);
  }
}

TEST(Routing, DeterministicBySeedAndDistributions) {
  const RoutingSpec rnd = parse_routing("random");
  EXPECT_EQ(route(rnd, 128, 8, 4096, 1, 1).counts, route(rnd, 128, 8, 4096, 1, 1).counts);
  EXPECT_NE(route(rnd, 128, 8, 4096, 1, 1).counts, route(rnd, 128, 8, 4096, 1, 2).counts);
  // Random top-k: mean 256 rows per expert; a fair draw stays within a few standard deviations.
  const Routing r = route(rnd, 128, 8, 4096, 1, 3);
  EXPECT_LT(r.max_over_mean(), 1.35);
  EXPECT_GT(r.max_over_mean(), 1.0);
  // Balanced: equal (remainder spread one row at a time).
  const Routing b = route(parse_routing("balanced"), 6, 2, 10, 1, 0);
  EXPECT_EQ(b.counts, (std::vector<int64_t>{4, 4, 3, 3, 3, 3}));
  EXPECT_EQ(route(parse_routing("lognormal:0"), 8, 2, 100, 1, 5).counts, std::vector<int64_t>(8, 25));
  // Larger sigma, more imbalance.
  EXPECT_GT(route(parse_routing("lognormal:2"), 128, 8, 4096, 1, 9).max_over_mean(),
            route(parse_routing("lognormal:0.3"), 128, 8, 4096, 1, 9).max_over_mean());
  // Hot: one expert gets that fraction of the tokens; the same seed picks the same expert.
  const Routing h = route(parse_routing("hot:0.5"), 16, 2, 1000, 1, 4);
  EXPECT_EQ(*std::max_element(h.counts.begin(), h.counts.end()), 500);
  EXPECT_EQ(h.counts, route(parse_routing("hot:0.5"), 16, 2, 1000, 1, 4).counts);
  // hot below what top-k forces: every expert has to take half of the tokens with top-2 of 4... too small
  EXPECT_NE(error_of([] { route(parse_routing("hot:0.1"), 2, 2, 100, 1, 0); }).find("too small"), std::string::npos);
}

TEST(Routing, CapacityDropsAndEmptyExperts) {
  const Routing h = route(parse_routing("hot:1"), 8, 1, 800, 1, 0, 1.25);
  EXPECT_EQ(h.capacity, 125);
  EXPECT_EQ(h.dropped, 800 - 125);
  EXPECT_EQ(h.empty_experts(), 7);
  EXPECT_DOUBLE_EQ(h.max_over_mean(), 8.0);
}

TEST(Routing, FileCountsAndBadFiles) {
  const std::string good = temp_file("good.json", "[4, 0, 4, 0]");
  const Routing r = route(parse_routing("file:" + good), 4, 2, 4, 1, 0);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{4, 0, 4, 0}));
  EXPECT_EQ(r.empty_experts(), 2);
  auto err = [](const std::string& text, int64_t experts = 4) {
    const std::string f = temp_file("bad.json", text);
    return error_of([&] { route(parse_routing("file:" + f), experts, 2, 4, 1, 0); });
  };
  EXPECT_NE(err("[3, 5]").find("has 2 counts, expected one per expert (4)"), std::string::npos);
  EXPECT_NE(err("[3, -1, 6, 0]").find("item 1 is negative"), std::string::npos);
  EXPECT_NE(err("[3, 1.5, 3.5, 0]").find("item 1 must be a non-negative integer"), std::string::npos);
  EXPECT_NE(err("[3, \"2\", 3, 0]").find("item 1"), std::string::npos);
  EXPECT_NE(err("[3, 1, 1, 0]").find("counts sum to 5, expected"), std::string::npos);
  EXPECT_NE(err("[8, 0, 0, 0]").find("more than the 4 tokens"), std::string::npos);
  EXPECT_NE(err("{\"a\": 1}").find("list"), std::string::npos);
  EXPECT_NE(err("[1, 2").find("not valid JSON"), std::string::npos);
  // The input-file policy: depth limited while parsing (no stack overflow), trailing content refused,
  // values described, never dumped.
  EXPECT_NE(err(std::string(100000, '[') + std::string(100000, ']')).find("nested deeper than"), std::string::npos);
  EXPECT_NE(err("[4, 0, 4, 0] trailing").find("expected end of input"), std::string::npos);
  EXPECT_NE(err("[3, [[[[1]]]], 1, 0]").find("item 1 must be a non-negative integer, got a list of 1 item"), std::string::npos);
  EXPECT_NE(error_of([] { route(parse_routing("file:" + fs::temp_directory_path().string()), 4, 2, 4, 1, 0); })
                .find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_of([] { route(parse_routing("file:/no/such/counts.json"), 4, 2, 4, 1, 0); }).find("no such file"),
            std::string::npos);
}

TEST(Routing, BadSpecs) {
  EXPECT_NE(error_of([] { parse_routing("zipf"); }).find("unknown --routing 'zipf'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_routing("lognormal"); }).find("unknown --routing"), std::string::npos);
  EXPECT_NE(error_of([] { parse_routing("lognormal:abc"); }).find("not a number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_routing("hot:1.5"); }).find("(0, 1]"), std::string::npos);
  EXPECT_NE(error_of([] { parse_routing("balanced:2"); }).find("unknown --routing"), std::string::npos);
}

TEST(Grouped, PaddingWastePerRecipe) {
  ModelConfig c = with_routing(find_preset("mixtral-8x7b").config, "file:" + temp_file("mix.json", "[1000,1000,1000,1000,1000,1000,1000,1192]"));
  c.moe.expert_parallel = 1;  // one GPU holds all 8 experts (the preset's layout is EP 8)
  const Plan p = build_model_plan(c);
  const Gemm& up = find(p, Op::ExpertUp, Pass::Fprop);
  EXPECT_EQ(up.m, 8192);
  EXPECT_EQ(padded_waste(up, Precision::BF16), 0);
  EXPECT_EQ(padded_waste(up, Precision::FP8Current), 7 * 8 + 8);  // 1000 -> 1008, 1192 -> 1200
  EXPECT_EQ(padded_waste(up, Precision::MXFP8), 7 * 24 + 24);     // 1000 -> 1024, 1192 -> 1216
  // The router stays BF16 in every recipe.
  const Gemm& router = find(p, Op::Router, Pass::Fprop);
  EXPECT_EQ(make_recipe(Precision::FP8Current, router, {}).precision, Precision::BF16);
  EXPECT_EQ(make_recipe(Precision::FP8Current, up, {}).precision, Precision::FP8Current);
}

// ---- runner, reports, JSON ----

namespace {

class FakeEngine : public test::FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    const Precision actual = make_recipe(p, g, {}).precision;
    if (g.op == Op::Router) router_precisions.insert(actual);
    const double ms = g.flops() / (actual == Precision::BF16 ? 700e12 : 1400e12) * 1e3;
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.iters = 10;
    Cell c = Cell::measured(s);
    if (g.grouped()) c.dense_equiv_ms = ms * 0.8;
    return c;
  }
  std::set<Precision> router_precisions;
};

RunResult run_moe(const std::string& preset, const std::string& routing) {
  RunRequest req;
  ModelConfig c = with_routing(find_preset(preset).config, routing);
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PerGemm};
  req.options.timing.gpu_warmup_s = 0;
  FakeEngine e;
  RunResult r = run(e, req);
  EXPECT_EQ(e.router_precisions, std::set<Precision>{Precision::BF16});
  return r;
}

}  // namespace

TEST(MoeRun, SumsPerLayerKindAndFullModel) {
  const RunResult r = run_moe("deepseek-v3", "balanced");
  const ModeSummary s = summarize_mode(r, 0);
  for (size_t p = 0; p < 2; ++p) {
    double dense = 0, moe = 0, once = 0, router = 0, experts = 0;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      const Gemm& x = r.plan.gemms[g];
      const double t = r.cell(0, g, p).stats.mean_ms;
      if (x.scope == Scope::Layer || x.scope == Scope::DenseLayer) dense += t;
      if (x.scope == Scope::Layer || x.scope == Scope::MoeLayer) moe += t;
      if (x.scope == Scope::Model) once += t;
      if (x.op == Op::Router) router += t;
      if (x.op == Op::ExpertUp || x.op == Op::ExpertDown) experts += t;
    }
    const PrecisionSums& ps = s.sums[p];
    EXPECT_NEAR(*ps.total, dense, 1e-9);
    EXPECT_NEAR(*ps.moe_total, moe, 1e-9);
    EXPECT_NEAR(*ps.router, router, 1e-9);
    EXPECT_NEAR(*ps.routed_experts, experts, 1e-9);
    EXPECT_NEAR(*ps.full_model, 3 * dense + 58 * moe + once, 1e-6);
  }
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Router (BF16)"), std::string::npos);
  EXPECT_NE(text.find("MoE layer (58 of 61)"), std::string::npos);
  EXPECT_NE(text.find("Dense layer (3 of 61)"), std::string::npos);
  EXPECT_NE(text.find("Full Model (3 dense + 58 MoE layers + LM head)"), std::string::npos);
  EXPECT_NE(text.find("max/mean rows per expert"), std::string::npos);
  EXPECT_NE(text.find("0.80"), std::string::npos) << "grouping efficiency = dense-equivalent / grouped = 0.8";
  EXPECT_NE(text.find("Router: BF16 in every recipe"), std::string::npos);
  // CSV: grouped rows carry their group dimension and expert count.
  const std::string csv = render_csv(r);
  // (the preset's EP 64: the busiest rank's 4 of the 256 experts)
  EXPECT_NE(csv.find(",m,4,"), std::string::npos);
  EXPECT_NE(csv.find(",k,4,"), std::string::npos);
}

TEST(MoeRun, JsonRoundTripKeepsGroupsConfigAndRouting) {
  const RunResult r = run_moe("mixtral-8x7b", "lognormal:1");
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["schema"], "gemmscope.result/3");
  EXPECT_EQ(j["config"]["moe"]["num_experts"], 8);
  EXPECT_EQ(j["plan"]["moe_layers"], 32);
  EXPECT_DOUBLE_EQ(j["plan"]["flops_full_model"].get<double>(), plan_flops(r.plan).full_model(32));
  const RunResult back = from_json(j, "x.json");
  ASSERT_EQ(back.plan.gemms.size(), r.plan.gemms.size());
  for (size_t i = 0; i < r.plan.gemms.size(); ++i) {
    EXPECT_EQ(back.plan.gemms[i].group_dim, r.plan.gemms[i].group_dim);
    EXPECT_EQ(back.plan.gemms[i].group, r.plan.gemms[i].group);
    EXPECT_EQ(back.plan.gemms[i].scope, r.plan.gemms[i].scope);
  }
  EXPECT_EQ(back.plan.moe_layers(), 32);
  ASSERT_TRUE(back.plan.routing);
  EXPECT_EQ(back.plan.routing->counts, r.plan.routing->counts);
  for (size_t g = 0; g < r.plan.gemms.size(); ++g)
    if (r.plan.gemms[g].grouped()) {
      ASSERT_TRUE(back.cell(0, g, 0).dense_equiv_ms);
      EXPECT_DOUBLE_EQ(*back.cell(0, g, 0).dense_equiv_ms, *r.cell(0, g, 0).dense_equiv_ms);
    }
  EXPECT_EQ(render_text(back), render_text(r));
  // A group that does not sum to its dimension is refused.
  nlohmann::json bad = j;
  for (auto& g : bad["gemms"])
    if (g.contains("group")) { g["group"][0] = g["group"][0].get<int64_t>() + 1; break; }
  EXPECT_NE(error_of([&] { from_json(bad, "x.json"); }).find("\"group\" sums to"), std::string::npos);
}

TEST(MoeRun, OldSchemaStillReadable) {
  const nlohmann::json v1 = read_json_file(std::string(GS_TEST_DATA_DIR) + "/model_5b_autocast.json");
  ASSERT_EQ(v1["schema"], "gemmscope.result/1");
  const RunResult r = from_json(v1, "v1.json");
  EXPECT_FALSE(r.plan.has_moe());
  EXPECT_EQ(to_json(r)["schema"], "gemmscope.result/3");
}

// ---- CLI ----

namespace {

using gs::test::Out;
using gs::test::slurp;

Out run_cli(const std::string& args) {
  static const fs::path d = gs::test::scratch_dir("moe_cli");
  return gs::test::run_gemmscope(args, d);
}

void expect_refused(const std::string& args, const std::string& needle) {
  SCOPED_TRACE(args);
  const fs::path j = fs::temp_directory_path() / ("gs_moe_nothing_" + std::to_string(::getpid()) + ".json");
  fs::remove(j);
  const Out r = run_cli(args + " --dry-run --json " + j.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(fs::exists(j));
}

}  // namespace

TEST(MoeCli, DryRunShowsThePlanRoutingAndWaste) {
  const Out r = run_cli("--model qwen3-30b-a3b --expert-parallel 4 --routing lognormal:1 --capacity-factor 1.5 --dry-run");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Experts: 128 routed, top-8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Routing (lognormal:1, seed 1234)"), std::string::npos);
  EXPECT_NE(r.out.find("the busiest rank"), std::string::npos);
  EXPECT_NE(r.out.find("Capacity factor 1.5"), std::string::npos);
  EXPECT_NE(r.out.find("Padding waste"), std::string::npos);
  EXPECT_NE(r.out.find("FLOPs per MoE layer"), std::string::npos);
  // The seed decides the routing.
  const Out a = run_cli("--model qwen3-30b-a3b --dry-run --seed 1"), b = run_cli("--model qwen3-30b-a3b --dry-run --seed 1"),
            c = run_cli("--model qwen3-30b-a3b --dry-run --seed 2");
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  // Flags build a MoE model from a dense one.
  const Out f = run_cli("--num-experts 8 --top-k 2 --moe-intermediate-size 4096 --kv-lora-rank 256 --q-lora-rank none "
                        "--qk-nope-head-dim 64 --qk-rope-head-dim 32 --v-head-dim 64 --dry-run");
  ASSERT_EQ(f.rc, 0) << f.err;
  EXPECT_NE(f.out.find("Q Proj"), std::string::npos);
  EXPECT_NE(f.out.find("Expert Up"), std::string::npos);
}

TEST(MoeCli, BadInputExitsTwo) {
  expect_refused("--model mixtral-8x7b --top-k 9", "--top-k (9) is larger than the number of experts (8)");
  expect_refused("--model mixtral-8x7b --expert-parallel 3", "--expert-parallel 3 does not divide");
  expect_refused("--model mixtral-8x7b --routing zipf", "unknown --routing 'zipf'");
  expect_refused("--model mixtral-8x7b --routing file:/no/such.json", "cannot read routing file '/no/such.json': no such file");
  expect_refused("--model mixtral-8x7b --capacity-factor 0", "--capacity-factor must be a positive number");
  expect_refused("--num-experts 8", "--num-experts needs --top-k");
  expect_refused("--top-k 2", "--top-k needs a model with experts");
  expect_refused("--model deepseek-v3 --kv-lora-rank 0", "kv_lora_rank");
  expect_refused("--model deepseek-v3 --q-lora-rank 0", "--q-lora-rank must be > 0");
  expect_refused("--config " + kConfigs + "../compare_a.json", "missing required field");
}

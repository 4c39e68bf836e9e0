// The DeepGEMM provider's rules (core/providers/deepgemm_cells.hpp) and its place on the provider axis:
// --provider parsing with deepgemm, which cells it can run per recipe and architecture (a fake
// compute capability), the kernel each recipe maps to, its 128-row padding in the text and JSON
// reports, the engine's provider notes in the run's notes, and the JSON round trip of a run with
// cublaslt and deepgemm.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/providers/deepgemm_cells.hpp"
#include "core/util/error.hpp"
#include "core/recipes/grouped.hpp"
#include "core/model/model_config.hpp"
#include "core/providers/provider.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Gemm dense(Pass pass, int64_t m, int64_t k, int64_t n) {
  // As build_model_plan lays them out (linear_gemm): Fprop X[m,k] W[n,k]; Dgrad dY[m,k] W[k,n]
  // (N-major); Wgrad dY^T (token-major) x X (token-major). m, k, n as given.
  Gemm g{pass, Op::MlpUp, Scope::Layer, m, k, n, {Role::Activation, true}, {Role::Weight, true}};
  if (pass == Pass::Dgrad) g.a = {Role::Grad, true}, g.b = {Role::Weight, false};
  if (pass == Pass::Wgrad) g.a = {Role::Grad, false}, g.b = {Role::Activation, false};
  return g;
}

ModelConfig small_moe() {
  ModelConfig c = find_preset("deepseek-v3").config;
  c.num_hidden_layers = 4;  // 3 dense + 1 MoE
  return c;
}

const Gemm& find(const Plan& p, Op op, Pass pass) {
  for (const Gemm& g : p.gemms)
    if (g.op == op && g.pass == pass) return g;
  throw std::runtime_error("no such GEMM");
}

}  // namespace

TEST(DeepGemmProvider, NameParsesAloneInListsAndInAll) {
  EXPECT_TRUE(is_known_provider("deepgemm"));
  EXPECT_EQ(parse_provider_option("deepgemm"), (std::vector<std::string>{"deepgemm"}));
  EXPECT_EQ(parse_provider_option(" DeepGEMM , cublaslt"), (std::vector<std::string>{"deepgemm", "cublaslt"}));
  EXPECT_EQ(parse_provider_option("all"), (std::vector<std::string>{"cublaslt", "cutlass", "deepgemm"}));
  EXPECT_FALSE(provider_note("deepgemm").empty()) << "the run's notes say what DeepGEMM cells time";
  for (const char* bad : {"deepgemm,deepgemm", "all,deepgemm", "deep-gemm", "deepgemm,"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_provider_option(bad), UsageError);
  }
}

TEST(DeepGemmProvider, RunsDeepSeeksRecipeOnHopperOnly) {
  const RecipeOptions o;
  const Gemm f = dense(Pass::Fprop, 4096, 7168, 2048);
  const Gemm d = dense(Pass::Dgrad, 4096, 2048, 7168);
  const Gemm w = dense(Pass::Wgrad, 2048, 4096, 7168);
  for (const Gemm& g : {f, d, w}) {
    SCOPED_TRACE(pass_label(g.pass));
    EXPECT_EQ(deepgemm_cell_problem(g, make_recipe(Precision::FP8Block, g, o), 90), "");
    for (int cc : {80, 89, 100, 120}) {
      const std::string why = deepgemm_cell_problem(g, make_recipe(Precision::FP8Block, g, o), cc);
      EXPECT_TRUE(contains(why, "DeepGEMM") && contains(why, "sm_" + std::to_string(cc))) << why;
    }
    // BF16: DeepGEMM's sm90_bf16_gemm runs every dense pass (Dgrad's and Wgrad's MN-major operands too).
    EXPECT_EQ(deepgemm_cell_problem(g, make_recipe(Precision::BF16, g, o), 90), "");
    const std::string bf_cc = deepgemm_cell_problem(g, make_recipe(Precision::BF16, g, o), 100);
    EXPECT_TRUE(contains(bf_cc, "DeepGEMM") && contains(bf_cc, "sm_100")) << bf_cc;
    for (Precision p : {Precision::FP8Current, Precision::FP8Delayed, Precision::MXFP8, Precision::NVFP4}) {
      const std::string why = deepgemm_cell_problem(g, make_recipe(p, g, o), 90);
      EXPECT_TRUE(contains(why, "DeepGEMM") && contains(why, to_string(p))) << why;
    }
  }
  // The kernel each pass maps to: 1d2d (BF16 out) for Fprop/Dgrad, 1d1d (FP32 accumulate) for Wgrad.
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::FP8Block, f, o)), dg::Kernel::FP8_1D2D);
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::FP8Block, d, o)), dg::Kernel::FP8_1D2D);
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::FP8Block, w, o)), dg::Kernel::FP8_1D1D);
  EXPECT_FALSE(deepgemm_kernel(make_recipe(Precision::FP8Current, f, o)));
  // BF16: BF16 out for Fprop/Dgrad, FP32 accumulation for Wgrad into the main gradient (the default).
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::BF16, f, o)), dg::Kernel::BF16);
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::BF16, d, o)), dg::Kernel::BF16);
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::BF16, w, o)), dg::Kernel::BF16_FP32);
}

TEST(DeepGemmProvider, Bf16CellsFollowItsBf16KernelsRules) {
  const RecipeOptions o;
  auto why = [&](const Gemm& g, const RecipeOptions& ro) {
    return deepgemm_cell_problem(g, make_recipe(Precision::BF16, g.grouped() ? expert_gemm(g, 128) : g, ro), 90);
  };
  // --wgrad-output bf16: the BF16 kernel writes BF16 (no accumulation), so the Wgrad still runs.
  RecipeOptions bf16_out;
  bf16_out.wgrad_fp32_accumulate = false;
  const Gemm w = dense(Pass::Wgrad, 2048, 4096, 7168);
  EXPECT_EQ(deepgemm_kernel(make_recipe(Precision::BF16, w, bf16_out)), dg::Kernel::BF16);
  EXPECT_EQ(why(w, bf16_out), "");
  // K % 64 (whole BF16 K blocks), N % 64 for BF16 out, N % 4 for the FP32 main gradient.
  EXPECT_TRUE(contains(why(dense(Pass::Fprop, 4096, 7168 + 32, 2048), o), "K % 64"));
  EXPECT_EQ(why(dense(Pass::Fprop, 4096, 7168 + 64, 2048), o), "") << "K % 64 is enough for BF16";
  EXPECT_TRUE(contains(why(dense(Pass::Fprop, 4096, 7168, 2048 + 32), o), "N % 64"));
  EXPECT_TRUE(contains(why(dense(Pass::Wgrad, 2048, 4096, 7168 + 2), o), "N % 4")) << "FP32 out";
  // Wgrad's B is token-major (N-major) too: N % 8 for its 16-byte TMA row stride.
  EXPECT_TRUE(contains(why(dense(Pass::Wgrad, 2048, 4096, 7168 + 4), o), "N % 8"));
  EXPECT_EQ(why(dense(Pass::Wgrad, 2048 + 8, 4096, 7168 + 8), o), "");
  // Wgrad's A is token-major (MN-major): its rows are M elements apart, a 16-byte TMA stride.
  EXPECT_TRUE(contains(why(dense(Pass::Wgrad, 2048 + 4, 4096, 7168), o), "M % 8"));
  // Grouped: Fprop/Dgrad by the M-grouped contiguous form, Wgrad by the K-grouped form (either output).
  const Plan p = build_model_plan(small_moe());
  for (Op op : {Op::ExpertUp, Op::ExpertDown})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
      EXPECT_EQ(why(find(p, op, pass), o), "") << pass_label(pass);
      EXPECT_EQ(why(find(p, op, pass), bf16_out), "") << pass_label(pass);
    }
  // A K-grouped Wgrad's total tokens need not be a multiple of 64 (each expert is padded to 128),
  // but its operands must be token-major.
  Gemm kg = find(p, Op::ExpertUp, Pass::Wgrad);
  kg.group[0] += 3;
  kg.k += 3;
  EXPECT_EQ(why(kg, o), "");
  kg.a.k_major = true;
  EXPECT_TRUE(contains(why(kg, o), "MN-major")) << why(kg, o);
}

TEST(DeepGemmProvider, WgradFollowsTheWgradOutputAndFormatsMustBeE4M3) {
  RecipeOptions bf16_out;
  bf16_out.wgrad_fp32_accumulate = false;
  const Gemm w = dense(Pass::Wgrad, 2048, 4096, 7168);
  const std::string why = deepgemm_cell_problem(w, make_recipe(Precision::FP8Block, w, bf16_out), 90);
  EXPECT_TRUE(contains(why, "FP32") && contains(why, "--wgrad-output")) << why;
  // Fprop and Dgrad do not care about the Wgrad output.
  const Gemm f = dense(Pass::Fprop, 4096, 7168, 2048);
  EXPECT_EQ(deepgemm_cell_problem(f, make_recipe(Precision::FP8Block, f, bf16_out), 90), "");
  // Hybrid block format: E5M2 gradients, which DeepGEMM's kernels do not take.
  RecipeOptions hybrid;
  hybrid.block_fp8_format = Fp8Format::Hybrid;
  const Gemm d = dense(Pass::Dgrad, 4096, 2048, 7168);
  const std::string e5 = deepgemm_cell_problem(d, make_recipe(Precision::FP8Block, d, hybrid), 90);
  EXPECT_TRUE(contains(e5, "E4M3") && contains(e5, "e5m2") && contains(e5, "--block-fp8-format")) << e5;
}

TEST(DeepGemmProvider, ShapeRulesOfItsKernels) {
  const RecipeOptions o;
  auto why = [&](const Gemm& g) { return deepgemm_cell_problem(g, make_recipe(Precision::FP8Block, g, o), 90); };
  EXPECT_TRUE(contains(why(dense(Pass::Fprop, 4096, 7168 + 64, 2048)), "K % 128")) << "K not a multiple of 128";
  EXPECT_TRUE(contains(why(dense(Pass::Fprop, 4096, 7168, 2048 + 32)), "N % 64")) << "BF16 store";
  EXPECT_EQ(why(dense(Pass::Fprop, 1000, 7168, 2048)), "") << "M is free (TMA bounds)";
  EXPECT_TRUE(contains(why(dense(Pass::Wgrad, 2048, 4000, 7168)), "tokens")) << "Wgrad's K is the tokens";
  // Grouped: Fprop/Dgrad along M, Wgrad along K; uneven and empty experts are fine (padded to 128).
  const Plan p = build_model_plan(small_moe());
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
    for (Op op : {Op::ExpertUp, Op::ExpertDown}) {
      const Gemm& g = find(p, op, pass);
      ASSERT_TRUE(g.grouped());
      const Recipe r = make_recipe(Precision::FP8Block, expert_gemm(g, 128), o);
      EXPECT_EQ(deepgemm_cell_problem(g, r, 90), "") << pass_label(pass) << " " << g.shape();
    }
  // The router stays BF16 in every column: DeepGEMM's BF16 GEMM runs it there too.
  const Gemm& router = find(p, Op::Router, Pass::Fprop);
  const Recipe rr = make_recipe(Precision::FP8Block, router, o);
  EXPECT_EQ(rr.precision, Precision::BF16);
  EXPECT_EQ(deepgemm_cell_problem(router, rr, 90), "");
}

TEST(DeepGemmProvider, ContiguousSegmentsArePaddedTo128) {
  Gemm g = dense(Pass::Fprop, 0, 7168, 2048);
  EXPECT_TRUE(deepgemm_padded_group(g).empty()) << "not grouped";
  g.group_dim = GroupDim::M;
  g.group = {0, 1, 127, 128, 129, 300};
  g.m = std::accumulate(g.group.begin(), g.group.end(), int64_t{0});
  EXPECT_EQ(deepgemm_padded_group(g), (std::vector<int64_t>{0, 128, 128, 128, 256, 384}));
  // The same waste as dg::grouped_padding, the runtime's own count.
  const dg::GroupedPadding gp = dg::grouped_padding(g.group);
  const auto padded = deepgemm_padded_group(g);
  EXPECT_EQ(std::accumulate(padded.begin(), padded.end(), int64_t{0}), gp.padded_rows);
}

namespace {

// cuBLASLt: 1 ms per GFLOP; DeepGEMM: FP8Block 30% faster, every other cell N/A with the rules'
// reason (cc 90), and a note the runner must copy into the run's notes.
class DgEngine : public test::FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode m, const std::string& provider) override {
    const double base = g.flops() / 1e9 * 1e-3;
    if (provider == kProviderCublasLt) return timed(base, "");
    if (provider == kProviderDeepGemm) {
      const Gemm shape = g.grouped() ? expert_gemm(g, 128) : g;
      const Recipe r = make_recipe(p, shape, RecipeOptions{});
      if (std::string why = deepgemm_cell_problem(g, r, 90); !why.empty()) return Cell::na(why);
      return timed(base * 0.7, g.grouped() ? "deepgemm sm90_m_grouped_fp8_gemm_contiguous_1d2d (test)"
                                           : "deepgemm sm90_fp8_gemm_1d2d (test)");
    }
    return Cell::na("provider " + provider + " is not available in this engine");
  }
  std::vector<std::string> provider_notes() const override { return {"deepgemm: 3 kernel(s) compiled (test)"}; }

 private:
  static Cell timed(double ms, const std::string& config) {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.stdev_ms = ms * 1e-3;
    s.iters = 10;
    Cell c = Cell::measured(s);
    c.kernels.config = config;
    return c;
  }
};

RunRequest moe_request(std::vector<std::string> providers) {
  RunRequest req;
  req.plan = build_model_plan(small_moe());
  req.precisions = {Precision::BF16, Precision::FP8Block};
  req.modes = {Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  req.providers = std::move(providers);
  return req;
}

}  // namespace

TEST(DeepGemmProvider, MultiProviderRunRoundTripsThroughJson) {
  DgEngine e;
  const RunResult r = run(e, moe_request({"cublaslt", "deepgemm"}));
  ASSERT_EQ(r.providers, (std::vector<std::string>{"cublaslt", "deepgemm"}));
  // The engine's provider notes and the provider's description are in the run's notes.
  EXPECT_NE(std::find(r.notes.begin(), r.notes.end(), "deepgemm: 3 kernel(s) compiled (test)"), r.notes.end());
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n == provider_note("deepgemm"); }));
  size_t measured = 0, bf16_measured = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    if (r.provider_cell(1, 0, g, 1).ok) ++measured;
    const Gemm& gg = r.plan.gemms[g];
    const Cell& bf = r.provider_cell(1, 0, g, 0);
    if (gg.grouped()) {
      EXPECT_TRUE(bf.ok) << "grouped BF16 through DeepGEMM (M- and K-grouped forms): " << bf.reason;
      if (bf.ok) ++bf16_measured;
    } else if (bf.ok) {
      ++bf16_measured;
    } else {
      EXPECT_TRUE(contains(bf.reason, "DeepGEMM")) << bf.reason;
    }
  }
  EXPECT_GT(measured, 0u);
  EXPECT_GT(bf16_measured, 0u) << "DeepGEMM's BF16 GEMM runs the BF16 column";
  // The router is BF16 in every column: DeepGEMM's BF16 GEMM measures it in the FP8Block column too.
  size_t routers = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g)
    if (r.plan.gemms[g].op == Op::Router) {
      EXPECT_TRUE(r.provider_cell(1, 0, g, 1).ok) << r.provider_cell(1, 0, g, 1).reason;
      ++routers;
    }
  EXPECT_GT(routers, 0u);
  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["providers"], (nlohmann::json{"cublaslt", "deepgemm"}));
  const RunResult back = from_json(j, "dg.json");
  ASSERT_EQ(back.providers, r.providers);
  for (size_t v = 0; v < 2; ++v)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& a = r.provider_cell(v, 0, g, p);
        const Cell& b = back.provider_cell(v, 0, g, p);
        ASSERT_EQ(a.ok, b.ok);
        if (!a.ok) {
          EXPECT_EQ(a.reason, b.reason);
          continue;
        }
        EXPECT_DOUBLE_EQ(a.stats.mean_ms, b.stats.mean_ms);
        EXPECT_EQ(a.kernels.provider, b.kernels.provider);
        EXPECT_EQ(a.kernels.config, b.kernels.config);
      }
  EXPECT_EQ(back.notes, r.notes);
  EXPECT_EQ(to_json(back).dump(), j.dump()) << "a second round trip changes nothing";
}

TEST(DeepGemmProvider, PaddingWasteOfItsSegmentsInTextAndJson) {
  DgEngine e;
  const RunResult r = run(e, moe_request({"cublaslt", "deepgemm"}));
  const Gemm& up = find(r.plan, Op::ExpertUp, Pass::Fprop);
  const std::vector<int64_t> padded = deepgemm_padded_group(up);
  const int64_t want = std::accumulate(padded.begin(), padded.end(), int64_t{0}) - up.m;
  ASSERT_GT(want, 0) << "a routing whose experts are all multiples of 128 would not test this";
  const std::vector<PaddingWaste> pw = padding_waste(r);
  const auto dg = std::find_if(pw.begin(), pw.end(), [](const PaddingWaste& w) { return w.provider == "deepgemm"; });
  ASSERT_NE(dg, pw.end());
  EXPECT_EQ(dg->waste_rows, want);
  EXPECT_EQ(dg->alignment, 128);
  const auto lt = std::find_if(pw.begin(), pw.end(), [](const PaddingWaste& w) { return w.provider == "cublaslt"; });
  ASSERT_NE(lt, pw.end());
  EXPECT_EQ(lt->waste_rows, padded_waste(up, Precision::FP8Block));
  EXPECT_LT(lt->waste_rows, dg->waste_rows) << "16-row alignment wastes less than 128";
  const std::string t = render_text(r);
  EXPECT_TRUE(contains(t, fmt::format("DeepGEMM FP8Block +{} rows", format_thousands(want)))) << t;
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j["plan"].contains("padding_waste"));
  bool found = false;
  for (const auto& w : j["plan"]["padding_waste"])
    if (w["provider"] == "deepgemm") {
      found = true;
      EXPECT_EQ(w["waste_rows"].get<int64_t>(), want);
      EXPECT_EQ(w["alignment"].get<int64_t>(), 128);
    }
  EXPECT_TRUE(found);
  // Without deepgemm among the providers, no DeepGEMM padding is reported.
  const RunResult one = run(e, moe_request({"cublaslt"}));
  EXPECT_FALSE(contains(render_text(one), "DeepGEMM FP8Block"));
  for (const PaddingWaste& w : padding_waste(one)) EXPECT_EQ(w.provider, "cublaslt");
}

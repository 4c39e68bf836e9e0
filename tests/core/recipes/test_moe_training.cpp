// MoE and Wgrad as training runs them (no GPU): FP32 main-gradient accumulation in the recipe and
// the traffic model, the quantization launches of fused vs per-expert grouped quantization, the
// presets' published or typical expert-parallel layout, the flags and their JSON round trip, and
// what the report header says.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "core/recipes/grouped.hpp"
#include "core/model/model_config.hpp"
#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/report/report_moe.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;
using gs::test::run_gemmscope;
using gs::test::scratch_dir;

namespace {

Gemm grouped(Pass pass, std::vector<int64_t> group, int64_t hidden = 256, int64_t ffn = 384) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::MoeLayer, group, hidden, ffn);
}

}  // namespace

TEST(WgradOutput, RecipeAccumulatesIntoFp32ExceptTheRouter) {
  RecipeOptions o;
  const Gemm w = grouped(Pass::Wgrad, {16, 0, 32});
  for (Precision p : kAllPrecisions) EXPECT_TRUE(make_recipe(p, w, o).fp32_accumulate) << to_string(p);
  EXPECT_FALSE(make_recipe(Precision::FP8Current, grouped(Pass::Fprop, {16, 0, 32}), o).fp32_accumulate);
  Gemm router = w;
  router.op = Op::Router;
  router.group_dim = GroupDim::None;
  router.group.clear();
  EXPECT_FALSE(make_recipe(Precision::FP8Current, router, o).fp32_accumulate);
  o.wgrad_fp32_accumulate = false;
  EXPECT_FALSE(make_recipe(Precision::FP8Current, w, o).fp32_accumulate);
}

TEST(WgradOutput, TrafficReadsAndWritesTheFp32GradientOfExpertsWithRows) {
  RecipeOptions o;
  const Gemm w = grouped(Pass::Wgrad, {16, 0, 32, 0});  // m = 384, n = 256, two experts with rows
  const double mn = 256.0 * 384.0;
  o.wgrad_fp32_accumulate = false;
  const ByteCount bf16 = byte_count(make_recipe(Precision::BF16, w, o), w);
  o.wgrad_fp32_accumulate = true;
  const ByteCount fp32 = byte_count(make_recipe(Precision::BF16, w, o), w);
  // BF16: every expert's gradient written (empty ones zeroed); FP32: read + written, experts with rows only.
  EXPECT_DOUBLE_EQ(fp32.gemm - bf16.gemm, 2 * mn * 8 - 4 * mn * 2);
  // A dense Wgrad: 8 bytes per weight element instead of 2.
  const Gemm d = linear_gemm(Pass::Wgrad, Op::MlpUp, Scope::Layer, 4096, 256, 384);
  o.wgrad_fp32_accumulate = false;
  const double b = byte_count(make_recipe(Precision::FP8Current, d, o), d).gemm;
  o.wgrad_fp32_accumulate = true;
  EXPECT_DOUBLE_EQ(byte_count(make_recipe(Precision::FP8Current, d, o), d).gemm - b, mn * 6);
}

TEST(GroupedQuant, FusedLaunchesDoNotGrowWithTheExpertCount) {
  RecipeOptions o;
  for (int experts : {8, 256}) {
    std::vector<int64_t> group(static_cast<size_t>(experts), 32);
    group[0] = 0;  // an empty expert quantizes nothing
    const Gemm g = grouped(Pass::Fprop, group);
    for (Precision p : {Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block}) {
      SCOPED_TRACE(std::string(to_string(p)) + " " + std::to_string(experts));
      const Recipe r = make_recipe(p, g, o);
      o.producer_amax = false;
      const OperandWork a = operand_work(Mode::Training, g, Side::Left, r, o);
      const OperandWork b = operand_work(Mode::Training, g, Side::Right, r, o);
      // Training mode, Fprop: X and W, each a dual cast (+ amax 2 for current, + update 1 for delayed).
      const int64_t per = p == Precision::FP8Current ? 6 : p == Precision::FP8Delayed ? 4 : 2;
      EXPECT_EQ(grouped_quant_launches(r, g, a, b, true), per);
      EXPECT_EQ(grouped_quant_launches(r, g, a, b, false), per * (experts - 1));
      // Pre-quantized: nothing in the timed region.
      EXPECT_EQ(grouped_quant_launches(r, g, operand_work(Mode::PreQuantized, g, Side::Left, r, o),
                                       operand_work(Mode::PreQuantized, g, Side::Right, r, o), true),
                0);
    }
  }
  EXPECT_FALSE(grouped_quant_fusable(make_recipe(Precision::BF16, grouped(Pass::Fprop, {16}), o)));
  EXPECT_FALSE(grouped_quant_fusable(make_recipe(Precision::MXFP8, grouped(Pass::Fprop, {32}), o)));
  EXPECT_FALSE(grouped_quant_fusable(make_recipe(Precision::NVFP4, grouped(Pass::Fprop, {32}), o)));
}

TEST(MoePresets, CarryTheirTrainingLayoutAndItsSource) {
  const ModelConfig v3 = find_preset("deepseek-v3").config;
  EXPECT_EQ(v3.moe.expert_parallel, 64);
  EXPECT_NE(v3.moe.parallel_source.find("published"), std::string::npos);
  EXPECT_NE(v3.moe.parallel_source.find("technical report"), std::string::npos);
  for (const char* name : {"mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"}) {
    const ModelConfig c = find_preset(name).config;
    EXPECT_EQ(c.moe.expert_parallel, 8) << name;
    EXPECT_NE(c.moe.parallel_source.find("typical"), std::string::npos) << name;
    EXPECT_EQ(c.moe.num_experts % c.moe.expert_parallel, 0) << name;
  }
  // The busiest of 64 ranks holds 4 of the 256 experts.
  const Plan p = build_model_plan(v3);
  for (const Gemm& g : p.gemms)
    if (g.op == Op::ExpertUp) EXPECT_EQ(g.group.size(), 4u);
  // Dense presets carry none.
  EXPECT_TRUE(find_preset("llama-3-8b").config.moe.parallel_source.empty());
}

namespace {

// Expert GEMMs take `expert_factor` x BF16's time in FP8, everything else half of it.
class MoeSpeedEngine : public gs::test::FakeEngineBase {
 public:
  explicit MoeSpeedEngine(double f) : FakeEngineBase("Fake"), expert_factor_(f) {}
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    double ms = g.flops() / 700e12 * 1e3;
    if (make_recipe(p, g, RecipeOptions{}).precision != Precision::BF16) ms *= g.grouped() ? expert_factor_ : 0.5;
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.iters = 1;
    return Cell::measured(s);
  }

 private:
  double expert_factor_;
};

RunRequest moe_request() {
  RunRequest req;
  ModelConfig c = find_preset("qwen3-30b-a3b").config;
  c.moe.routing = "balanced";
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current, Precision::FP8Block};
  req.modes = {Mode::Training};
  req.options.timing.gpu_warmup_s = 0;
  return req;
}

}  // namespace

TEST(MoeNotes, SayWhyFp8IsNotFasterInTheMoeLayer) {
  MoeSpeedEngine slow(1.5);
  RunResult r = run(slow, moe_request());
  int notes = 0;
  for (const std::string& n : r.notes)
    if (n.find("the MoE layer is not faster than BF16") != std::string::npos) {
      ++notes;
      EXPECT_NE(n.find("Traffic model"), std::string::npos) << n;
      EXPECT_NE(n.find("expert weights (each cast once per step)"), std::string::npos) << n;
      EXPECT_NE(n.find("FP32 main gradients"), std::string::npos) << n;
      EXPECT_NE(n.find("per expert"), std::string::npos) << n;
    }
  EXPECT_EQ(notes, 2);  // FP8Current and FP8Block
  MoeSpeedEngine fast(0.6);
  r = run(fast, moe_request());
  for (const std::string& n : r.notes) EXPECT_EQ(n.find("not faster than BF16"), std::string::npos) << n;
}

TEST(MoeGroupedBlock, SaysHowMuchOfTheGroupedCellsIsKernelTime) {
  MoeSpeedEngine e(1.0);
  RunResult r = run(e, moe_request());
  const size_t mode = 0;
  // No kernel records: no line.
  EXPECT_EQ(moe_grouped_block(r, mode).find("Kernel time in the grouped cells"), std::string::npos);
  // Every grouped BF16 cell traced: 2 launches of 0.25 x its mean time each, so half of it is kernels.
  double cell_ms = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    if (!r.plan.gemms[g].grouped()) continue;
    Cell& c = r.cells[mode][g][0];
    ASSERT_TRUE(c.ok);
    c.kernels.traced = true;
    c.kernels.kernels = {{"gemm_kernel", c.stats.mean_ms * 250.0, 2.0, KernelClass::Gemm}};
    cell_ms += c.stats.mean_ms;
  }
  ASSERT_GT(cell_ms, 0);
  const std::string block = moe_grouped_block(r, mode);
  const size_t at = block.find("Kernel time in the grouped cells");
  ASSERT_NE(at, std::string::npos) << block;
  EXPECT_NE(block.find(fmt::format("BF16 {:.3f} of {:.3f} ms (50%", cell_ms / 2, cell_ms), at), std::string::npos) << block;
  // FP8 cells were not traced: only BF16 is summed.
  EXPECT_EQ(block.find("FP8Current", at), std::string::npos) << block;
  // The table is one printer table: text keeps the columns one space apart, markdown has the same rows.
  EXPECT_EQ(block.find("Pass    Op              Groups Rows min..max"), block.find('\n') + 1) << block;
  print::Document d;
  add_moe_grouped(d, r, mode);
  EXPECT_EQ(print::render(d, print::Format::Text), block);
  const std::string md = print::render(d, print::Format::Markdown);
  EXPECT_NE(md.find("| Pass | Op | Groups | Rows min..max | BF16 eff |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Fprop | Expert Up | "), std::string::npos) << md;
  EXPECT_EQ(md.find("====="), std::string::npos) << md;
}

#ifdef GS_BINARY
TEST(MoePresets, HeaderNamesTheLayoutAndFlagsOverrideIt) {
  const auto dir = scratch_dir("moe_training");
  auto r = run_gemmscope("--dry-run --model deepseek-v3", dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("expert parallel 64 (4 local experts per rank; published: DeepSeek-V3 technical report"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Wgrad output: accumulated into FP32 main gradients"), std::string::npos);
  EXPECT_NE(r.out.find("Expert quantization: fused"), std::string::npos);
  EXPECT_NE(r.out.find("Quantization launches per Fprop Expert Up iteration"), std::string::npos);
  r = run_gemmscope("--dry-run --model deepseek-v3 --expert-parallel 1 --grouped-quant PER-EXPERT --wgrad-output BF16",
                    dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("expert parallel 1 (--expert-parallel)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Wgrad output: BF16, beta 0"), std::string::npos);
  EXPECT_NE(r.out.find("Expert quantization: per expert"), std::string::npos);
  for (const char* bad : {"--grouped-quant fused2", "--wgrad-output fp16"}) {
    r = run_gemmscope(std::string("--dry-run --model deepseek-v3 ") + bad, dir);
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_NE(r.err.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << r.err;
  }
}

TEST(MoePresets, SettingsRoundTripThroughJson) {
  const auto dir = scratch_dir("moe_training_json");
  const std::string f = (dir / "r.json").string();
  auto r = run_gemmscope("--dry-run --model qwen3-30b-a3b --grouped-quant per-expert --json " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string text = gs::test::slurp(f);
  EXPECT_NE(text.find("\"grouped_quant\": \"per-expert\""), std::string::npos);
  EXPECT_NE(text.find("\"wgrad_output\": \"fp32-accumulate\""), std::string::npos);
  EXPECT_NE(text.find("\"expert_parallel_source\": \"typical"), std::string::npos);
  r = run_gemmscope("report " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Expert quantization: per expert"), std::string::npos) << r.out;
}
#endif

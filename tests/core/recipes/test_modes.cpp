// Measurement modes: which GEMM quantizes which operand, the consumers of dual copies, the byte
// model of shared quantization, and the three-mode report.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "core/util/error.hpp"
#include "core/recipes/modes.hpp"
#include "core/model/model_config.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

const Gemm* find_gemm(const Plan& p, const Gemm& want) {
  for (const Gemm& g : p.gemms)
    if (g.pass == want.pass && g.op == want.op && g.scope == want.scope && g.m == want.m && g.k == want.k &&
        g.n == want.n && g.a.role == want.a.role && g.a.k_major == want.a.k_major && g.b.role == want.b.role &&
        g.b.k_major == want.b.k_major)
      return &g;
  return nullptr;
}

const Operand& operand(const Gemm& g, Side s) { return s == Side::Left ? g.a : g.b; }

}  // namespace

TEST(Modes, Names) {
  for (Mode m : {Mode::PerGemm, Mode::Training, Mode::PreQuantized}) EXPECT_EQ(mode_from_string(to_string(m)), m);
  EXPECT_EQ(mode_from_string("shared"), Mode::Training);
  EXPECT_THROW(mode_from_string("both"), UsageError);  // the CLI expands "both"; a result file never holds it
}

TEST(Modes, QuantWorkPerPass) {
  const Plan p = build_model_plan(default_config());
  for (const Gemm& g : p.gemms)
    for (Side s : {Side::Left, Side::Right}) {
      EXPECT_EQ(quant_work(Mode::PerGemm, g, s), QuantWork::Own);
      EXPECT_EQ(quant_work(Mode::PreQuantized, g, s), QuantWork::None);
      const QuantWork w = quant_work(Mode::Training, g, s);
      switch (g.pass) {
        case Pass::Fprop: EXPECT_EQ(w, QuantWork::Dual); break;
        case Pass::Dgrad: EXPECT_EQ(w, s == Side::Left ? QuantWork::Dual : QuantWork::None); break;
        case Pass::Wgrad: EXPECT_EQ(w, QuantWork::None); break;
        case Pass::Shape: FAIL();
      }
    }
  const Gemm shape = build_shapes_plan("1024x2048x4096").gemms[0];
  EXPECT_EQ(quant_work(Mode::Training, shape, Side::Left), QuantWork::Own);
  EXPECT_EQ(quant_work(Mode::Training, shape, Side::Right), QuantWork::Own);
}

// Every tensor of every linear (X, W, dY) is quantized exactly once per step in autocast-shared,
// and the other copy of that quantization is consumed by a GEMM of the plan, transposed.
TEST(Modes, DualConsumersAreInThePlan) {
  for (const char* preset : {"codonfm-5b", "llama-3-8b", "llama-3-70b"}) {
    ModelConfig c = find_preset(preset).config;
    c.vocab_size = 32000;  // include the LM head
    for (int64_t tp : {int64_t{1}, int64_t{8}}) {
      c.tensor_parallel = tp;
      const Plan p = build_model_plan(c);
      std::map<std::tuple<Op, Scope, Role>, int> duals, uses;
      for (const Gemm& g : p.gemms)
        for (Side s : {Side::Left, Side::Right}) {
          ++uses[{g.op, g.scope, operand(g, s).role}];
          if (quant_work(Mode::Training, g, s) != QuantWork::Dual) continue;
          ++duals[{g.op, g.scope, operand(g, s).role}];
          const DualConsumer dc = dual_consumer(g, s);
          const Gemm* found = find_gemm(p, dc.gemm);
          ASSERT_NE(found, nullptr) << preset << " " << pass_label(g.pass) << " " << g.label();
          EXPECT_NE(found->pass, g.pass);
          EXPECT_EQ(operand(*found, dc.side).role, operand(g, s).role);
          EXPECT_NE(operand(*found, dc.side).k_major, operand(g, s).k_major);  // the transposed copy
        }
      for (const auto& [key, n] : uses) {
        EXPECT_EQ(n, 2);
        EXPECT_EQ(duals[key], 1) << to_string(std::get<0>(key)) << " " << to_string(std::get<2>(key));
      }
    }
  }
  const Plan p = build_model_plan(default_config());
  EXPECT_THROW(dual_consumer(p.gemms.back(), Side::Left), std::invalid_argument);  // a Wgrad
}

TEST(Modes, ByteModelOfSharedQuantization) {
  const Plan p = build_model_plan(default_config());
  const Gemm& f = p.gemms[0];  // Fprop QKV 15872x4096x12288
  ASSERT_EQ(f.pass, Pass::Fprop);
  const Recipe cur = make_recipe(Precision::FP8Current, f, RecipeOptions{});
  const double mk = 15872.0 * 4096, kn = 4096.0 * 12288;
  // Own: amax read 2 + cast read 2 + write 1 (+ a 4-byte scale) per operand.
  EXPECT_DOUBLE_EQ(byte_count(cur, f).quantize, (mk + kn) * 5 + 8);
  // Dual: the same reads, both copies written.
  EXPECT_DOUBLE_EQ(byte_count(cur, f, QuantWork::Dual, QuantWork::Dual).quantize, (mk + kn) * 6 + 16);
  EXPECT_DOUBLE_EQ(byte_count(cur, f, QuantWork::None, QuantWork::None).quantize, 0);
  EXPECT_DOUBLE_EQ(byte_count(cur, f, QuantWork::None, QuantWork::None).gemm, byte_count(cur, f).gemm);
  // NVFP4 is not fused: two full passes.
  const Recipe nv = make_recipe(Precision::NVFP4, f, RecipeOptions{});
  EXPECT_DOUBLE_EQ(byte_count(nv, f, QuantWork::Dual, QuantWork::None).quantize,
                   2 * byte_count(nv, f, QuantWork::Own, QuantWork::None).quantize);
  // Per layer: each tensor once at 6 B/element instead of twice at 5 B/element.
  double own = 0, shared = 0;
  for (const Gemm& g : p.gemms) {
    const Recipe r = make_recipe(Precision::FP8Current, g, RecipeOptions{});
    own += byte_count(r, g).quantize;
    shared += byte_count(r, g, quant_work(Mode::Training, g, Side::Left),
                         quant_work(Mode::Training, g, Side::Right)).quantize;
  }
  EXPECT_NEAR(shared / own, 0.6, 1e-6);
}

TEST(Modes, ProducerAmaxOnlyForFusedProducersUnderSharedCurrentScaling) {
  const Plan p = build_model_plan(default_config());
  RecipeOptions on, off;
  off.producer_amax = false;
  int fused = 0;
  for (const Gemm& g : p.gemms)
    for (Side s : {Side::Left, Side::Right})
      for (Precision prec : {Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block, Precision::NVFP4}) {
        const Recipe r = make_recipe(prec, g, on);
        const OperandWork w = operand_work(Mode::Training, g, s, r, on);
        EXPECT_EQ(w.work, quant_work(Mode::Training, g, s));
        EXPECT_FALSE(operand_work(Mode::Training, g, s, r, off).producer_amax);
        EXPECT_FALSE(operand_work(Mode::PerGemm, g, s, r, on).producer_amax);
        const bool expect = prec == Precision::FP8Current && s == Side::Left &&
                            ((g.pass == Pass::Fprop && g.op != Op::AttnOut) || (g.pass == Pass::Dgrad && g.op == Op::MlpUp));
        EXPECT_EQ(w.producer_amax, expect) << pass_label(g.pass) << " " << g.label() << " " << to_string(prec);
        fused += w.producer_amax;
      }
  EXPECT_EQ(fused, 4);
  // The byte model drops exactly those amax reads: 2 B per element of the four tensors.
  double with = 0, without = 0, fused_elems = 0;
  for (const Gemm& g : p.gemms) {
    const Recipe r = make_recipe(Precision::FP8Current, g, on);
    with += byte_count(r, g, operand_work(Mode::Training, g, Side::Left, r, on),
                       operand_work(Mode::Training, g, Side::Right, r, on)).quantize;
    without += byte_count(r, g, operand_work(Mode::Training, g, Side::Left, r, off),
                          operand_work(Mode::Training, g, Side::Right, r, off)).quantize;
    if (operand_work(Mode::Training, g, Side::Left, r, on).producer_amax)
      fused_elems += static_cast<double>(g.m) * static_cast<double>(g.k);
  }
  EXPECT_DOUBLE_EQ(without - with, 2 * fused_elems);
  EXPECT_DOUBLE_EQ(fused_elems, 15872.0 * (4096 + 4096 + 16384 + 16384));
}

namespace {

// Fake times: the GEMM at a precision rate plus a quantization cost per byte of the mode's work.
class ModeEngine : public test::FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode m, const std::string&) override {
    const Recipe r = make_recipe(p, g, RecipeOptions{});
    const ByteCount bc = byte_count(r, g, quant_work(m, g, Side::Left), quant_work(m, g, Side::Right));
    const double ms = g.flops() / (p == Precision::BF16 ? 700e12 : 1300e12) * 1e3 + bc.quantize / 3e12 * 1e3;
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.iters = 1;
    return Cell::measured(s);
  }
};

}  // namespace

TEST(Modes, ThreeModeReport) {
  ModeEngine e;
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PerGemm, Mode::Training, Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  const RunResult r = run(e, req);
  const std::string text = render_text(r);
  // The lead table is the full model's, and says so.
  EXPECT_NE(text.find("Per-gemm vs Training vs Pre-quantized (full model: every GEMM of one training step, 24 layers):"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Training ovh ms"), std::string::npos);
  EXPECT_NE(text.find("training mode: each tensor is quantized once per step"), std::string::npos);
  // Overheads: 12.42 GB vs 7.45 GB of modelled quantization traffic per layer at 3 TB/s.
  const ModeSummary ac = summarize_mode(r, 0), sh = summarize_mode(r, 1), pq = summarize_mode(r, 2);
  const double ovh_ac = *ac.sums[1].total - *pq.sums[1].total, ovh_sh = *sh.sums[1].total - *pq.sums[1].total;
  EXPECT_NEAR(ovh_sh / ovh_ac, 0.6, 1e-6);
  EXPECT_NE(text.find(fmt::format("{:.3f}", *sh.sums[1].full_model - *pq.sums[1].full_model)), std::string::npos);
  // JSON keeps the mode and round-trips.
  const RunResult back = from_json(to_json(r));
  ASSERT_EQ(back.modes.size(), 3u);
  EXPECT_EQ(back.modes[1], Mode::Training);
  EXPECT_DOUBLE_EQ(back.cell(1, 0, 1).stats.mean_ms, r.cell(1, 0, 1).stats.mean_ms);
}

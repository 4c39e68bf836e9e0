// The step context's model (core/plan/step_model.hpp) and its reports (core/report/report_step.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/report/report_step.hpp"
#include "core/results/step_context_records.hpp"
#include "core/run/runner.hpp"
#include "core/plan/step_model.hpp"
#include "test_util.hpp"

namespace {

using gs::StepContextKind;

// A Qwen3-1.7B-like layer: hidden 2048, GQA 16/8 x 128, SwiGLU 6144, 4 x 4096 tokens.
gs::ModelConfig small_layer() {
  gs::ModelConfig c = gs::default_config();
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.num_hidden_layers = 1;
  c.micro_batch_size = 4;
  c.sequence_length = 4096;
  c.gated_mlp = true;
  c.vocab_size = 0;
  return c;
}

// Hand count, T = 16384 tokens, h = 2048, q = 2048, kv = 1024, f = 6144, in elements:
//   eager: norms and residuals 24 T h (forward: 2 norms x 2 + 2 adds x 3; backward: 2 norm backwards
//   x 4 + 2 gradient adds x 3); key/value head repeat and its backward 4 T (kv + q); the QKV
//   gradient's concatenation 2 T (q + 2 kv); SwiGLU 18 T f (forward 5, backward 13). = 2,952,790,016.
//   te: 22 T h (norm backward 3 instead of 4) + 8 T f; no repeat, no concatenation = 1,543,503,872.
//   compile: 17 T h + repeat + concatenation + 8 T f = 1,811,939,328 + ... (below).
TEST(StepModel, MemoryBoundBytesOfAKnownLayer) {
  const gs::Plan plan = gs::build_model_plan(small_layer());
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::Eager).other_bytes, 2.0 * 2952790016.0);
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::TransformerEngine).other_bytes, 2.0 * 1543503872.0);
  const double T = 16384, h = 2048, q = 2048, kv = 1024, f = 6144;
  const double compiled = 17 * T * h + 4 * T * (kv + q) + 2 * T * (q + 2 * kv) + 8 * T * f;
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::Compiled).other_bytes, 2.0 * compiled);
  // none runs no modelled work, but carries Transformer Engine's bytes to split a --step-other-ms figure.
  const gs::StepWorkModel none = gs::step_work_model(plan, StepContextKind::None);
  EXPECT_FALSE(none.active());
  EXPECT_DOUBLE_EQ(none.other_bytes, 2.0 * 1543503872.0);
  EXPECT_EQ(none.move_bytes, 0);  // a dense layer dispatches nothing
  // FP8 casts: X and W of every Fprop, dY of every Dgrad, 6 bytes per element (read twice, two
  // one-byte copies). Fprop: QKV 16384x2048 + 2048x4096, Attn-out 16384x2048 + 2048x2048, MLP-up
  // 16384x2048 + 2048x12288, MLP-down 16384x6144 + 6144x2048; Dgrad dY: 16384 x (4096 + 2048 + 12288 + 2048).
  const double fprop = 3 * T * 2048 + T * 6144 + 2048.0 * 4096 + 2048.0 * 2048 + 2048.0 * 12288 + 6144.0 * 2048;
  const double dgrad = T * (4096 + 2048 + 12288 + 2048);
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::Eager).cast_bytes, 6.0 * (fprop + dgrad));
}

TEST(StepModel, AttentionShapeOfAKnownLayer) {
  const gs::AttentionShape a = gs::attention_shape(small_layer());
  EXPECT_EQ(a.heads_q, 16);
  EXPECT_EQ(a.heads_kv, 8);
  EXPECT_TRUE(a.causal);
  // 4 x 16 heads x 2 x 4096^2 x (128 + 128), halved by the causal mask.
  EXPECT_DOUBLE_EQ(gs::attention_fwd_flops(a), 274877906944.0);
  EXPECT_DOUBLE_EQ(gs::attention_bwd_flops(a), 2.5 * 274877906944.0);
  // Tensor parallelism splits the heads; fewer kv heads than ranks keep one per rank.
  gs::ModelConfig c = small_layer();
  c.tensor_parallel = 16;
  const gs::AttentionShape t = gs::attention_shape(c);
  EXPECT_EQ(t.heads_q, 1);
  EXPECT_EQ(t.heads_kv, 1);
  // MLA: every head its own key and value, head dims qk_nope + qk_rope and v.
  const gs::AttentionShape m = gs::attention_shape(gs::find_preset("deepseek-v3").config);
  EXPECT_EQ(m.d_qk, 192);
  EXPECT_EQ(m.d_v, 128);
  EXPECT_EQ(m.heads_q, m.heads_kv);
}

// Attention as the framework runs it: eager and compiled PyTorch repeat the key/value heads of a GQA
// layer before SDPA (whose copies are in their bytes), Transformer Engine runs native GQA.
TEST(StepModel, AttentionAsTheFrameworkRunsIt) {
  const gs::Plan plan = gs::build_model_plan(small_layer());
  EXPECT_EQ(gs::step_work_model(plan, StepContextKind::TransformerEngine).attention.heads_kv, 8);
  EXPECT_EQ(gs::step_work_model(plan, StepContextKind::Eager).attention.heads_kv, 16);
  EXPECT_EQ(gs::step_work_model(plan, StepContextKind::Compiled).attention.heads_kv, 16);
  EXPECT_FALSE(gs::repeats_kv_heads(StepContextKind::TransformerEngine));
  // The same FLOPs either way: only the K/V traffic differs.
  EXPECT_DOUBLE_EQ(gs::attention_fwd_flops(gs::step_work_model(plan, StepContextKind::Eager).attention),
                   gs::attention_fwd_flops(gs::attention_shape(small_layer())));
}

// The forward's share of the memory-bound bytes (the whole step places them in their pass), from the
// hand count above: te forward (2 x 2 + 2 x 3) T h + SwiGLU 3 T f; eager forward 10 T h + repeat
// 2 T (kv + q) + SwiGLU 5 T f.
TEST(StepModel, ForwardShareOfTheBytes) {
  const gs::Plan plan = gs::build_model_plan(small_layer());
  const double T = 16384, h = 2048, f = 6144, q = 2048, kv = 1024;
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::TransformerEngine).other_fwd_bytes,
                   2.0 * (10 * T * h + 3 * T * f));
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::Eager).other_fwd_bytes,
                   2.0 * (10 * T * h + 2 * T * (kv + q) + 5 * T * f));
  const gs::StepWorkModel m = gs::step_work_model(plan, StepContextKind::Compiled);
  EXPECT_LT(m.other_fwd_bytes, m.other_bytes);
  EXPECT_LT(m.cast_fwd_bytes, m.cast_bytes);
  EXPECT_GT(m.cast_fwd_bytes, 0);
}

// FP8 casts at one rate in every framework (the casts are their own kernels): the compiled step's
// elementwise rate does not speed them up.
TEST(StepModel, CastsAtOneRate) {
  const gs::Plan plan = gs::build_model_plan(small_layer());
  const gs::StepWorkModel eager = gs::step_work_model(plan, StepContextKind::Eager);
  const gs::StepWorkModel compiled = gs::step_work_model(plan, StepContextKind::Compiled);
  EXPECT_DOUBLE_EQ(gs::modelled_cast_ms(eager, 1e9), eager.cast_bytes / (1e9 * gs::kCastRate));
  EXPECT_DOUBLE_EQ(gs::modelled_cast_ms(compiled, 1e9), gs::modelled_cast_ms(eager, 1e9));
  EXPECT_DOUBLE_EQ(gs::modelled_cast_ms(eager, 0), 0);
}

// The work per layer of a model with MoE layers averages its dense and MoE layers, and an MoE
// layer moves its tokens to the experts and back.
TEST(StepModel, MoeLayersAddTheirDispatch) {
  gs::ModelConfig c = gs::find_preset("mixtral-8x7b").config;
  const gs::StepWorkModel one = gs::step_work_model(gs::build_model_plan(c), StepContextKind::TransformerEngine);
  c.moe.top_k = 4;
  const gs::StepWorkModel four = gs::step_work_model(gs::build_model_plan(c), StepContextKind::TransformerEngine);
  EXPECT_GT(four.other_bytes, one.other_bytes);  // the experts' activations over twice the rows
  EXPECT_GT(one.layer_gflops, 0);
  // Dispatch and combine: 4 passes (permute, unpermute; forward, backward) x (read + write) x
  // T x top_k rows x hidden, 2 bytes each; every layer of Mixtral is an MoE layer.
  const double T = static_cast<double>(c.tokens()), h = static_cast<double>(c.hidden_size);
  EXPECT_DOUBLE_EQ(one.move_bytes, 2.0 * 4 * 2 * T * 2 * h);
  EXPECT_DOUBLE_EQ(four.move_bytes, 2.0 * one.move_bytes);
  // The same bytes whatever the framework (how fused they are is in the rate, not the bytes).
  EXPECT_DOUBLE_EQ(gs::step_work_model(gs::build_model_plan(c), StepContextKind::Eager).move_bytes, four.move_bytes);
}

// FP8 casts of an MoE layer: each expert's weight is cast (Transformer Engine's grouped linear and a
// per-expert loop alike), not one weight for the grouped GEMM; the router stays BF16 and casts
// nothing. Mixtral on one GPU (EP 1): h 4096, q 4096 + kv 2 x 1024, 8 experts of 14336 (gate and
// up fused), top-2: T x 2 rows over the experts.
TEST(StepModel, MoeCastsEveryExpertsWeight) {
  gs::ModelConfig c = gs::find_preset("mixtral-8x7b").config;
  c.moe.expert_parallel = 1;
  const gs::Plan plan = gs::build_model_plan(c);
  const double T = static_cast<double>(c.tokens()), rows = 2 * T, h = 4096, f = 14336, E = 8;
  const double fprop = T * h + h * 6144 + T * h + h * h + rows * h + E * h * 2 * f + rows * f + E * f * h;
  const double dgrad = T * 6144 + T * h + rows * 2 * f + rows * h;
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::TransformerEngine).cast_bytes, 6.0 * (fprop + dgrad));
  EXPECT_DOUBLE_EQ(gs::step_work_model(plan, StepContextKind::TransformerEngine).cast_fwd_bytes, 6.0 * fprop);
}

// A --step-other-ms figure is split between the activation-like and the gather stand-ins in the
// proportion of their modelled times; without MoE layers all of it is activation-like.
TEST(StepModel, UserFigureSplitsByModelledTime) {
  gs::StepWorkModel m;
  m.other_bytes = 300;
  m.move_bytes = 0;
  m.efficiency = 1.0;
  gs::StepOtherSplit s = gs::split_step_other_ms(m, 8.0, 10.0, 20.0);
  EXPECT_EQ(s.other_ms, 8.0);
  EXPECT_EQ(s.move_ms, 0.0);
  m.move_bytes = 200;  // modelled: other 300 / 10 = 30, move 200 / 20 = 10 -> a quarter moves
  const gs::StepOtherSplit t = gs::modelled_memory_ms(m, 10.0, 20.0);
  EXPECT_DOUBLE_EQ(t.other_ms, 30.0);
  EXPECT_DOUBLE_EQ(t.move_ms, 10.0);
  EXPECT_EQ(gs::modelled_memory_ms(m, 0.0, 20.0).other_ms, 0.0);  // no rate, no time
  s = gs::split_step_other_ms(m, 8.0, 10.0, 20.0);
  EXPECT_DOUBLE_EQ(s.move_ms, 2.0);
  EXPECT_DOUBLE_EQ(s.other_ms, 6.0);
  m.efficiency = 1.5;  // the framework's activations run faster: a larger share moves
  s = gs::split_step_other_ms(m, 8.0, 10.0, 20.0);
  EXPECT_DOUBLE_EQ(s.move_ms, 8.0 * 10.0 / 30.0);
  EXPECT_DOUBLE_EQ(s.other_ms + s.move_ms, 8.0);
  EXPECT_EQ(gs::split_step_other_ms(m, 0.0, 10.0, 20.0).move_ms, 0.0);  // nothing to split
  // A real MoE model: a share strictly between 0 and 1, the whole figure kept.
  const gs::StepWorkModel mx = gs::step_work_model(gs::build_model_plan(gs::find_preset("mixtral-8x7b").config),
                                                   StepContextKind::None);
  s = gs::split_step_other_ms(mx, 5.0, 2.0e9, 2.5e9);
  EXPECT_GT(s.move_ms, 0.5);
  EXPECT_LT(s.move_ms, 4.5);
  EXPECT_NEAR(s.other_ms + s.move_ms, 5.0, 1e-12);
}

TEST(StepModel, NamesAndRefusals) {
  EXPECT_EQ(gs::step_context_from_string("TE"), StepContextKind::TransformerEngine);
  EXPECT_EQ(gs::step_context_from_string("Eager"), StepContextKind::Eager);
  EXPECT_EQ(gs::step_context_from_string("COMPILE"), StepContextKind::Compiled);
  EXPECT_EQ(gs::step_context_from_string("none"), StepContextKind::None);
  try {
    gs::step_context_from_string("eagr");
    FAIL() << "a misspelt framework was accepted";
  } catch (const gs::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("eager"), std::string::npos) << e.what();
  }
  const gs::Plan shapes = gs::build_shapes_plan("1024x1024x1024");
  EXPECT_THROW(gs::step_work_model(shapes, StepContextKind::Eager), gs::UsageError);
  EXPECT_NO_THROW(gs::step_work_model(shapes, StepContextKind::None));
}

// A result as the engine returns it: two precisions, one pre-quantized mode, per-layer GEMMs 10
// (BF16) and 5 ms (FP8Current) over the layer's twelve GEMMs.
gs::RunResult measured_result() {
  gs::RunResult r;
  r.plan = gs::build_model_plan(small_layer());
  r.precisions = {gs::Precision::BF16, gs::Precision::FP8Current};
  r.modes = {gs::Mode::PreQuantized};
  r.allocate_cells();
  const double n = static_cast<double>(r.plan.gemms.size());
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    r.cell(0, g, 0) = gs::Cell::measured(gs::summarize({10.0 / n}));
    r.cell(0, g, 1) = gs::Cell::measured(gs::summarize({5.0 / n}));
  }
  r.timing.step_context_kind = StepContextKind::Eager;
  gs::StepContextInfo c;
  c.kind = StepContextKind::Eager;
  c.efficiency = 1.05;
  c.stream_gb_per_s = 2200;
  c.other_ms = 2.25;
  c.move_ms = 0.75;  // other kernels 3 ms in all
  c.move_gb_per_s = 2500;
  c.cast_ms = 1;
  c.attention_fwd_ms = 0.5;
  c.attention_bwd_ms = 1.5;
  c.attention_measured = true;
  c.attention_source = "cuDNN test";
  gs::set_step_context_records(r, c);
  return r;
}

// GEMMs + attention + other, the FP8 casts only where the timed region left them out; the step
// speedup is the step times' ratio.
TEST(StepModel, StepEstimateAndSpeedup) {
  const gs::RunResult r = measured_result();
  const auto e = gs::step_estimates(r, 0);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NEAR(*e[0].step_ms(), 10 + 2 + 3, 1e-9);
  EXPECT_NEAR(*e[1].step_ms(), 5 + 2 + 3 + 1, 1e-9);
  const std::string block = gs::step_estimate_block(r, 0);
  EXPECT_NE(block.find("2.00x"), std::string::npos) << block;  // GEMM speedup 10 / 5
  EXPECT_NE(block.find("1.36x"), std::string::npos) << block;  // step speedup 15 / 11
  const std::string lines = gs::step_context_lines(r);
  EXPECT_NE(lines.find("cuDNN test"), std::string::npos) << lines;
  // The memory-bound total, and the part run as the gather stand-in.
  EXPECT_NE(lines.find("other kernels 3.000 ms"), std::string::npos) << lines;
  EXPECT_NE(lines.find("of which 0.750 ms MoE token dispatch and combine"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("not its power"), std::string::npos) << lines;  // modelled work: no caveat
  // The user's figure: its time runs as the stand-ins, and the header says what that leaves out.
  gs::RunResult user = r;
  gs::StepContextInfo given = *gs::step_context_view(user);
  given.other_from_user = true;
  gs::set_step_context_records(user, given);
  const std::string user_lines = gs::step_context_lines(user);
  EXPECT_NE(user_lines.find("other kernels 3.000 ms (--step-other-ms, your step's figure, split by the modelled bytes"),
            std::string::npos)
      << user_lines;
  EXPECT_NE(user_lines.find("carry its time, not its power"), std::string::npos) << user_lines;
  // The table's text layout, and the same rows in markdown from the same document.
  EXPECT_NE(block.find("                   GEMMs  attention    other      step  GEMM speedup  step speedup\n"
                       "BF16              10.000      2.000    3.000    15.000\n"
                       "FP8Current         5.000      2.000    4.000    11.000         2.00x         1.36x\n"),
            std::string::npos)
      << block;
  gs::print::Document d;
  gs::add_step_estimate(d, r, 0);
  const std::string md = gs::print::render(d, gs::print::Format::Markdown);
  EXPECT_NE(md.find("|  | GEMMs | attention | other | step | GEMM speedup | step speedup |\n"
                    "|---|---:|---:|---:|---:|---:|---:|\n"
                    "| BF16 | 10.000 | 2.000 | 3.000 | 15.000 |  |  |\n"
                    "| FP8Current | 5.000 | 2.000 | 4.000 | 11.000 | 2.00x | 1.36x |\n"),
            std::string::npos)
      << md;
  // Training mode times the casts with the GEMMs: none added.
  gs::RunResult t = r;  // the same cells, as training mode's
  t.modes = {gs::Mode::Training};
  t.records.clear();
  gs::set_step_context_records(t, *gs::step_context_view(r));
  t.allocate_cells();
  for (size_t g = 0; g < t.plan.gemms.size(); ++g)
    for (size_t p = 0; p < t.precisions.size(); ++p) t.cell(0, g, p) = r.cell(0, g, p);
  EXPECT_NEAR(*gs::step_estimates(t, 0)[1].step_ms(), 5 + 2 + 3, 1e-9);
}

TEST(StepModel, JsonRoundTrip) {
  const gs::RunResult r = measured_result();
  const nlohmann::json j = gs::to_json(r);
  EXPECT_EQ(j["timing"]["step_context"], "eager");
  EXPECT_NEAR(j["step_estimate_per_layer"]["pre-quantized"]["FP8Current"]["step_ms"].get<double>(), 11, 1e-9);
  EXPECT_FALSE(j.contains("step_context"));  // records (core/results/step_context_records.hpp)
  const gs::RunResult back = gs::from_json(j);
  const std::optional<gs::StepContextInfo> c = gs::step_context_view(back);
  ASSERT_TRUE(c);
  EXPECT_EQ(back.timing.step_context_kind, StepContextKind::Eager);
  EXPECT_EQ(c->other_ms, 2.25);
  EXPECT_EQ(c->move_ms, 0.75);
  EXPECT_EQ(c->move_gb_per_s, 2500);
  EXPECT_EQ(c->attention_bwd_ms, 1.5);
  EXPECT_TRUE(c->attention_measured);
  EXPECT_EQ(c->attention_source, "cuDNN test");
  // Files from before the step context read as none; a hostile kind is refused naming the field.
  nlohmann::json old = j;
  old["timing"].erase("step_context");
  nlohmann::json records = nlohmann::json::array();
  for (const auto& rec : j["records"])
    if (rec["kind"] != "attention" && rec["kind"] != "step-work") records.push_back(rec);
  old["records"] = records;
  old["items"].erase("attention");
  old["items"].erase("step-work");
  EXPECT_EQ(gs::from_json(old).timing.step_context_kind, StepContextKind::None);
  EXPECT_FALSE(gs::step_context_view(gs::from_json(old)));
  nlohmann::json bad = j;
  for (auto& rec : bad["records"])
    if (rec["kind"] == "step-work" && rec["values"].contains("kind")) rec["values"]["kind"] = "turbo";
  try {
    gs::from_json(bad);
    FAIL() << "a bad step context kind was accepted";
  } catch (const gs::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("(step-work other): values.kind must be one of te, eager, compile, none"),
              std::string::npos)
        << e.what();
  }
}

// The runner records what the engine says ran between iterations.
class ContextEngine : public gs::test::FakeEngineBase {
 public:
  gs::Cell measure(const gs::Gemm&, gs::Precision, gs::Mode, const std::string&) override { return gs::Cell::measured(gs::summarize({1.0})); }
  std::optional<gs::StepContextInfo> step_context() const override { return gs::test::fake_step_context(); }
};

TEST(StepModel, RunnerRecordsTheEnginesContext) {
  gs::RunRequest req;
  req.plan = gs::build_model_plan(small_layer());
  req.precisions = {gs::Precision::BF16};
  req.modes = {gs::Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.step_context_kind = StepContextKind::TransformerEngine;
  ContextEngine engine;
  const gs::RunResult r = gs::run(engine, req);
  const std::optional<gs::StepContextInfo> c = gs::step_context_view(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->other_ms, gs::test::fake_step_context().other_ms);
  EXPECT_EQ(c->attention_source, gs::test::fake_step_context().attention_source);
  EXPECT_NE(gs::render_text(r).find("Step estimate of the average layer"), std::string::npos);
}

// The CLI's default: Transformer Engine's context for model plans, none for standalone shapes.
TEST(StepModel, CliDefaults) {
  const auto dir = gs::test::scratch_dir("step_model_cli");
  const std::string f = (dir / "r.json").string();
  auto r = gs::test::run_gemmscope("--dry-run -q --json " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(gs::test::slurp(f))["timing"]["step_context"], "te");
  r = gs::test::run_gemmscope("--dry-run -q --shapes 1024 --json " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(gs::test::slurp(f))["timing"]["step_context"], "none");
  r = gs::test::run_gemmscope("--dry-run -q --shapes 1024 --step-context eager", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--step-context eager needs a model plan"), std::string::npos) << r.err;
  r = gs::test::run_gemmscope("--dry-run -q --step-context EAGER --json " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(gs::test::slurp(f))["timing"]["step_context"], "eager");
}

}  // namespace

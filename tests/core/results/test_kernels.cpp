// Kernel records (core/results/kernels.hpp): name classification, the precision check that flags silent
// fallbacks, aggregation of traced launches, algorithm/autotune records through JSON, --algo
// parsing, the runner's kernel notes, and the TE-default block recipes with pow2 scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/formats/formats.hpp"
#include "core/results/kernels.hpp"
#include "core/run/settings.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// Names as CUPTI reports them on an H100 (cuBLASLt's are extern "C"; ours are demangled by the
// backend) and a few other libraries' spellings.
const char* kBf16Nvjet = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopB_NTT";
const char* kFp8Fast = "nvjet_sm90_qqtst_128x256_128x6_2x1_v_bz_coopA_TNT";
const char* kFp8Split = "nvjet_sm90_qrtst_128x128_128x6_2x1_v_bz_TNT";
const char* kFp8Block = "nvjet_sm90_qqtst_128x128_128x4_1x2_h_bz_Avec128_Bblk128_TNT";
const char* kOurCast = "gs::cuda::(anonymous namespace)::transpose_kernel<(gs::cuda::Fp8Kind)0, 3, 2, true, false>";
const char* kOurAmax = "_ZN2gs4cuda12_GLOBAL__N_119amax_partial_kernelEPK13__nv_bfloat16mPj";
const char* kGate = "gs::cuda::(anonymous namespace)::gate_kernel";

// A cell's kernel records through their JSON field table, written and read.
void kernels_to_json(const CellKernels& k, nlohmann::json& cell) { json_fields::write_fields(kernel_fields(), k, cell); }
CellKernels kernels_from_json(const nlohmann::json& cell, const std::string& where) {
  CellKernels k;
  json_fields::read_fields(kernel_fields(), cell, k, where);
  return k;
}
nlohmann::json algo_to_json(const AlgoRecord& a) {
  CellKernels k;
  k.algo = a;
  nlohmann::json cell = nlohmann::json::object();
  kernels_to_json(k, cell);
  return cell["algo"];
}

KernelStat stat(const char* name, double us = 10, double count = 1) {
  KernelStat s;
  s.name = name;
  s.mean_us = us;
  s.count = count;
  s.cls = classify_kernel(name);
  return s;
}

}  // namespace

TEST(KernelNames, Classification) {
  EXPECT_EQ(classify_kernel(kBf16Nvjet), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel(kFp8Fast), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel(kFp8Block), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16"), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>"), KernelClass::Gemm);
  EXPECT_EQ(classify_kernel(kOurCast), KernelClass::Quantize);
  EXPECT_EQ(classify_kernel(kOurAmax), KernelClass::Quantize);
  EXPECT_EQ(classify_kernel("gs::cuda::(anonymous namespace)::alpha_from_global_scales"), KernelClass::Quantize);
  EXPECT_EQ(classify_kernel(kGate), KernelClass::Other);
  EXPECT_EQ(classify_kernel("gs::cuda::(anonymous namespace)::fill_kernel"), KernelClass::Other);
  // The step's own kernels (cuda/stepwork/), demangled and mangled: not quantization, even where a
  // name holds "scale" or "cast".
  EXPECT_EQ(classify_kernel("gs::cuda::stepwork::(anonymous namespace)::adamw_kernel<float, float, 5>"),
            KernelClass::Other);
  EXPECT_EQ(classify_kernel("void gs::cuda::stepwork::(anonymous namespace)::convert_kernel<float, __nv_bfloat16>"),
            KernelClass::Other);
  EXPECT_EQ(classify_kernel("_ZN2gs4cuda8stepwork12_GLOBAL__N_113l2norm_kernelIfEEvNS1_11TensorBatchILi1EEEPf"),
            KernelClass::Other);
  EXPECT_EQ(classify_kernel("transformer_engine::cast_transpose_kernel<float>"), KernelClass::Quantize);
  EXPECT_EQ(classify_kernel("at::native::vectorized_elementwise_kernel<4>"), KernelClass::Other);
  EXPECT_EQ(kernel_class_from_string("quantize"), KernelClass::Quantize);
  EXPECT_THROW(kernel_class_from_string("GEMM"), UsageError);
}

TEST(KernelNames, GemmInputTypes) {
  EXPECT_EQ(gemm_kernel_inputs(kBf16Nvjet), KernelInputs::BF16);
  EXPECT_EQ(gemm_kernel_inputs(kFp8Fast), KernelInputs::FP8);
  EXPECT_EQ(gemm_kernel_inputs(kFp8Split), KernelInputs::FP8);
  EXPECT_EQ(gemm_kernel_inputs("nvjet_sm90_rqtst_64x8_64x16_4x1_v_bz_TNT"), KernelInputs::FP8);
  EXPECT_EQ(gemm_kernel_inputs("nvjet_sm90_hsh_128x256_64x4_2x1_v_bz_TNN"), KernelInputs::FP16);
  EXPECT_EQ(gemm_kernel_inputs("nvjet_sm90_sss_128x128_32x4_1x1_v_bz_TNN"), KernelInputs::FP32);
  EXPECT_EQ(gemm_kernel_inputs("nvjet_sm100_xyz_256x256"), KernelInputs::Unknown);
  EXPECT_EQ(gemm_kernel_inputs("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16"), KernelInputs::FP8);
  EXPECT_EQ(gemm_kernel_inputs("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"), KernelInputs::BF16);
  EXPECT_EQ(gemm_kernel_inputs("cutlass_sm100_nvf4_gemm"), KernelInputs::FP4);
  EXPECT_EQ(gemm_kernel_inputs("some_gemm"), KernelInputs::Unknown);
}

TEST(KernelNames, FlagsASilentFallback) {
  // An FP8 cell that ran a BF16 GEMM kernel: flagged, naming the kernel.
  const std::string f = kernel_flag(Precision::FP8Current, {stat(kOurCast), stat(kBf16Nvjet)});
  EXPECT_NE(f.find("reads BF16 inputs in a FP8Current cell"), std::string::npos) << f;
  EXPECT_NE(f.find(kBf16Nvjet), std::string::npos);
  // The right kernels: no flag.
  EXPECT_EQ(kernel_flag(Precision::FP8Current, {stat(kOurCast), stat(kFp8Fast)}), "");
  EXPECT_EQ(kernel_flag(Precision::FP8Block, {stat(kFp8Block)}), "");
  EXPECT_EQ(kernel_flag(Precision::BF16, {stat(kBf16Nvjet)}), "");
  EXPECT_NE(kernel_flag(Precision::BF16, {stat(kFp8Fast)}), "");
  EXPECT_NE(kernel_flag(Precision::NVFP4, {stat(kFp8Fast)}), "");
  // No GEMM at all (only quantization kernels): flagged.
  EXPECT_NE(kernel_flag(Precision::FP8Delayed, {stat(kOurAmax)}).find("no GEMM kernel"), std::string::npos);
  // A name that does not tell its types is not flagged (we cannot know), nor is split-K's reduction.
  EXPECT_EQ(kernel_flag(Precision::MXFP8, {stat("nvjet_sm100_xyz_256x256")}), "");
  EXPECT_EQ(kernel_flag(Precision::FP8Current, {stat(kFp8Split), stat("splitKreduce_kernel<bf16>")}), "");
}

TEST(KernelRecords, AggregatesLaunchesPerIteration) {
  const std::vector<KernelLaunch> l = {{"a", 1000}, {"g", 5000}, {"a", 3000}, {"g", 7000}, {"a", 2000}, {"g", 6000}};
  const std::vector<KernelStat> s = aggregate_launches(l, 3);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "a");  // first-launch order
  EXPECT_DOUBLE_EQ(s[0].mean_us, 2.0);
  EXPECT_DOUBLE_EQ(s[0].count, 1.0);
  EXPECT_DOUBLE_EQ(s[1].mean_us, 6.0);
  // Two launches of one kernel per iteration.
  const std::vector<KernelStat> t = aggregate_launches({{"x", 100}, {"x", 300}, {"x", 200}, {"x", 400}}, 2);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].count, 2.0);
  EXPECT_DOUBLE_EQ(t[0].mean_us, 0.25);
  CellKernels k;
  k.kernels = {stat(kOurCast, 30, 2), stat(kFp8Fast, 100, 1), stat(kGate, 1, 1)};
  EXPECT_DOUBLE_EQ(k.class_us(KernelClass::Quantize), 60);
  EXPECT_DOUBLE_EQ(k.class_us(KernelClass::Gemm), 100);
  EXPECT_DOUBLE_EQ(k.class_us(KernelClass::Other), 1);
}

TEST(KernelRecords, AlgorithmAndAutotuneRoundTripThroughJson) {
  CellKernels k;
  k.traced = true;
  k.trace_iters = 3;
  k.kernels = {stat(kOurCast, 12.5, 2), stat(kFp8Split, 301.25, 1)};
  k.flag = "something odd";
  AlgoRecord a;
  a.id = 66;
  a.tile = 20;
  a.tile_name = "128x256";
  a.stages = 17;
  a.stages_name = "64x4";
  a.split_k = 2;
  a.reduction = 1;
  a.swizzle = 1;
  a.custom = 3;
  a.cluster = 3;
  a.cluster_name = "2x1x1";
  a.rank = 4;
  k.algo = a;
  AutotuneRecord t;
  t.k = 8;
  t.tried = 7;
  t.heuristic_us = 310;
  t.chosen_us = 300;
  t.confirmed = true;
  t.heuristic = a;
  t.heuristic.rank = 0;
  t.heuristic.id = 31;
  k.autotune = t;
  nlohmann::json cell = {{"status", "ok"}};
  kernels_to_json(k, cell);
  EXPECT_NEAR(cell["autotune"]["gain"].get<double>(), 310.0 / 300.0, 1e-12);
  EXPECT_EQ(cell["kernels"][1]["class"], "gemm");
  EXPECT_DOUBLE_EQ(cell["kernel_time_us"]["quantize"].get<double>(), 25.0);
  const CellKernels b = kernels_from_json(nlohmann::json::parse(cell.dump()), "x");
  ASSERT_TRUE(b.traced);
  EXPECT_EQ(b.trace_iters, 3);
  ASSERT_EQ(b.kernels.size(), 2u);
  EXPECT_EQ(b.kernels[0].name, kOurCast);
  EXPECT_EQ(b.kernels[0].cls, KernelClass::Quantize);
  EXPECT_DOUBLE_EQ(b.kernels[1].mean_us, 301.25);
  EXPECT_EQ(b.flag, "something odd");
  ASSERT_TRUE(b.algo && b.autotune);
  EXPECT_EQ(algo_to_json(*b.algo), algo_to_json(a));
  EXPECT_EQ(b.algo->summary(), "algo 66 tile 128x256 stages 64x4 splitK 2 swizzle 1 cluster 2x1x1");
  EXPECT_EQ(b.autotune->tried, 7);
  EXPECT_EQ(b.autotune->heuristic.id, 31);
  EXPECT_DOUBLE_EQ(b.autotune->gain(), t.gain());
  EXPECT_TRUE(b.autotune->confirmed);
  EXPECT_EQ(b.autotune->searched, 0);
  EXPECT_LT(b.autotune->output_rel_diff, 0) << "not checked: no field written";
  EXPECT_FALSE(cell["autotune"].contains("searched"));
  // --algo search: a pick found beyond the heuristic's list (rank -1) with its screen counts and
  // its output check round-trips, and the tables say where it came from.
  CellKernels sk = k;
  sk.algo->rank = -1;
  sk.autotune->searched = 384;
  sk.autotune->screen_faster = 12;
  sk.autotune->output_rel_diff = 0.0;
  nlohmann::json sc = {{"status", "ok"}};
  kernels_to_json(sk, sc);
  EXPECT_EQ(sc["autotune"]["searched"], 384);
  const CellKernels sb = kernels_from_json(nlohmann::json::parse(sc.dump()), "x");
  ASSERT_TRUE(sb.algo && sb.autotune);
  EXPECT_EQ(sb.algo->rank, -1);
  EXPECT_EQ(sb.autotune->searched, 384);
  EXPECT_EQ(sb.autotune->screen_faster, 12);
  EXPECT_DOUBLE_EQ(sb.autotune->output_rel_diff, 0.0);
  sc["autotune"]["output_rel_diff"] = "none";
  EXPECT_THROW(kernels_from_json(sc, "x"), UsageError);
  // An untraced cell keeps its reason; bad types are named.
  CellKernels u;
  u.trace_note = "no CUPTI";
  nlohmann::json c2 = nlohmann::json::object();
  kernels_to_json(u, c2);
  EXPECT_EQ(kernels_from_json(c2, "x").trace_note, "no CUPTI");
  nlohmann::json bad = cell;
  bad["algo"]["split_k"] = "two";
  EXPECT_THROW(kernels_from_json(bad, "x"), UsageError);
  bad = cell;
  bad["kernels"][0]["class"] = "fast";
  EXPECT_THROW(kernels_from_json(bad, "x"), UsageError);
}

TEST(KernelRecords, AlgoOption) {
  GemmOptions o;
  parse_algo_option("autotune", o);
  EXPECT_EQ(o.algo, AlgoChoice::Autotune);
  EXPECT_EQ(o.autotune_k, 8);
  parse_algo_option("autotune:3", o);
  EXPECT_EQ(o.autotune_k, 3);
  EXPECT_EQ(algo_option_string(o), "autotune:3");
  parse_algo_option("heuristic", o);
  EXPECT_EQ(o.algo, AlgoChoice::Heuristic);
  EXPECT_EQ(algo_option_string(o), "heuristic");
  EXPECT_THROW(parse_algo_option("autotune:0", o), UsageError);
  EXPECT_THROW(parse_algo_option("autotune:x", o), UsageError);
  EXPECT_THROW(parse_algo_option("fastest", o), UsageError);
  parse_algo_option("search", o);
  EXPECT_EQ(o.algo, AlgoChoice::Search);
  EXPECT_EQ(algo_option_string(o), "search:3") << "K carries over from autotune:3";
  parse_algo_option("search:12", o);
  EXPECT_EQ(o.autotune_k, 12);
  EXPECT_EQ(gemm_options_from_json(gemm_options_to_json(o), "g").algo, AlgoChoice::Search);
  EXPECT_THROW(parse_algo_option("search:65", o), UsageError);
  EXPECT_THROW(parse_algo_option("search:", o), UsageError);
  EXPECT_THROW(parse_algo_option("searchy", o), UsageError);
  o.num_sms = 66;
  o.profile = true;
  parse_algo_option("autotune:5", o);
  const GemmOptions b = gemm_options_from_json(gemm_options_to_json(o), "g");
  EXPECT_EQ(b.algo, AlgoChoice::Autotune);
  EXPECT_EQ(b.autotune_k, 5);
  EXPECT_EQ(b.num_sms, 66);
  EXPECT_TRUE(b.profile);
}

TEST(KernelRecords, RangeName) {
  const Gemm g{Pass::Dgrad, Op::MlpUp, Scope::Layer, 4096, 16384, 4096, {Role::Grad, true}, {Role::Weight, false}};
  EXPECT_EQ(cell_range_name(Mode::PerGemm, g, Precision::FP8Block), "gemmscope/per-gemm/dgrad/mlp_up/FP8Block");
}

namespace {

// Fake engine that reports kernels: FP8 cells of MLP-up run a BF16 GEMM kernel (a fallback).
class KernelEngine : public test::FakeEngineBase {
 public:
  KernelEngine() : FakeEngineBase("Fake") {}
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = 1;
    s.iters = 1;
    Cell c = Cell::measured(s);
    c.kernels.traced = true;
    c.kernels.trace_iters = 1;
    const bool fallback = p != Precision::BF16 && g.op == Op::MlpUp && g.pass == Pass::Fprop;
    // What the backend runs: the recipe's precision (the LM head is BF16 by design in every column).
    const bool bf16 = make_recipe(p, g, RecipeOptions{}).precision == Precision::BF16;
    c.kernels.kernels = {stat(bf16 || fallback ? kBf16Nvjet : kFp8Fast, 900)};
    AlgoRecord a;
    a.id = 7;
    c.kernels.algo = a;
    return c;
  }
};

// The default model's plan, pre-quantized, in `precisions`, no GPU warm-up.
RunRequest model_request(std::vector<Precision> precisions) {
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = std::move(precisions);
  req.modes = {Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  return req;
}

}  // namespace

TEST(KernelRecords, RunnerFlagsFallbacksInTextAndJson) {
  KernelEngine e;
  RunRequest req = model_request({Precision::BF16, Precision::FP8Current});
  req.options.gemm.num_sms = 66;
  RunResult r = run(e, req);
  int flagged = 0;
  for (const auto& n : r.notes) flagged += n.find("KERNEL CHECK") != std::string::npos;
  EXPECT_EQ(flagged, 1);
  bool sms_note = false;
  for (const auto& n : r.notes) sms_note |= n.find("--num-sms 66") != std::string::npos;
  EXPECT_TRUE(sms_note);
  const std::string table = render_kernel_table(r);
  EXPECT_NE(table.find("KERNEL CHECK: GEMM kernel nvjet_sm90_tst"), std::string::npos);
  EXPECT_NE(table.find("(heuristic rank 0)"), std::string::npos);
  EXPECT_EQ(table.find("found by search"), std::string::npos);
  EXPECT_NE(table.find("cuBLASLt algo 7"), std::string::npos);
  // The JSON keeps the flag and the options; a round trip keeps both.
  const nlohmann::json j = to_json(r);
  int flags = 0;
  for (size_t g = 0; g < j["gemms"].size(); ++g)
    if (!test::record(j, g, "pre-quantized", "FP8Current")["kernel_flag"].is_null()) ++flags;
  EXPECT_EQ(flags, 1);
  EXPECT_EQ(j["gemm_options"]["num_sms"], 66);
  const RunResult b = from_json(j);
  EXPECT_EQ(b.gemm_options.num_sms, 66);
  EXPECT_EQ(to_json(b).dump(), j.dump());
}

// BF16-by-design cells (the LM head under --lm-head-precision bf16, the router) run BF16 kernels in
// every column: never a fallback. The real fallback (MLP-up Fprop here) still is, once per column.
TEST(KernelRecords, BF16ByDesignCellsAreNotFallbacks) {
  KernelEngine e;
  RunRequest req = model_request({Precision::BF16, Precision::FP8Current, Precision::FP8Block});
  ModelConfig c = default_config();
  c.vocab_size = 32000;
  req.plan = build_model_plan(c);
  RunResult r = run(e, req);
  int flagged = 0, lm_head = 0;
  for (const auto& n : r.notes)
    if (n.find("KERNEL CHECK") != std::string::npos) {
      ++flagged;
      lm_head += n.find("LM Head") != std::string::npos || n.find("lm") != std::string::npos;
    }
  EXPECT_EQ(flagged, 2);  // MLP-up Fprop in FP8Current and FP8Block
  EXPECT_EQ(lm_head, 0);
  // With the LM head in the column's precision its BF16 kernel is a fallback again.
  req.options.recipe.lm_head_bf16 = false;
  r = run(e, req);
  flagged = 0;
  for (const auto& n : r.notes) flagged += n.find("KERNEL CHECK") != std::string::npos;
  EXPECT_EQ(flagged, 2 + 2 * 3);  // + the LM head's three passes in both FP8 columns
}

// A result file is re-judged by today's rule when read: an H100 run written before the LM head was
// exempted (--lm-head-precision bf16 recorded, its BF16 kernels flagged in 27 FP8 cells) raises
// no alarm now, in the notes, the cells or the kernel table; a real fallback still does.
TEST(KernelRecords, OldFilesAreRejudgedByTodaysRule) {
  const std::string path = std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json";
  nlohmann::json doc = read_json_file(path, "result");
  int stale = 0;
  for (const auto& n : doc["notes"]) stale += n.get<std::string>().find("KERNEL CHECK") != std::string::npos;
  ASSERT_EQ(stale, 27) << "the fixture should still hold the old alarms";
  const RunResult r = from_json(doc, path);
  EXPECT_TRUE(r.recipe_options.lm_head_bf16);
  for (const std::string& n : r.notes) EXPECT_EQ(n.find("KERNEL CHECK"), std::string::npos) << n;
  r.for_each_cell([](size_t, size_t, size_t, size_t, const Cell& c) { EXPECT_EQ(c.kernels.flag, ""); });
  EXPECT_EQ(render_text(r).find("silent fallback"), std::string::npos);
  EXPECT_EQ(render_kernel_table(r).find("KERNEL CHECK"), std::string::npos);
  // The same file with the LM head in the columns' precision: its BF16 kernels are alarms again.
  doc["recipe_options"]["lm_head_precision"] = "same";
  int again = 0;
  for (const std::string& n : from_json(doc, path).notes) again += n.find("KERNEL CHECK") != std::string::npos;
  EXPECT_EQ(again, 27);
}

TEST(KernelRecords, SearchRunSaysWhatItSearched) {
  // A run with --algo search whose cells kept a searched configuration: the note names search,
  // the kernel table says where the pick came from and how it was checked.
  class SearchEngine : public KernelEngine {
   public:
    Cell measure(const Gemm& g, Precision p, Mode m, const std::string& provider) override {
      Cell c = KernelEngine::measure(g, p, m, provider);
      c.kernels.algo->rank = -1;
      AutotuneRecord t;
      t.k = 8;
      t.tried = 12;
      t.searched = 300;
      t.screen_faster = 4;
      t.heuristic_us = 1000;
      t.chosen_us = 950;
      t.confirmed = true;
      t.output_rel_diff = 1e-3;
      c.kernels.autotune = t;
      return c;
    }
  } e;
  RunRequest req = model_request({Precision::BF16});
  parse_algo_option("search", req.options.gemm);
  RunResult r = run(e, req);
  bool note = false;
  for (const auto& n : r.notes) note |= n.find("--algo search:8") != std::string::npos;
  EXPECT_TRUE(note);
  const std::string table = render_kernel_table(r);
  EXPECT_NE(table.find("(found by search)"), std::string::npos);
  EXPECT_NE(table.find("300 searched configurations screened, 4 beat"), std::string::npos);
  EXPECT_NE(table.find("relative difference 1.0e-03"), std::string::npos);
  EXPECT_NE(render_autotune_table(r).find("1.053x"), std::string::npos);
}

TEST(BlockRecipes, TransformerEngineDefaults) {
  const Gemm dgrad{Pass::Dgrad, Op::Qkv, Scope::Layer, 4096, 12288, 4096, {Role::Grad, true}, {Role::Weight, false}};
  RecipeOptions o;  // defaults
  for (Precision p : {Precision::FP8Block, Precision::MXFP8}) {
    const Recipe r = make_recipe(p, dgrad, o);
    EXPECT_EQ(r.a.format, ElemFormat::E4M3) << to_string(p) << ": gradients are E4M3 by default";
    EXPECT_EQ(r.b.format, ElemFormat::E4M3);
  }
  EXPECT_TRUE(make_recipe(Precision::FP8Block, dgrad, o).a.pow2_scales);
  EXPECT_FALSE(make_recipe(Precision::FP8Current, dgrad, o).a.pow2_scales);
  // Per-tensor recipes keep hybrid (TE's Float8CurrentScaling / DelayedScaling default).
  EXPECT_EQ(make_recipe(Precision::FP8Current, dgrad, o).a.format, ElemFormat::E5M2);
  o.block_fp8_format = Fp8Format::Hybrid;
  o.fp8_block_pow2_scales = false;
  EXPECT_EQ(make_recipe(Precision::FP8Block, dgrad, o).a.format, ElemFormat::E5M2);
  EXPECT_EQ(make_recipe(Precision::MXFP8, dgrad, o).a.format, ElemFormat::E5M2);
  EXPECT_FALSE(make_recipe(Precision::FP8Block, dgrad, o).a.pow2_scales);
  o.fp8_block_pow2_scales = true;
  o.fp8_block_via_mxfp8 = true;  // Blackwell: UE8M0 scales are powers of two by construction
  EXPECT_FALSE(make_recipe(Precision::FP8Block, dgrad, o).a.pow2_scales);
}

TEST(BlockRecipes, PowerOfTwoScaleReference) {
  using nf::Fp8;
  // Exact scale 448/3 = 149.33 -> 128; 448/448 = 1 stays 1; E5M2 57344/1 = 57344 -> 32768.
  EXPECT_FLOAT_EQ(nf::fp8_block_scale(3.f, Fp8::E4M3, false), 448.f / 3.f);
  EXPECT_EQ(nf::fp8_block_scale(3.f, Fp8::E4M3, true), 128.f);
  EXPECT_EQ(nf::fp8_block_scale(448.f, Fp8::E4M3, true), 1.f);
  EXPECT_EQ(nf::fp8_block_scale(1.f, Fp8::E5M2, true), 32768.f);
  EXPECT_EQ(nf::fp8_block_scale(0.f, Fp8::E4M3, true), 1.f);
  EXPECT_EQ(nf::fp8_block_scale(std::nanf(""), Fp8::E4M3, true), 1.f);
  // Over a dense sweep of amax: a power of two, never above the exact scale, above half of it.
  for (float amax = 1e-30f; amax < 1e30f; amax *= 1.37f) {
    const float e = nf::fp8_block_scale(amax, Fp8::E4M3, false);
    const float p = nf::fp8_block_scale(amax, Fp8::E4M3, true);
    int ex = 0;
    EXPECT_EQ(std::frexp(p, &ex), 0.5f) << amax;
    EXPECT_LE(p, e);
    EXPECT_GT(p, e / 2);
    EXPECT_LE(amax * p, 448.f) << "never saturates more than the exact scale";
  }
}

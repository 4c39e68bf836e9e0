// GPU spec database, roofline classification and `gemmscope predict` (CPU only).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/analysis/predict.hpp"
#include "core/report/report.hpp"
#include "core/analysis/roofline.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace gs;
using nlohmann::json;

namespace {

const std::string kSpecPath = std::string(GS_SOURCE_DIR) + "/data/gpus.json";

const GpuDb& db() {
  static const GpuDb d = read_gpu_db_file(kSpecPath);
  return d;
}

RunResult fixture(const std::string& name) {
  return from_json(read_json_file(std::string(GS_TEST_DATA_DIR) + "/" + name), name);
}

json minimal_db(json gpu) { return {{"schema", "gemmscope.gpus/1"}, {"gpus", json::array({gpu})}}; }

json one_gpu() {
  const json src = {{"value", 1.0}, {"source", "a datasheet, table 1"}};
  return {{"key", "X1"}, {"name", "X one"}, {"arch", "hopper"}, {"match", {"X1"}}, {"compute_capability", "9.0"},
          {"sm_count", src}, {"boost_clock_mhz", nullptr}, {"memory_bandwidth_gbs", src}, {"l2_bytes", nullptr},
          {"memory_bytes", nullptr}, {"tdp_w", nullptr},
          {"tflops", {{"BF16", src}, {"FP8", nullptr}, {"MXFP8", nullptr}, {"NVFP4", nullptr}}}};
}

Gemm gemm(int64_t m, int64_t k, int64_t n) {
  return Gemm{Pass::Shape, Op::Shape, Scope::Shape, m, k, n, {Role::Activation, true}, {Role::Weight, true}};
}

}  // namespace

TEST(GpuSpec, DatabaseHasTheRequiredGpusAndEveryNumberHasASource) {
  for (const char* key : {"H100", "H100-PCIe", "H100-NVL", "H200", "H200-NVL", "H800", "H20", "GH200", "B200", "B300",
                          "GB200", "GB300", "RTX-PRO-6000", "L40S", "RTX-4090", "A100", "A100-PCIe"})
    EXPECT_NO_THROW(db().find(key)) << key;
  for (const GpuSpec& s : db().gpus) {
    SCOPED_TRACE(s.key);
    EXPECT_FALSE(s.name.empty());
    for (const auto* v : {&s.sm_count, &s.boost_clock_mhz, &s.bandwidth_gbs, &s.l2_bytes, &s.memory_bytes, &s.tdp_w})
      if (*v) {
        EXPECT_GT((*v)->value, 0);
        EXPECT_GE((*v)->source.size(), 10u) << "a real source, not a placeholder";
      }
    bool any_peak = false;
    for (PeakFormat f : kAllPeakFormats)
      if (s.peak(f)) {
        any_peak = true;
        EXPECT_GE(s.peak(f)->source.size(), 10u);
      }
    EXPECT_TRUE(any_peak);
    // Dense, not sparse: FP8 is twice BF16 wherever both are given (Hopper, Ada, Blackwell).
    if (s.peak(PeakFormat::BF16) && s.peak(PeakFormat::FP8))
      EXPECT_NEAR(s.peak(PeakFormat::FP8)->value / s.peak(PeakFormat::BF16)->value, 2.0, 0.03);
  }
  // Spot values from the datasheets (dense).
  EXPECT_NEAR(db().find("H100").peak(PeakFormat::BF16)->value, 989.4, 0.1);
  EXPECT_NEAR(db().find("H100").bandwidth_gbs->value, 3350, 1);
  EXPECT_NEAR(db().find("H200").bandwidth_gbs->value, 4800, 1);
  EXPECT_NEAR(db().find("B300").peak(PeakFormat::FP8)->value, 4500, 1);
  EXPECT_FALSE(db().find("A100").peak(PeakFormat::FP8).has_value());
}

TEST(GpuSpec, DeviceNamesMatchByWholeWords) {
  const auto key = [](const std::string& name) {
    const GpuSpec* s = db().match_device(name);
    return s ? s->key : std::string("(none)");
  };
  EXPECT_EQ(key("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(key("NVIDIA H100 PCIe"), "H100-PCIe");
  EXPECT_EQ(key("NVIDIA H100 NVL"), "H100-NVL");
  EXPECT_EQ(key("NVIDIA H200"), "H200");
  EXPECT_EQ(key("NVIDIA H200 NVL"), "H200-NVL");
  EXPECT_EQ(key("NVIDIA H800"), "H800");
  EXPECT_EQ(key("NVIDIA H20"), "H20");
  EXPECT_EQ(key("NVIDIA GH200 480GB"), "GH200");
  EXPECT_EQ(key("NVIDIA GH200 144G HBM3e"), "GH200-144G");
  EXPECT_EQ(key("NVIDIA B200"), "B200");
  EXPECT_EQ(key("NVIDIA GB200"), "GB200");
  EXPECT_EQ(key("NVIDIA B300 SXM6 AC"), "B300");
  EXPECT_EQ(key("NVIDIA GB300"), "GB300");
  EXPECT_EQ(key("NVIDIA RTX PRO 6000 Blackwell Server Edition"), "RTX-PRO-6000");
  EXPECT_EQ(key("NVIDIA L40S"), "L40S");
  EXPECT_EQ(key("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(key("NVIDIA A100 80GB PCIe"), "A100-PCIe");
  EXPECT_EQ(key("NVIDIA A100-PCIE-40GB"), "A100-PCIe");
  EXPECT_EQ(key("NVIDIA GeForce RTX 4090"), "RTX-4090");
  EXPECT_EQ(key("NVIDIA GeForce RTX 4090 D"), "(none)");  // another chip (114 SMs): no guess
  EXPECT_EQ(key("NVIDIA GeForce RTX 4080"), "(none)");
  EXPECT_EQ(key("NVIDIA H1000"), "(none)");
  // --gpu takes keys in any case and with '-', '_' or ' ', or a device name.
  EXPECT_EQ(db().find("b300").key, "B300");
  EXPECT_EQ(db().find("h200 nvl").key, "H200-NVL");
  EXPECT_EQ(db().find("rtx_pro_6000").key, "RTX-PRO-6000");
  EXPECT_EQ(db().find("NVIDIA H100 80GB HBM3").key, "H100");
  try {
    db().find("H300");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown GPU 'H300' (did you mean "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(") (known: "), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("B300"), std::string::npos);
  }
}

TEST(GpuSpec, ParserRefusesUnsourcedOrBadNumbers) {
  EXPECT_NO_THROW(parse_gpu_db(minimal_db(one_gpu()), "t"));
  json g = one_gpu();
  g["sm_count"] = {{"value", 132}};
  EXPECT_THROW(parse_gpu_db(minimal_db(g), "t"), UsageError);  // no source
  g = one_gpu();
  g["sm_count"] = {{"value", 132}, {"source", ""}};
  EXPECT_THROW(parse_gpu_db(minimal_db(g), "t"), UsageError);
  g = one_gpu();
  g["tflops"]["BF16"] = {{"value", -1}, {"source", "x datasheet"}};
  EXPECT_THROW(parse_gpu_db(minimal_db(g), "t"), UsageError);
  g = one_gpu();
  g.erase("tdp_w");  // absent is not null: every field is stated
  EXPECT_THROW(parse_gpu_db(minimal_db(g), "t"), UsageError);
  g = one_gpu();
  g["memory_bandwidth_gbs"] = nullptr;
  EXPECT_THROW(parse_gpu_db(minimal_db(g), "t"), UsageError);
  json two = minimal_db(one_gpu());
  two["gpus"].push_back(one_gpu());
  EXPECT_THROW(parse_gpu_db(two, "t"), UsageError);  // duplicate key
  EXPECT_THROW(parse_gpu_db(json{{"schema", "other"}}, "t"), UsageError);
  EXPECT_THROW(parse_gpu_db(json::array(), "t"), UsageError);
}

TEST(Roofline, HandComputedClassification) {
  const GpuSpec& h100 = db().find("H100");
  // 8192^3 BF16, kernel only: 2*8192^3 FLOPs over A, B (BF16) and C (BF16): 3 * 8192^2 * 2 bytes.
  const Gemm big = gemm(8192, 8192, 8192);
  Cell c = Cell::measured(Stats{1.5, 1.5, 1.5, 1.5, 0, 100});
  c.clock = ClockSample{1350, 1980, 4};
  const auto pt = roofline_point(h100, big, Precision::BF16, Mode::PreQuantized, RecipeOptions{}, &c);
  ASSERT_TRUE(pt);
  EXPECT_DOUBLE_EQ(pt->flops, 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_DOUBLE_EQ(pt->bytes, 3.0 * 8192 * 8192 * 2);
  EXPECT_NEAR(pt->intensity, 2730.67, 0.01);
  EXPECT_NEAR(pt->ridge, 989.4e12 / 3350e9, 1e-6);  // 295.3 FLOP/B
  EXPECT_TRUE(pt->compute_bound);
  EXPECT_NEAR(pt->roofline_ms, 1.09951e12 / 989.4e12 * 1e3, 1e-4);  // compute roof: 1.111 ms
  EXPECT_NEAR(*pt->achieved_tflops, 733.0, 0.1);
  EXPECT_NEAR(*pt->pct_peak, 74.09, 0.01);
  // 100.4% at the sampled clock: the sample is not the clock the cell ran at, so it is left out.
  EXPECT_FALSE(pt->pct_peak_at_clock);
  c.clock = ClockSample{1800, 1980, 4};
  const auto pt2 = roofline_point(h100, big, Precision::BF16, Mode::PreQuantized, RecipeOptions{}, &c);
  ASSERT_TRUE(pt2 && pt2->pct_peak_at_clock);
  EXPECT_NEAR(*pt2->pct_peak_at_clock, 74.09 * 1830.0 / 1800.0, 0.02);
  // 16 tokens: the weight dominates the bytes, 16 FLOP/B: memory-bound, the roof is bytes / bandwidth.
  const Gemm skinny = gemm(16, 8192, 8192);
  const auto sk = roofline_point(h100, skinny, Precision::BF16, Mode::PreQuantized, RecipeOptions{}, nullptr);
  ASSERT_TRUE(sk);
  EXPECT_DOUBLE_EQ(sk->bytes, 16.0 * 8192 * 2 + 8192.0 * 8192 * 2 + 16.0 * 8192 * 2);
  EXPECT_NEAR(sk->intensity, 15.94, 0.01);
  EXPECT_FALSE(sk->compute_bound);
  EXPECT_NEAR(sk->roofline_ms, sk->bytes / 3350e9 * 1e3, 1e-9);
  EXPECT_FALSE(sk->achieved_tflops);
  // FP8 on the same GPU: twice the peak, so the ridge doubles; autocast adds quantization bytes.
  const auto f8 = roofline_point(h100, big, Precision::FP8Current, Mode::PerGemm, RecipeOptions{}, nullptr);
  const auto f8k = roofline_point(h100, big, Precision::FP8Current, Mode::PreQuantized, RecipeOptions{}, nullptr);
  EXPECT_NEAR(f8->ridge, 2 * pt->ridge, 0.5);
  EXPECT_GT(f8->bytes, f8k->bytes);
  // No peak for the format: no point (A100 has no FP8).
  EXPECT_FALSE(roofline_point(db().find("A100"), big, Precision::FP8Current, Mode::PreQuantized, RecipeOptions{}, nullptr));
}

TEST(Roofline, TextAndJsonOfAMeasuredRun) {
  const RunResult r = fixture("model_5b_both_modes.json");  // an H200 NVL run
  const RooflineContext ctx{db().match_device(r.device->name), ""};
  ASSERT_TRUE(ctx.spec);
  EXPECT_EQ(ctx.spec->key, "H200-NVL");
  const std::string text = render_roofline_text(r, ctx);
  EXPECT_NE(text.find("Per-layer efficiency"), std::string::npos) << text;
  EXPECT_NE(text.find("NVIDIA H200 NVL"), std::string::npos);
  const json j = roofline_json(r, ctx);
  EXPECT_EQ(j["gpu"], "H200-NVL");
  // QKV Fprop BF16 per-gemm (the fixture's "autocast"): 2.722 ms for 15872x4096x12288 against 835.5 TFLOP/s.
  bool found = false;
  for (const json& c : j["cells"])
    if (c["mode"] == "per-gemm" && c["gemm"] == 0 && c["precision"] == "BF16") {
      found = true;
      EXPECT_NEAR(c["pct_peak"].get<double>(), 100 * 2.0 * 15872 * 4096 * 12288 / 2.722e-3 / 835.5e12, 1e-6);
      EXPECT_EQ(c["bound"], "compute");
    }
  EXPECT_TRUE(found);
  EXPECT_TRUE(j["per_layer"]["per-gemm"]["BF16"]["pct_peak"].is_number());
  EXPECT_TRUE(j["per_layer"]["pre-quantized"]["FP8Block"]["pct_peak"].is_null());  // an N/A cell
  // Unknown GPU: no numbers, the note says why.
  const RooflineContext none{nullptr, "GPU 'X' is not in the GPU spec database"};
  EXPECT_NE(render_roofline_text(r, none).find("not in the GPU spec database"), std::string::npos);
  EXPECT_TRUE(roofline_json(r, none)["gpu"].is_null());
}

TEST(Predict, WaveQuantization) {
  EXPECT_DOUBLE_EQ(wave_efficiency(gemm(128 * 132, 64, 256), 132), 1.0);
  EXPECT_DOUBLE_EQ(wave_efficiency(gemm(128 * 133, 64, 256), 132), 133.0 / 264.0);
  EXPECT_DOUBLE_EQ(wave_efficiency(gemm(100, 64, 100), 132), 1.0 / 132.0);
  EXPECT_DOUBLE_EQ(wave_efficiency(gemm(100, 64, 100), 0), 1.0);  // unknown SM count: no term
}

TEST(Predict, SameGpuReproducesTheRunAndItsBandContainsIt) {
  const RunResult r = fixture("model_5b_both_modes.json");
  const GpuSpec& s = *db().match_device(r.device->name);
  const Prediction p = predict_from_run(r, "model_5b_both_modes.json", s, s);
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t i = 0; i < r.precisions.size(); ++i) {
        const Cell& c = r.cell(m, g, i);
        const size_t pi = static_cast<size_t>(r.precisions[i]);  // the prediction lists every precision in order
        const PredictedCell& pc = p.cells[m][g][pi];
        SCOPED_TRACE(fmt::format("{} {} {}", to_string(r.modes[m]), g, to_string(r.precisions[i])));
        if (!c.ok) continue;
        if (r.precisions[i] == Precision::FP8Block) continue;  // its pre-quantized cell is N/A: borrowed
        ASSERT_TRUE(pc.ok) << pc.reason;
        EXPECT_NEAR(pc.ms, c.stats.mean_ms, 1e-9 * c.stats.mean_ms);
        EXPECT_LE(pc.low_ms, c.stats.mean_ms);
        EXPECT_GE(pc.high_ms, c.stats.mean_ms);
      }
  // FP8Block has no pre-quantized kernel time in this run (N/A on sm_90): it is borrowed from
  // FP8Current, and the band still holds the measured autocast time.
  const PredictedCell& fb = p.cells[0][0][static_cast<size_t>(Precision::FP8Block)];
  EXPECT_TRUE(fb.borrowed);
  EXPECT_LE(fb.low_ms, r.cell(0, 0, 3).stats.mean_ms);
  EXPECT_GE(fb.high_ms, r.cell(0, 0, 3).stats.mean_ms);
  // Hopper cannot run MXFP8/NVFP4: N/A with the reason.
  EXPECT_FALSE(p.cells[0][0][static_cast<size_t>(Precision::MXFP8)].ok);
  EXPECT_NE(p.cells[0][0][static_cast<size_t>(Precision::NVFP4)].reason.find("compute capability 10.0"), std::string::npos);
}

TEST(Predict, DeterministicAndLabelledPredicted) {
  const RunResult r = fixture("model_5b_both_modes.json");
  const GpuSpec& s = *db().match_device(r.device->name);
  const GpuSpec& b300 = db().find("B300");
  const json a = prediction_json(predict_from_run(r, "f.json", s, b300));
  const json b = prediction_json(predict_from_run(r, "f.json", s, b300));
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_EQ(a["prediction"]["predicted"], true);
  EXPECT_NE(a["device"]["name"].get<std::string>().find("(predicted)"), std::string::npos);
  EXPECT_EQ(a["roofline"]["gpu"], "B300");
  // Blackwell: NVFP4 and MXFP8 predicted from the run's FP8 efficiency, saying so.
  const json& nv = test::record(a, 0, "per-gemm", "NVFP4");
  EXPECT_EQ(nv["status"], "ok");
  EXPECT_EQ(nv["values"]["borrowed_efficiency"], true);
  EXPECT_EQ(nv["predicted"], true);
  EXPECT_EQ(nv["source"], "predicted");
  EXPECT_LT(nv["low_ms"].get<double>(), nv["mean_ms"].get<double>());
  EXPECT_GT(nv["high_ms"].get<double>(), nv["mean_ms"].get<double>());
  bool stated = false;
  for (const json& n : a["prediction"]["assumptions"])
    stated = stated || n.get<std::string>().find("NVFP4 on B300 is predicted from the FP8") != std::string::npos;
  EXPECT_TRUE(stated);
  // Faster tensor cores: BF16 per layer is faster on B300 than measured on the H200 NVL.
  const double measured = summarize_mode(r, 0).sums[0].total.value();
  EXPECT_LT(a["summary"]["per-gemm"]["per_layer"]["total"]["BF16"].get<double>(), measured);
  // The text says "PREDICTED" and never looks like a measurement.
  const std::string text = render_prediction_text(predict_from_run(r, "f.json", s, b300));
  EXPECT_EQ(text.rfind("PREDICTED GEMM times on NVIDIA B300", 0), 0u) << text;
  EXPECT_NE(text.find("Predicted speedups vs BF16"), std::string::npos);
  EXPECT_EQ(text.find("Timing method"), std::string::npos);
}

// A source timed in a training step's power context (--step-other-ms) passes the context on to the
// prediction's JSON and says so in its assumptions; a back-to-back source says nothing of it.
TEST(Predict, CarriesTheSourcesStepContext) {
  RunResult r = fixture("model_5b_both_modes.json");
  const GpuSpec& s = *db().match_device(r.device->name);
  const GpuSpec& b300 = db().find("B300");
  const auto mentions = [](const json& a) {
    bool found = false;
    for (const json& n : a["prediction"]["assumptions"])
      found = found || n.get<std::string>().find("training step's power context") != std::string::npos;
    return found;
  };
  json plain = prediction_json(predict_from_run(r, "f.json", s, b300));
  EXPECT_FALSE(mentions(plain));
  EXPECT_FALSE(plain["timing"].contains("step_other_ms"));
  r.timing.step_other_ms = 3.0;
  r.timing.step_gap_ms_per_gflop = 0.002;
  const json stepped = prediction_json(predict_from_run(r, "f.json", s, b300));
  EXPECT_TRUE(mentions(stepped));
  EXPECT_EQ(stepped["timing"]["step_other_ms"], 3.0);
}

TEST(Predict, ComparesAgainstAMeasuredRun) {
  const RunResult r = fixture("model_5b_both_modes.json");
  const GpuSpec& s = *db().match_device(r.device->name);
  const json pred = prediction_json(predict_from_run(r, "f.json", s, db().find("H200")));
  const json meas = read_json_file(std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json");
  const CompareResult c = compare_results(pred, meas);
  ASSERT_FALSE(c.modes.empty());
  EXPECT_FALSE(c.modes[0].totals.empty());
}

// The prediction is one document: every row of its markdown tables is a line of the text, the
// same cells in the same order (a table without a header line gets its columns' headers in
// markdown, which the text does not print).
TEST(Predict, MarkdownHasTheTextsRows) {
  const RunResult r = fixture("model_5b_both_modes.json");
  const Prediction pr = predict_from_run(r, "f.json", *db().match_device(r.device->name), db().find("B300"));
  print::Document d;
  add_prediction(d, pr);
  const std::string text = print::render(d, print::Format::Text), md = print::render(d, print::Format::Markdown);
  EXPECT_EQ(text, render_prediction_text(pr));
  EXPECT_EQ(md.rfind("## PREDICTED GEMM times on ", 0), 0u) << md;
  EXPECT_EQ(md.find("====="), std::string::npos) << md;
  // Each mode: its header and GEMMs, and the per-layer and full-model sums with their bands.
  test::expect_markdown_rows_in_text(md, text, {.rows = r.modes.size() * (1 + r.plan.gemms.size() + 6)});
}

TEST(Predict, NotRunnableAndDatasheetOnly) {
  const RunResult r = fixture("model_5b_both_modes.json");
  const GpuSpec& s = *db().match_device(r.device->name);
  const Prediction a100 = predict_from_run(r, "f.json", s, db().find("A100"));
  EXPECT_NE(a100.cells[0][0][static_cast<size_t>(Precision::FP8Current)].reason.find("compute capability 8.9"),
            std::string::npos);
  EXPECT_TRUE(a100.cells[0][0][static_cast<size_t>(Precision::BF16)].ok);
  const Prediction rtx = predict_from_run(r, "f.json", s, db().find("RTX-PRO-6000"));
  EXPECT_TRUE(rtx.cells[0][0][0].ok);  // its BF16 peak is derived from the datasheet's FP4 figure (labelled)
  EXPECT_TRUE(rtx.cells[0][0][static_cast<size_t>(Precision::NVFP4)].ok);
  // A dry run has nothing to predict from.
  RunResult dry = r;
  dry.dry_run = true;
  EXPECT_THROW(predict_from_run(dry, "d.json", s, s), UsageError);
  // Datasheet only without priors or measured errors: every GPU of the database, the kernel's
  // assumed -25%/+60% at least.
  for (const GpuSpec& g : db().gpus) {
    const Prediction d = predict_datasheet_only(r.plan, r.modes, r.recipe_options, g);
    SCOPED_TRACE(g.key);
    EXPECT_TRUE(d.datasheet_only);
    bool any = false;
    for (const auto& row : d.cells[0])
      for (const PredictedCell& c : row)
        if (c.ok) {
          any = true;
          EXPECT_LE(c.low_ms, c.ms - 0.24 * c.kernel_ms);
          EXPECT_GE(c.high_ms, c.ms + 0.59 * c.kernel_ms);
          EXPECT_NE(c.band_basis.find("datasheet only"), std::string::npos);
        }
    EXPECT_TRUE(any);
  }
}

TEST(Predict, CommandLine) {
  const fs::path dir = fs::temp_directory_path() / ("gs_predict_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto run = [&](const std::string& args) {
    const std::string cmd = std::string(GS_BINARY) + " predict " + args + " >" + (dir / "out").string() + " 2>" +
                            (dir / "err").string();
    const int st = std::system(cmd.c_str());
    std::ifstream e(dir / "err"), o(dir / "out");
    std::stringstream es, os;
    es << e.rdbuf();
    os << o.rdbuf();
    return std::make_tuple(WIFEXITED(st) ? WEXITSTATUS(st) : -1, os.str(), es.str());
  };
  const std::string fx = std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json";
  auto [rc, out, err] = run(fx + " --gpu H300");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("unknown GPU 'H300' (did you mean "), std::string::npos) << err;
  EXPECT_NE(err.find(") (known: "), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  std::tie(rc, out, err) = run(fx + " --gpu B300 --json " + (dir / "p.json").string());
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("PREDICTED"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "p.json"));
  // A plan-only document: no measurements, exit 2.
  {
    json d = read_json_file(fx);
    d["dry_run"] = true;
    d["dry_run_requested"] = true;
    for (json& g : d["gemms"]) g.erase("results");
    d.erase("summary");
    std::ofstream(dir / "dry.json") << d.dump();
  }
  std::tie(rc, out, err) = run((dir / "dry.json").string() + " --gpu B300");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("has no measurements"), std::string::npos) << err;
  fs::copy_file(fx, dir / "run.json");
  std::tie(rc, out, err) = run((dir / "run.json").string() + " --gpu B300 --json " + (dir / "run.json").string());
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("is the run file"), std::string::npos) << err;
  EXPECT_EQ(read_json_file((dir / "run.json").string()), read_json_file(fx));
  std::tie(rc, out, err) = run("--gpu GB300 --model qwen2.5-7b");
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("datasheet only"), std::string::npos);
  std::tie(rc, out, err) = run("--gpu B300 --model nope");
  EXPECT_EQ(rc, 2);
  std::tie(rc, out, err) = run("");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--gpu is required"), std::string::npos) << err;
  fs::remove_all(dir);
}

// predict takes the plan flags of a measured run, from the same registry: model, batch, layout,
// precisions, modes, recipe settings; a run brings its own plan; refusals are one line.
TEST(Predict, TakesTheRunsPlanFlags) {
  const fs::path dir = fs::temp_directory_path() / ("gs_predict_flags_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto run = [&](const std::string& args) {
    const test::Out o = test::run_gemmscope("predict " + args, dir);
    return std::make_tuple(o.rc, o.out, o.err);
  };
  const std::string pj = (dir / "p.json").string();
  auto [rc, out, err] = run("--gpu H100 --model qwen2.5-7b --micro_batch_size 2 --sequence_length 2048 --tp 2 "
                            "--precisions BF16,FP8Current --mode all --fp8-format e4m3 --json " + pj);
  ASSERT_EQ(rc, 0) << err;
  const json p = read_json_file(pj);
  EXPECT_EQ(p["config"]["micro_batch_size"], 2);
  EXPECT_EQ(p["config"]["sequence_length"], 2048);
  EXPECT_EQ(p["config"]["tensor_parallel"], 2);
  EXPECT_EQ(p["precisions"], json({"BF16", "FP8Current"}));
  EXPECT_EQ(p["modes"], json({"per-gemm", "training", "pre-quantized"}));
  EXPECT_EQ(p["recipe_options"]["fp8_format"], "e4m3");
  EXPECT_EQ(p["prediction"]["label"], "datasheet only");
  EXPECT_NE(out.find("DATASHEET ONLY"), std::string::npos);
  EXPECT_NE(out.find("Bands per recipe"), std::string::npos);
  // A config.json with the batch and TP flags (the first-contact command).
  std::tie(rc, out, err) = run("--gpu H100 --config " + std::string(GS_TEST_DATA_DIR) +
                               "/configs/mixtral_8x7b.json --micro_batch_size 2 --tp 2 --ep 2 --bf16-only");
  EXPECT_EQ(rc, 0) << err;
  // The default modes are a measured run's: training for a model.
  std::tie(rc, out, err) = run("--gpu B200 --model qwen2.5-7b --json " + pj);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(read_json_file(pj)["modes"], json({"training"}));
  // A run brings its plan: plan flags are refused, precision flags choose its columns.
  const std::string fx = std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json";
  std::tie(rc, out, err) = run(fx + " --gpu B300 --tp 2");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("a run brings its own"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  std::tie(rc, out, err) = run(fx + " --gpu B300 --precisions BF16,NVFP4 --json " + pj);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(read_json_file(pj)["precisions"], json({"BF16", "NVFP4"}));
  std::tie(rc, out, err) = run(fx + " --gpu B300 --mode all");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--mode applies to a datasheet-only prediction"), std::string::npos) << err;
  // --datasheet-only with a run: its plan and modes, no measurements used.
  std::tie(rc, out, err) = run(fx + " --gpu H200 --datasheet-only --json " + pj);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(read_json_file(pj)["prediction"]["datasheet_only"], true);
  std::tie(rc, out, err) = run("--gpu H200 --datasheet-only");
  EXPECT_EQ(rc, 2);
  // Bad values get the measured run's messages.
  std::tie(rc, out, err) = run("--gpu H100 --model qwen2.5-7b --mode sideways");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--mode must be training, per-gemm, pre-quantized, both or all"), std::string::npos) << err;
  std::tie(rc, out, err) = run("--gpu H100 --shapes 1024x1024x1024 --tp 2");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("mutually exclusive"), std::string::npos) << err;
  // The priors, listed.
  std::tie(rc, out, err) = run("--list-priors");
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("NVFP4     blackwell"), std::string::npos) << out;
  // The band errors file named on the command line must be one.
  std::ofstream(dir / "bad.json") << "{\"schema\": \"x\"}";
  std::tie(rc, out, err) = run("--gpu H100 --band-errors " + (dir / "bad.json").string());
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("not a gemmscope prediction-error file"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(Roofline, PlotKindRoofline) {
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1 || /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no Python with matplotlib";
  const fs::path dir = fs::temp_directory_path() / ("gs_roofline_plot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto plot = [&](const std::string& in, const std::string& out) {
    const std::string cmd = std::string(GS_BINARY) + " plot " + in + " --kind roofline -o " + out + " >/dev/null 2>" +
                            (dir / "err").string();
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  // An H100 result written without a "roofline" object: plot takes it from the spec database.
  const fs::path svg = dir / "r.svg";
  ASSERT_EQ(plot(std::string(GS_TEST_DATA_DIR) + "/shapes_4.json", svg.string()), 0);
  std::stringstream ss;
  ss << std::ifstream(svg).rdbuf();
  EXPECT_NE(ss.str().find("point:BF16:0"), std::string::npos);
  EXPECT_NE(ss.str().find("roof:BF16"), std::string::npos);
  EXPECT_NE(ss.str().find("Roofline on NVIDIA H100 SXM"), std::string::npos);
  // An unknown GPU: exit 2 with the reason.
  json d = read_json_file(std::string(GS_TEST_DATA_DIR) + "/shapes_4.json");
  d["device"]["name"] = "NVIDIA GeForce RTX 3090";
  std::ofstream(dir / "u.json") << d.dump();
  EXPECT_EQ(plot((dir / "u.json").string(), (dir / "u.svg").string()), 2);
  std::stringstream es;
  es << std::ifstream(dir / "err").rdbuf();
  EXPECT_NE(es.str().find("not in the GPU spec database"), std::string::npos) << es.str();
  fs::remove_all(dir);
}

TEST(Predict, GroupedGemmsUseTheirTotalFlopsAndBytes) {
  // An MoE expert GEMM grouped along M (4 experts, uneven tokens) measured on an H100.
  RunResult r;
  Gemm g{Pass::Fprop, Op::ExpertUp, Scope::Layer, 4096, 2048, 1536, {Role::Activation, true}, {Role::Weight, true}};
  g.group_dim = GroupDim::M;
  g.group = {2048, 1024, 768, 256};
  r.plan.gemms = {g};
  r.device = DeviceInfo{};
  r.device->name = "NVIDIA H100 80GB HBM3";
  r.modes = {Mode::PerGemm, Mode::PreQuantized};
  r.precisions = {Precision::BF16, Precision::FP8Current};
  r.allocate_cells();
  r.cell(0, 0, 0) = Cell::measured(Stats{0.10, 0.10, 0.10, 0.10, 0.001, 100});
  r.cell(0, 0, 1) = Cell::measured(Stats{0.09, 0.09, 0.09, 0.09, 0.001, 100});
  r.cell(1, 0, 0) = Cell::measured(Stats{0.10, 0.10, 0.10, 0.10, 0.001, 100});
  r.cell(1, 0, 1) = Cell::measured(Stats{0.06, 0.06, 0.06, 0.06, 0.001, 100});
  // Tiles per expert: ceil(rows / 128) x ceil(1536 / 256) = (16 + 8 + 6 + 2) x 6 = 192 over 132 SMs.
  EXPECT_DOUBLE_EQ(wave_efficiency(g, 132), 192.0 / 264.0);
  const Prediction p = predict_from_run(r, "moe.json", db().find("H100"), db().find("B300"));
  for (size_t m = 0; m < 2; ++m)
    for (Precision x : {Precision::BF16, Precision::FP8Current, Precision::MXFP8, Precision::NVFP4}) {
      const PredictedCell& c = p.cells[m][0][static_cast<size_t>(x)];
      ASSERT_TRUE(c.ok) << c.reason;
      EXPECT_TRUE(std::isfinite(c.ms) && c.ms > 0);
    }
}

TEST(Predict, AutocastOnlyRunEstimatesTheKernelFromBytes) {
  const RunResult r = fixture("model_5b_autocast.json");  // no pre-quantized mode
  const GpuSpec& s = *db().match_device(r.device->name);
  const Prediction self = predict_from_run(r, "a.json", s, s);
  const PredictedCell& c = self.cells[0][0][static_cast<size_t>(Precision::FP8Current)];
  ASSERT_TRUE(c.ok);
  EXPECT_NEAR(c.ms, r.cell(0, 0, 1).stats.mean_ms, 1e-9);  // the estimate cancels on the same GPU
  EXPECT_GT(c.overhead_ms, 0);
  bool said = false;
  for (const std::string& a : self.assumptions) said = said || a.find("has no pre-quantized mode") != std::string::npos;
  EXPECT_TRUE(said);
  // To a GPU with more bandwidth the overhead shrinks, the kernel stays (same tensor cores).
  const Prediction h200 = predict_from_run(r, "a.json", s, db().find("H200-NVL"));
  const PredictedCell& d = h200.cells[0][0][static_cast<size_t>(Precision::FP8Current)];
  EXPECT_NEAR(d.kernel_ms, c.kernel_ms, 1e-9);
  EXPECT_NEAR(d.overhead_ms, c.overhead_ms, 1e-9);  // H200 NVL is the fixture's own GPU model
  const Prediction h100 = predict_from_run(r, "a.json", s, db().find("H100"));
  EXPECT_GT(h100.cells[0][0][static_cast<size_t>(Precision::FP8Current)].overhead_ms, c.overhead_ms);  // 3.35 < 4.8 TB/s
}

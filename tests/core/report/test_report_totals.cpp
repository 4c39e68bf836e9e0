// "totals" (core/report/report_json.cpp): the numbers the charts draw, computed once in C++ and
// read by tools/gemmscope_charts/, and with_derived_fields, the copy `gemmscope plot` hands the
// chart script (current mode names, totals written again from the cells).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/analysis/predict.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/report/report.hpp"
#include "test_util.hpp"

using namespace gs;
using nlohmann::json;

namespace {

const std::string kData = GS_TEST_DATA_DIR;

json load(const std::string& name) { return read_json_file(kData + "/" + name, "test data"); }

// Sum and summed variance of the mean times of the ok cells of `mode`/`prec` over the GEMMs `pick` takes.
struct Sum {
  double ms = 0, ss = 0;
  int n = 0;
};
template <class Pick>
Sum sum_cells(const json& doc, const std::string& mode, const std::string& prec, Pick pick) {
  Sum s;
  for (size_t i = 0; i < doc["gemms"].size(); ++i) {
    if (!pick(doc["gemms"][i])) continue;
    const json& c = gs::test::record(doc, i, mode, prec);
    s.ms += c["mean_ms"].get<double>();
    s.ss += std::pow(c["stdev_ms"].get<double>(), 2);
    ++s.n;
  }
  return s;
}

}  // namespace

TEST(Totals, LayerAndExpertBreakdownsSumTheCells) {
  const json doc = to_json(from_json(load("moe_mixtral_ep2_synthetic.json"), "moe.json"));
  const double layers = doc["config"]["num_hidden_layers"].get<double>();
  for (const std::string mode : {"training", "pre-quantized"})
    for (const std::string prec : {"BF16", "FP8Current", "FP8Block"}) {
      SCOPED_TRACE(mode + " " + prec);
      const json& t = doc["totals"][mode][prec];
      ASSERT_TRUE(t.is_object());
      EXPECT_FALSE(t.contains("na"));
      // one layer: the GEMMs of scope "layer" (attention in Mixtral), per op
      const json& layer = t["layer"];
      const Sum all = sum_cells(doc, mode, prec, [](const json& g) { return g["scope"] == "layer"; });
      ASSERT_GT(all.n, 0);
      EXPECT_NEAR(layer["ms"].get<double>(), all.ms, 1e-12 * all.ms);
      EXPECT_NEAR(layer["spread_ms"].get<double>(), std::sqrt(all.ss), 1e-12);
      const Sum qkv_fd = sum_cells(doc, mode, prec, [](const json& g) {
        return g["scope"] == "layer" && g["op"] == "qkv" && g["pass"] != "wgrad";
      });
      EXPECT_EQ(qkv_fd.n, 2);
      EXPECT_NEAR(layer["ops"]["qkv"]["fprop_dgrad_ms"].get<double>(), qkv_fd.ms, 1e-12);
      EXPECT_FALSE(layer["ops"].contains("expert_up"));  // scope moe_layer: not in the layer's bars
      // the LM head (scope "model", run once) over the layers, and the layer with it
      const Sum lm = sum_cells(doc, mode, prec, [](const json& g) { return g["scope"] == "model"; });
      ASSERT_GT(lm.n, 0);
      EXPECT_NEAR(layer["lm_head_ms"].get<double>(), lm.ms / layers, 1e-12);
      EXPECT_NEAR(layer["with_lm_head"]["ms"].get<double>(), all.ms + lm.ms / layers, 1e-9);
      EXPECT_NEAR(layer["with_lm_head"]["spread_ms"].get<double>(), std::sqrt(all.ss + lm.ss / (layers * layers)), 1e-12);
      // the grouped expert GEMMs of one MoE layer, per pass
      const json& ex = t["experts"];
      double passes = 0;
      for (const std::string pass : {"fprop", "dgrad", "wgrad"}) {
        const Sum p = sum_cells(doc, mode, prec, [&](const json& g) { return g.contains("group") && g["pass"] == pass; });
        EXPECT_EQ(p.n, 2) << pass;  // expert up and down
        EXPECT_NEAR(ex[pass + "_ms"].get<double>(), p.ms, 1e-12) << pass;
        passes += p.ms;
      }
      const Sum grouped = sum_cells(doc, mode, prec, [](const json& g) { return g.contains("group"); });
      EXPECT_NEAR(ex["ms"].get<double>(), passes, 1e-12);
      EXPECT_NEAR(ex["spread_ms"].get<double>(), std::sqrt(grouped.ss), 1e-12);
      EXPECT_FALSE(ex.contains("low_ms"));  // measured, not predicted: no band
    }
  // the routing's derived numbers the experts chart reads
  const json& rt = doc["plan"]["routing"];
  EXPECT_EQ(rt["local_experts"], 4);
  double rows = 0;
  for (const json& c : rt["counts"]) rows += c.get<double>();
  EXPECT_DOUBLE_EQ(rt["mean_rows"].get<double>(), rows / 8);
}

TEST(Totals, NaCellsNullTheirSumsAndAreGroupedByReason) {
  json in = load("moe_mixtral_ep2_synthetic.json");
  int layer_na = 0;
  for (json& g : in["gemms"]) {
    if (g["scope"] == "layer" && g["op"] == "qkv") {
      g["results"]["training"]["FP8Block"] = {{"status", "n/a"}, {"reason", "cuBLASLt: NOT_SUPPORTED"}};
      ++layer_na;
    }
    if (g.contains("group") && g["pass"] == "wgrad" && g["op"] == "expert_down")
      g["results"]["training"]["FP8Block"] = {{"status", "n/a"}, {"reason", "no memory"}};
  }
  ASSERT_EQ(layer_na, 3);
  const json doc = to_json(from_json(in, "moe.json"));
  const json& t = doc["totals"]["training"]["FP8Block"];
  EXPECT_TRUE(t["ms"].is_null());
  EXPECT_EQ(t["na"]["gemms"], 4);
  EXPECT_EQ(t["na"]["summary"], "3 GEMMs: cuBLASLt: NOT_SUPPORTED; wgrad Expert Down: no memory");
  EXPECT_TRUE(t["layer"]["ms"].is_null());
  EXPECT_TRUE(t["layer"]["ops"]["qkv"]["fprop_dgrad_ms"].is_null());
  EXPECT_TRUE(t["layer"]["ops"]["attn_out"]["fprop_dgrad_ms"].is_number());
  EXPECT_EQ(t["layer"]["na"]["gemms"], 3);
  EXPECT_TRUE(t["experts"]["ms"].is_null());
  EXPECT_TRUE(t["experts"]["wgrad_ms"].is_null());
  EXPECT_TRUE(t["experts"]["fprop_ms"].is_number());
  EXPECT_EQ(t["experts"]["na"]["summary"], "wgrad Expert Down: no memory");
  // two GEMMs are named, more are counted; a shapes run names its GEMMs by shape
  json shapes = load("shapes_4.json");
  const std::string mode = shapes["modes"][0];
  shapes["gemms"][0]["results"][mode]["BF16"] = {{"status", "n/a"}, {"reason", "r"}};
  shapes["gemms"][1]["results"][mode]["BF16"] = {{"status", "n/a"}, {"reason", "r"}};
  const json sdoc = to_json(from_json(shapes, "s.json"));
  const json& st = sdoc["totals"];
  const std::string m0 = sdoc["gemms"][0]["label"], m1 = sdoc["gemms"][1]["label"];
  EXPECT_EQ(st["per-gemm"]["BF16"]["na"]["summary"], m0 + ", " + m1 + ": r");
  EXPECT_FALSE(st["per-gemm"]["BF16"].contains("layer"));  // shapes runs: no per-layer breakdown
}

TEST(Totals, PredictionsCarryTheBandsPredictSums) {
  const GpuDb db = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  const RunResult run =
      from_json(read_json_file(std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json"), "h100_qwen7b.json");
  const GpuSpec& h100 = db.find("H100");
  const json doc = prediction_json(predict_from_run(run, "h100_qwen7b.json", h100, h100));
  for (const std::string mode : {"training", "pre-quantized"})
    for (const std::string prec : {"BF16", "FP8Current"}) {
      SCOPED_TRACE(mode + " " + prec);
      const json& t = doc["totals"][mode][prec];
      const json& want = doc["prediction"]["full_model"][mode][prec];
      EXPECT_NEAR(t["low_ms"].get<double>(), want["low_ms"].get<double>(), 1e-9 * want["low_ms"].get<double>());
      EXPECT_NEAR(t["high_ms"].get<double>(), want["high_ms"].get<double>(), 1e-9 * want["high_ms"].get<double>());
      // one layer's band: its cells' band ends summed
      double lo = 0, hi = 0;
      for (size_t i = 0; i < doc["gemms"].size(); ++i)
        if (doc["gemms"][i]["scope"] == "layer") {
          lo += gs::test::record(doc, i, mode, prec)["low_ms"].get<double>();
          hi += gs::test::record(doc, i, mode, prec)["high_ms"].get<double>();
        }
      const json& layer = t["layer"];
      EXPECT_NEAR(layer["low_ms"].get<double>(), lo, 1e-12 * lo);
      EXPECT_NEAR(layer["high_ms"].get<double>(), hi, 1e-12 * hi);
      EXPECT_LE(layer["low_ms"].get<double>(), layer["ms"].get<double>());
      EXPECT_GE(layer["high_ms"].get<double>(), layer["ms"].get<double>());
    }
}

TEST(Totals, WithDerivedFieldsRenamesModesAndRewritesTotals) {
  // A file from before the renames and before "totals": autocast / pre-quantized, no totals.
  json old = load("model_5b_both_modes.json");
  ASSERT_FALSE(old.contains("totals"));
  ASSERT_EQ(old["modes"][0], "autocast");
  old["totals"] = {{"autocast", {{"BF16", {{"ms", 1.0}}}}}};  // edited, stale: replaced
  const RunResult r = from_json(old, "old.json");
  const json doc = with_derived_fields(old, r);
  EXPECT_EQ(doc["modes"], json::array({"per-gemm", "pre-quantized"}));
  for (const json& g : doc["gemms"]) {
    EXPECT_TRUE(g["results"].contains("per-gemm"));
    EXPECT_FALSE(g["results"].contains("autocast"));
  }
  EXPECT_TRUE(doc["summary"].contains("per-gemm"));
  EXPECT_FALSE(doc["summary"].contains("autocast"));
  EXPECT_EQ(doc["totals"], to_json(r)["totals"]);
  EXPECT_FALSE(doc["totals"].contains("autocast"));
  // what the writer does not derive is left as it was
  EXPECT_EQ(doc["tool"], old["tool"]);
  EXPECT_EQ(doc["created"], old["created"]);
  EXPECT_EQ(doc["gemms"][0]["results"]["per-gemm"], old["gemms"][0]["results"]["autocast"]);
  // the routing of an MoE file is written again from its counts
  json moe = load("moe_mixtral_ep2_synthetic.json");
  json& rt = moe["plan"]["routing"];
  rt["expert_parallel"] = 1;  // edited (one rank routes the whole batch): the derived fields follow
  rt["tokens"] = rt["tokens"].get<int64_t>() * 2;
  const json m = with_derived_fields(moe, from_json(moe, "moe.json"));
  EXPECT_EQ(m["plan"]["routing"]["local_experts"], 8);
  EXPECT_EQ(m["plan"]["routing"]["rank_rows"].size(), 1u);
  EXPECT_EQ(m["plan"]["routing"]["busiest_rank"], 0);
}

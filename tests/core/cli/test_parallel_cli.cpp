// The parallel step and the layout search on the command line, without a GPU: predicted steps,
// refusals with the framework's rule, the JSON and the Chrome trace, `gemmscope layouts`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/io/json_text.hpp"
#include "core/report/report.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using gs::test::Out;

namespace {

fs::path dir() {
  static const fs::path d = gs::test::scratch_dir("parallel_cli");
  return d;
}
Out gs_run(const std::string& args) { return gs::test::run_gemmscope(args, dir()); }

// The document read and written again, as gemmscope writes its files.
std::string round_trip(const json& doc, const std::string& name) {
  return gs::json_text(gs::to_json(gs::from_json(doc, name)), 2) + "\n";
}

}  // namespace

TEST(ParallelCli, PredictsTheStepWithoutAGpu) {
  const Out o = gs_run("--model llama-3-70b --layout tp8.pp4.dp16 --cluster dgx-h100");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("Parallel step: llama-3-70b on 512 x H100"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("PREDICTED"), std::string::npos);
  EXPECT_NE(o.out.find("pipeline bubble"), std::string::npos);
  EXPECT_NE(o.out.find("FP8 step speedup at this layout"), std::string::npos);
  EXPECT_NE(o.out.find("TP communication (exposed)"), std::string::npos);
  EXPECT_EQ(o.err.find("printing the plan instead"), std::string::npos) << o.err;
}

TEST(ParallelCli, WritesTheJsonAndTheTrace) {
  const fs::path j = dir() / "step.json", t = dir() / "trace.json";
  const Out o = gs_run("--model llama-3-8b --layout tp2.pp2.mb1.gb16 --gpus 16 --bf16-only --parallel-json " + j.string() +
                       " --parallel-trace " + t.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  const json doc = json::parse(gs::test::slurp(j));
  EXPECT_EQ(doc["schema"], "gemmscope.parallel/1");
  ASSERT_EQ(doc["results"].size(), 1u);
  const json& r = doc["results"][0];
  EXPECT_EQ(r["layout"], "tp2.pp2.vpp1.cp1.ep1.etp2.dp4.mb1.gb16.zero1");
  EXPECT_EQ(r["source"], "predicted");
  EXPECT_GT(r["tokens_per_s_per_gpu"].get<double>(), 0);
  EXPECT_EQ(r["stages"].size(), 2u);
  const json trace = json::parse(gs::test::slurp(t));
  int passes = 0;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "forward") ++passes;
  EXPECT_EQ(passes, 2 * 4);  // 2 stages x 4 micro-batches
}

TEST(ParallelCli, RefusesWithTheFrameworksRule) {
  Out o = gs_run("--model llama-3-70b --layout pp3");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("num_layers (80) is not divisible by the pipeline-parallel size (3)"), std::string::npos) << o.err;
  o = gs_run("--model llama-3-70b --layout tp8 --tensor-parallel 4");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("disagree"), std::string::npos) << o.err;
  o = gs_run("--model llama-3-70b --layout tp8.pp4 --gpus 100");
  EXPECT_EQ(o.rc, 2);
  o = gs_run("--shapes 1024 --layout tp2");
  EXPECT_EQ(o.rc, 2);
  o = gs_run("--model llama-3-8b --cluster dgx-h10");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("unknown cluster"), std::string::npos) << o.err;
  o = gs_run("--model llama-3-8b --layout tp2.qq3");
  EXPECT_EQ(o.rc, 2);
  o = gs_run("--model llama-3-8b --gpus 8 --step-efficiency 1.5");
  EXPECT_EQ(o.rc, 2);
}

TEST(ParallelCli, LayoutSearchRanksFittingLayouts) {
  const fs::path j = dir() / "layouts.json";
  const Out o = gs_run("layouts --model llama-3-8b --gpus 8 --global-batch 32 --top 3 --parallel-json " + j.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("Layouts: llama-3-8b on 8 x H100"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("the fastest"), std::string::npos);
  const json doc = json::parse(gs::test::slurp(j));
  EXPECT_EQ(doc["schema"], "gemmscope.layouts/1");
  ASSERT_FALSE(doc["ranked"].empty());
  for (size_t i = 1; i < doc["ranked"].size(); ++i)
    EXPECT_LE(doc["ranked"][i - 1]["step_ms"].get<double>(), doc["ranked"][i]["step_ms"].get<double>());
  EXPECT_EQ(gs_run("layouts --model llama-3-8b --global-batch 32").rc, 2);  // no --gpus
  EXPECT_EQ(gs_run("layouts --model llama-3-8b --gpus 8").rc, 2);           // no global batch
  EXPECT_EQ(gs_run("layouts --model llama-3-8b --gpus 8 --global-batch 8 --layout tp2").rc, 2);
}

// The main --json result holds the parallel step (records and section); written, read and written
// again it is the same bytes, and `gemmscope report` prints the step from it as the run did.
TEST(ParallelCli, ResultDocumentHoldsTheStep) {
  const fs::path j = dir() / "result_with_step.json";
  const Out o = gs_run("--model llama-3-8b --layout tp2.pp2.mb1.gb16 --gpus 16 --json " + j.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  const std::string text = gs::test::slurp(j);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["schema"], "gemmscope.result/3");
  EXPECT_EQ(doc["parallel"]["layout"]["layout"], "tp2.pp2.vpp1.cp1.ep1.etp2.dp4.mb1.gb16.zero1");
  size_t steps = 0, collectives = 0;
  for (const json& r : doc["records"]) {
    steps += r["kind"] == "parallel-step";
    collectives += r["kind"] == "collective" && r["source"] == "predicted";
  }
  EXPECT_EQ(steps, 2u * 3u);  // BF16 and the FP8 recipe: the step and two stages
  EXPECT_GT(collectives, 0u);
  EXPECT_EQ(round_trip(doc, j.string()), text);
  const Out rep = gs_run("report " + j.string());
  ASSERT_EQ(rep.rc, 0) << rep.err;
  ASSERT_GE(rep.out.size(), o.out.size());
  EXPECT_EQ(rep.out.substr(rep.out.size() - o.out.size()), o.out);
}

// gemmscope layouts --json: the ranking as a result document (a record per evaluated layout) that
// round-trips byte-identical and prints as the command did.
TEST(ParallelCli, LayoutsResultDocument) {
  const fs::path j = dir() / "layouts_result.json";
  const Out o = gs_run("layouts --model llama-3-8b --gpus 8 --global-batch 32 --top 3 --json " + j.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  const std::string text = gs::test::slurp(j);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["schema"], "gemmscope.result/3");
  EXPECT_EQ(doc["parallel"]["search"]["gpus"], 8);
  ASSERT_FALSE(doc["records"].empty());
  int64_t place = 0;
  for (const json& r : doc["records"]) {
    EXPECT_EQ(r["kind"], "layout");
    const int64_t p = r["values"]["place"].get<int64_t>();
    if (p > 0) EXPECT_EQ(p, ++place);
    EXPECT_EQ(r["values"]["fits"], p > 0);
  }
  EXPECT_EQ(round_trip(doc, j.string()), text);
  const Out rep = gs_run("report " + j.string());
  ASSERT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(rep.out, o.out);
  EXPECT_EQ(gs_run("layouts --model llama-3-8b --gpus 8 --global-batch 32 --json " + j.string() + " --parallel-json " +
                   j.string())
                .rc,
            2);
}

// --fp8-param-gather is the one setting --comm has; it reaches the parallel step and the layout
// search: the report names it, the FP8 recipe's parameter all-gather shrinks, BF16's notes say it
// changes nothing there, and the documents record it (absent when off).
TEST(ParallelCli, Fp8ParamGatherReachesTheStepAndTheSearch) {
  const fs::path j = dir() / "fp8_gather.json", doc_path = dir() / "fp8_gather_doc.json", lj = dir() / "fp8_layouts.json";
  const std::string base = "--model llama-3-8b --layout tp2.pp2.mb1.gb16 --gpus 16 --precisions BF16,FP8Current";
  const Out o = gs_run(base + " --fp8-param-gather --parallel-json " + j.string() + " --json " + doc_path.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("FP8 parameter gathers (--fp8-param-gather)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("FP8Current: the DP parameter all-gather sends"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--fp8-param-gather changes nothing in BF16"), std::string::npos) << o.out;
  const json doc = json::parse(gs::test::slurp(j));
  EXPECT_EQ(doc["fp8_param_gather"], true);
  ASSERT_EQ(doc["results"].size(), 2u);
  auto gather_bytes = [](const json& r) {
    for (const json& c : r["collectives"])
      if (c["group"] == "DP" && c["kind"] == "all-gather") return c["bytes"].get<double>();
    return 0.0;
  };
  EXPECT_LT(gather_bytes(doc["results"][1]), gather_bytes(doc["results"][0]));
  EXPECT_GT(gather_bytes(doc["results"][1]), 0.5 * gather_bytes(doc["results"][0]));  // norms, embedding, head in BF16
  EXPECT_EQ(json::parse(gs::test::slurp(doc_path))["parallel"]["job"]["fp8_param_gather"], true);
  const Out rep = gs_run("report " + doc_path.string());
  ASSERT_EQ(rep.rc, 0) << rep.err;
  EXPECT_NE(rep.out.find("FP8 parameter gathers (--fp8-param-gather)"), std::string::npos) << rep.out;
  // Off: not in the documents' job, not in the report.
  const Out off = gs_run(base + " --json " + doc_path.string());
  ASSERT_EQ(off.rc, 0) << off.err;
  EXPECT_EQ(off.out.find("--fp8-param-gather"), std::string::npos) << off.out;
  EXPECT_FALSE(json::parse(gs::test::slurp(doc_path))["parallel"]["job"].contains("fp8_param_gather"));
  // The layout search takes it too.
  const Out l = gs_run("layouts --model llama-3-8b --gpus 8 --global-batch 32 --top 3 --precision FP8Current "
                       "--fp8-param-gather --parallel-json " + lj.string());
  ASSERT_EQ(l.rc, 0) << l.err;
  EXPECT_NE(l.out.find("FP8 parameter gathers (--fp8-param-gather)"), std::string::npos) << l.out;
  EXPECT_EQ(json::parse(gs::test::slurp(lj))["fp8_param_gather"], true);
  // Without --comm or the parallel step it still applies to nothing and is refused.
  EXPECT_EQ(gs_run("--model llama-3-8b --fp8-param-gather --dry-run").rc, 2);
}

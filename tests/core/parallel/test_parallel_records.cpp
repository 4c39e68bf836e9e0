// The parallel step and the layout search as records of the result document
// (core/parallel/parallel_records.hpp, core/report/parallel_record.hpp): written and read with every
// other record, byte-identical through a round trip, the report printed again from the records
// alone, the measured collectives kept beside the modelled ones, and the reader's refusals.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/io/json_text.hpp"
#include "core/model/model_config.hpp"
#include "core/parallel/cluster.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/parallel_records.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"

using namespace gs;
using nlohmann::json;

namespace {

ParallelLayout L(const std::string& s) {
  ParallelLayout l;
  parse_layout(s, l);
  return l;
}

// Every layer: 1 ms of GEMMs forward, 2 ms backward; an FP8 step 0.7 times as long.
StepCosts synthetic(Precision p, double scale) {
  StepCosts s;
  s.precision = p;
  s.basis = "synthetic compute";
  s.source = CostSource::Predicted;
  for (LayerCost* lc : {&s.dense, &s.moe}) {
    lc->gemms[Op::Qkv] = {0.5 * scale, 0.5 * scale, 0.5 * scale};
    lc->gemms[Op::MlpDown] = {0.5 * scale, 0.5 * scale, 0.5 * scale};
  }
  s.optimizer_ms_per_param = 1e-9;
  return s;
}

const GpuSpec& h100() {
  static const GpuSpec g = [] {
    GpuSpec x;
    x.key = "H100";
    x.name = "NVIDIA H100 (test)";
    x.tflops[static_cast<int>(PeakFormat::BF16)] = Sourced{989.4, "test"};
    x.memory_bytes = Sourced{80e9, "test"};
    return x;
  }();
  return g;
}

ModelConfig model() {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.micro_batch_size = 1;
  return c;
}

ParallelReport report_of(const std::string& layout) {
  const ModelConfig c = model();
  const ParallelLayout l = L(layout);
  check_layout(c, l);
  ParallelJob job;
  job.model = c;
  job.layout = l;
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  ParallelReport rep;
  rep.job.model = c.name;
  rep.job.gpu_key = "H100";
  rep.job.gpu_name = h100().name;
  rep.job.cluster_key = "dgx-h100";
  rep.job.cluster_name = "DGX H100 (test)";
  rep.job.cluster_note = "uncalibrated";
  rep.results.push_back(simulate_parallel_step(job, synthetic(Precision::BF16, 1.0), net, h100()));
  rep.results.push_back(simulate_parallel_step(job, synthetic(Precision::FP8Current, 0.7), net, h100()));
  rep.notes.push_back("a note of the report");
  return rep;
}

// A dry-run document of the model's plan holding the step.
RunResult document_with(const ParallelReport& rep) {
  RunResult r;
  r.plan = build_model_plan(model());
  r.dry_run = true;
  r.why_not_measured = "test";
  r.modes = {Mode::PreQuantized};
  r.precisions = {Precision::BF16};
  add_parallel_step_records(r, rep);
  return r;
}

std::string text_of(const json& j) { return json_text(j, 2) + "\n"; }

std::string error_of(const json& doc) {
  try {
    (void)parallel_report_from(from_json(doc, "x.json"));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

// The step per precision, each stage and each collective are records; written, read and written
// again, the document is the same bytes, and the report printed from the records is the one the
// run printed.
TEST(ParallelRecords, StepRoundTripsByteIdenticalAndPrintsTheSameReport) {
  const ParallelReport rep = report_of("tp2.pp2.dp2.mb1.gb16");
  const RunResult r = document_with(rep);
  const std::string written = text_of(to_json(r));
  const RunResult back = from_json(json::parse(written), "x.json");
  EXPECT_EQ(text_of(to_json(back)), written);
  EXPECT_EQ(render_parallel_text(parallel_report_from(back)), render_parallel_text(rep));
  EXPECT_EQ(parallel_json(parallel_report_from(back)), parallel_json(rep));  // --parallel-json: a view of the same
  // One "step" and two stages per precision, a record per collective, all predicted, none measured.
  const json j = json::parse(written);
  EXPECT_EQ(j["items"]["parallel-step"], json::array({"step", "stage 0", "stage 1"}));
  size_t steps = 0, collectives = 0;
  for (const json& rec : j["records"]) {
    EXPECT_EQ(rec["source"], "predicted");
    steps += rec["kind"] == "parallel-step";
    collectives += rec["kind"] == "collective";
  }
  EXPECT_EQ(steps, 2u * 3u);
  EXPECT_EQ(collectives, rep.results[0].collectives.size() + rep.results[1].collectives.size());
  EXPECT_GT(collectives, 0u);
  EXPECT_EQ(j["parallel"]["layout"]["layout"], to_string(rep.results[0].layout));
  EXPECT_EQ(j["parallel"]["steps"][1]["precision"], "FP8Current");
}

// A step rests on measured compute: its records say modelled, and read back it is measured again.
TEST(ParallelRecords, SourceFollowsTheCompute) {
  ParallelReport rep = report_of("tp2.dp4.mb1.gb8");
  rep.results[0].source = CostSource::Measured;
  const RunResult back = from_json(to_json(document_with(rep)), "x.json");
  for (const Record& rec : back.records)
    if (rec.key.kind == RecordKind::ParallelStep)
      EXPECT_EQ(rec.key.source, rec.key.precision == Precision::BF16 ? Source::Modelled : Source::Predicted);
  const ParallelReport again = parallel_report_from(back);
  EXPECT_EQ(again.results[0].source, CostSource::Measured);
  EXPECT_EQ(again.results[1].source, CostSource::Predicted);
}

// The measured collectives of --comm stay beside the step's modelled ones; a second step is refused.
TEST(ParallelRecords, MeasuredCollectivesKeptAndOneStepPerRun) {
  RunResult r;
  r.plan = build_model_plan(model());
  r.dry_run = true;
  r.item_names[RecordKind::Collective] = {"TP all-gather of x (BF16)"};
  RecordKey k;
  k.kind = RecordKind::Collective;
  k.pass = Pass::Fprop;
  Cell m;
  m.ok = true;
  m.set("ms", 0.25);
  r.records.add(k, m);
  const ParallelReport rep = report_of("tp2.dp4.mb1.gb8");
  add_parallel_step_records(r, rep);
  EXPECT_NE(r.records.find(k), nullptr);
  EXPECT_EQ(r.item_names[RecordKind::Collective].size(), 1 + rep.results[0].collectives.size() + rep.results[1].collectives.size());
  const ParallelReport again = parallel_report_from(from_json(to_json(r), "x.json"));
  EXPECT_EQ(again.results[0].collectives.size(), rep.results[0].collectives.size());
  EXPECT_THROW(add_parallel_step_records(r, rep), std::logic_error);
}

// What the report needs and a file lacks is refused with the record named, never printed as 0.
TEST(ParallelRecords, ReaderRefusesMissingValues) {
  const json good = to_json(document_with(report_of("tp2.pp2.dp2.mb1.gb16")));
  EXPECT_EQ(error_of(good), "(accepted)");
  json bad = good;
  for (json& rec : bad["records"])
    if (rec["kind"] == "parallel-step" && rec["item"] == 0) rec["values"].erase("step_ms");
  EXPECT_NE(error_of(bad).find("has no number values.step_ms"), std::string::npos) << error_of(bad);
  bad = good;
  for (json& rec : bad["records"])
    if (rec["kind"] == "collective") rec["values"]["algo"] = "carrier-pigeon";
  EXPECT_NE(error_of(bad).find("unknown algorithm 'carrier-pigeon'"), std::string::npos) << error_of(bad);
  bad = good;
  for (json& rec : bad["records"])
    if (rec["kind"] == "parallel-step" && rec["item"] == 2) rec["item"] = 1;
  EXPECT_NE(error_of(bad).find("repeats the key"), std::string::npos);
  bad = good;
  bad["parallel"]["layout"]["tp"] = 0;
  EXPECT_NE(error_of(bad).find("parallel.layout.tp must be an integer from 1"), std::string::npos) << error_of(bad);
  bad = good;
  bad["parallel"]["job"]["framework"] = "jax";
  EXPECT_NE(error_of(bad).find("parallel.job.framework must be"), std::string::npos) << error_of(bad);
  bad = good;
  bad["parallel"].erase("layout");
  EXPECT_NE(error_of(bad).find("has no object 'layout'"), std::string::npos) << error_of(bad);
}

// gemmscope layouts: one record per evaluated layout, in ranking order, the not fitting after them
// (place 0); the document round-trips byte-identical and the ranking read back is the same.
TEST(ParallelRecords, LayoutSearchAsRecords) {
  SearchResult s;
  s.candidates = 5;
  s.basis = "predicted (test)";
  s.refused = {{"num_layers (32) is not divisible by the pipeline-parallel size (3)", 2}};
  const ParallelReport a = report_of("tp2.dp4.mb1.gb8"), b = report_of("tp2.pp2.dp2.mb1.gb8");
  for (const ParallelReport* x : {&a, &b}) {
    SearchCandidate c;
    c.layout = x->results[0].layout;
    c.evaluated = true;
    c.result = x->results[0];
    c.why = x == &a ? "" : "pipeline bubble +1.0 ms";
    s.ranked.push_back(c);
  }
  SearchCandidate big = s.ranked[0];
  big.layout.recompute = Recompute::Full;
  big.result.fits = false;
  big.why = "needs 90.0 GB";
  s.not_fitting.push_back(big);
  LayoutSearchInfo info;
  info.gpus = 8;
  info.global_batch = 8;
  info.top = 1;
  ParallelJobInfo job = a.job;
  const RunResult r = layouts_result(build_model_plan(model()), s, job, L("zero1"), info);
  const std::string written = text_of(to_json(r));
  const RunResult back = from_json(json::parse(written), "x.json");
  EXPECT_EQ(text_of(to_json(back)), written);
  const json j = json::parse(written);
  ASSERT_EQ(j["records"].size(), 3u);
  EXPECT_EQ(j["records"][0]["kind"], "layout");
  EXPECT_EQ(j["records"][0]["values"]["place"], 1);
  EXPECT_EQ(j["records"][2]["values"]["place"], 0);
  EXPECT_EQ(j["records"][2]["values"]["fits"], false);
  EXPECT_EQ(j["parallel"]["search"]["candidates"], 5);
  const SearchResult again = search_from(back);
  const auto page = [&](const SearchResult& x) {
    return print::render(layouts_document(x, job, 8, 8, Precision::BF16, 1), print::Format::Text);
  };
  EXPECT_EQ(page(again), page(s));
  EXPECT_NE(page(again).find("1 more fitting layouts are slower still (the slowest: pipeline bubble"), std::string::npos)
      << page(again);
  EXPECT_EQ(again.not_fitting.at(0).layout.recompute, Recompute::Full);
}

// --fp8-param-gather is the job's: written into the section only when on, read back as it was.
TEST(ParallelRecords, Fp8ParamGatherRoundTripsInTheJob) {
  ParallelReport rep = report_of("dp2.mb1.gb4");
  EXPECT_FALSE(to_json(document_with(rep))["parallel"]["job"].contains("fp8_param_gather"));
  rep.job.fp8_param_gather = true;
  const json j = to_json(document_with(rep));
  EXPECT_EQ(j["parallel"]["job"]["fp8_param_gather"], true);
  const RunResult back = from_json(j, "x.json");
  EXPECT_TRUE(parallel_report_from(back).job.fp8_param_gather);
  EXPECT_EQ(text_of(to_json(back)), text_of(j));
  EXPECT_NE(render_parallel_text(parallel_report_from(back)).find("FP8 parameter gathers (--fp8-param-gather)"), std::string::npos);
}

// The whole step of a run (core/run/step_run.hpp) on fake engines: which times are measured, which
// modelled, the JSON round trip, the report's lead block and the dry run's plan.
#include "core/run/step_run.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "core/io/input_file.hpp"
#include "core/model/model_config.hpp"
#include "core/node/fleet.hpp"
#include "core/report/report.hpp"
#include "core/report/report_whole_step.hpp"
#include "core/results/step_context_records.hpp"
#include "core/results/step_kernel_records.hpp"
#include "core/run/runner.hpp"
#include "core/util/error.hpp"
#include "fixture_util.hpp"
#include "test_util.hpp"

namespace gs {
namespace {

Plan plan3() {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 3;
  c.micro_batch_size = 1;
  c.sequence_length = 2048;
  return build_model_plan(c);
}

// Every GEMM 1 ms; the tests' fake step context (test::fake_step_context()); the optimizer and the
// launch latency measured, every other step kernel N/A.
class StepEngine : public test::FakeEngineBase {
 public:
  explicit StepEngine(bool context = true) : context_(context) {}
  Cell measure(const Gemm&, Precision, Mode, const std::string&) override { return Cell::measured(summarize({1.0})); }
  std::optional<StepContextInfo> step_context() const override {
    return context_ ? std::optional<StepContextInfo>(test::fake_step_context()) : std::nullopt;
  }
  Cell measure_step_kernel(const StepKernelSpec& s) override {
    specs.push_back(s);
    if (s.kind == StepKernelKind::AdamW) return Cell::measured(summarize({10.0}));
    if (s.kind == StepKernelKind::LaunchLatency) return Cell::measured(summarize({0.004}));
    return Cell::na("fake engine: no such kernel");
  }
  DeviceInfo device_info() const override {
    DeviceInfo d = FakeEngineBase::device_info();
    d.memory_bytes = int64_t{141} * 1000 * 1000 * 1000;
    return d;
  }
  std::vector<StepKernelSpec> specs;

 private:
  bool context_;
};

RunRequest request() {
  RunRequest req;
  req.plan = plan3();
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::Training};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.step_context_kind = StepContextKind::TransformerEngine;
  return req;
}

using test::step_group;

TEST(StepRun, MeasuredAndModelledParts) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  EXPECT_TRUE(r.step->timed);
  // Each step kernel once: zero-grad, embedding fwd/bwd, loss fwd/bwd, grad norm, AdamW, launch latency.
  EXPECT_EQ(engine.specs.size(), 8u);
  const StepBreakdown& b = r.step->steps[0][0];
  ASSERT_TRUE(b.step_ms) << (b.unknown.empty() ? "" : b.unknown[0]);
  EXPECT_EQ(step_group(b, "optimizer").time.source, TimeSource::Measured);
  EXPECT_DOUBLE_EQ(*step_group(b, "optimizer").time.ms, 10.0);
  EXPECT_EQ(step_group(b, "attention fwd").time.source, TimeSource::Measured);
  const StepContextInfo ctx = test::fake_step_context();
  EXPECT_DOUBLE_EQ(*step_group(b, "attention bwd").total_ms(), 3 * ctx.attention_bwd_ms);
  // The GEMMs: 4 Fprop cells of 1 ms per layer, 8 backward; the LM head 1 + 2.
  EXPECT_DOUBLE_EQ(*step_group(b, "GEMMs fwd, dense layer").time.ms, 4.0);
  EXPECT_DOUBLE_EQ(*step_group(b, "GEMMs bwd, dense layer").time.ms, 8.0);
  EXPECT_DOUBLE_EQ(*step_group(b, "LM head bwd").time.ms, 2.0);
  // Not measured by the engine: its bytes at the stand-in's rate, labelled modelled, with the reason.
  const StepGroupResult& loss = step_group(b, "loss fwd");
  EXPECT_EQ(loss.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*loss.time.ms, loss.group.bytes / (ctx.stream_gb_per_s * 1e6 * ctx.efficiency));
  EXPECT_NE(loss.time.how.find("fake engine"), std::string::npos) << loss.time.how;
  EXPECT_EQ(step_group(b, "final norm fwd").time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*step_group(b, "other fwd").time.ms + *step_group(b, "other bwd").time.ms, ctx.other_ms);
  // The host: the measured launch latency (4 us) plus the eager default overhead.
  EXPECT_TRUE(b.host.launch_measured);
  EXPECT_DOUBLE_EQ(b.host.launch_us, 4.0);
  EXPECT_TRUE(b.memory.device_bytes);
  // The FP8 step: the same groups plus FP8 scale kernels, its own GEMM times.
  const StepBreakdown& f = r.step->steps[0][1];
  EXPECT_NE(std::find_if(f.groups.begin(), f.groups.end(),
                         [](const StepGroupResult& g) { return g.group.name == "FP8 scales from amax"; }),
            f.groups.end());
  // The report leads with the step block and says what is measured and what modelled.
  const std::string text = render_text(r);
  EXPECT_EQ(text.find("Whole training step on Fake GPU"), 0u) << text.substr(0, 300);
  EXPECT_NE(text.find("GEMMs measured; attention measured"), std::string::npos);
  EXPECT_NE(text.find("optimizer modelled and measured"), std::string::npos);  // zero-grad, grad norm N/A here
  EXPECT_NE(text.find("loss modelled"), std::string::npos);
  EXPECT_NE(text.find("MFU/HFU: N/A"), std::string::npos);
  EXPECT_NE(text.find("Whole step, group by group"), std::string::npos);
  test::expect_markdown_rows_in_text(render_markdown(r), text, {10, 10});
}

// Under a PyTorch step context the stand-ins stand for PyTorch's own kernels: their measured time
// at kPyTorchKernelRate, labelled modelled and saying so; Transformer Engine's stays as measured.
TEST(StepRun, PyTorchKernelsAtTheirRate) {
  StepEngine engine;
  RunRequest req = request();
  req.options.timing.step_context_kind = StepContextKind::Eager;
  const RunResult r = run(engine, req);
  ASSERT_TRUE(r.step);
  const StepBreakdown& b = r.step->steps[0][0];
  const StepGroupResult& opt = step_group(b, "optimizer");
  EXPECT_EQ(opt.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*opt.time.ms, 10.0 / kPyTorchKernelRate);
  EXPECT_NE(opt.time.how.find("stand-in measured on this GPU"), std::string::npos) << opt.time.how;
  StepKernelSpec fused_loss{StepKernelKind::CrossEntropyFwd, 0, 1, 8, 128, 0, ParamStorage::Bf16, true};
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::Compiled), 1.0);
  fused_loss.fused = false;
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::Eager), kPyTorchKernelRate);
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::TransformerEngine), 1.0);
  EXPECT_DOUBLE_EQ(step_kernel_rate(StepKernelSpec{}, StepContextKind::Eager), 1.0);  // launch latency
}

// Each group's step kernel is looked up by its whole spec: with every kernel measured at its own
// time and, before each, a kernel that reads alike (describe() rounds the counts) at another, every
// group gets its own kernel's time. A kernel the engine did not run is modelled from its bytes, as
// when it ran and failed, and never takes a look-alike's time.
TEST(StepRun, EachGroupFindsItsOwnKernel) {
  StepEngine engine;
  RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  std::vector<StepKernelRun> own = step_kernel_runs(r), with_lookalikes;
  for (size_t i = 0; i < own.size(); ++i) {
    own[i].ok = true;
    own[i].mean_ms = 1.0 + static_cast<double>(i);
    own[i].reason.clear();
    StepKernelRun alike = own[i];
    alike.spec.elements += 1, alike.spec.rows += 1;  // reads alike in describe() for the multi-tensor kernels
    alike.mean_ms = 1000.0 + static_cast<double>(i);
    with_lookalikes.push_back(alike);
    with_lookalikes.push_back(own[i]);
  }
  const auto adamw = std::find_if(own.begin(), own.end(), [](const StepKernelRun& k) { return k.spec.kind == StepKernelKind::AdamW; });
  ASSERT_NE(adamw, own.end());
  StepKernelSpec alike = adamw->spec;
  alike.elements += 1;
  ASSERT_EQ(alike.describe(), adamw->spec.describe());  // the case a lookup by describe() got wrong
  const auto time_of = [&](const StepKernelSpec& s) {
    for (const StepKernelRun& k : own)
      if (k.spec.key() == s.key()) return k.mean_ms;
    ADD_FAILURE() << "no kernel " << s.describe();
    return 0.0;
  };
  set_step_kernel_records(r, with_lookalikes, Source::Measured);
  const StepResult step = step_from_result(r, true);
  int kernel_groups = 0;
  for (const StepGroupResult& g : step.steps[0][0].groups) {
    if (g.group.basis != TimeBasis::StepKernel || !g.group.kernel) continue;
    ++kernel_groups;
    ASSERT_TRUE(g.time.ms) << g.group.name;
    EXPECT_EQ(g.time.source, TimeSource::Measured) << g.group.name;
    EXPECT_DOUBLE_EQ(*g.time.ms, time_of(*g.group.kernel)) << g.group.name;
  }
  EXPECT_GE(kernel_groups, 7);  // zero-grad, embedding fwd/bwd, loss fwd/bwd, grad norm, optimizer
  EXPECT_DOUBLE_EQ(step.steps[0][0].host.launch_us, time_of(StepKernelSpec{}) * 1e3);
  // The optimizer's kernel missing, its look-alike there: modelled from its bytes, saying so.
  std::vector<StepKernelRun> missing;
  for (const StepKernelRun& k : with_lookalikes)
    if (k.spec.key() != adamw->spec.key()) missing.push_back(k);
  set_step_kernel_records(r, missing, Source::Measured);
  const StepResult without_optimizer = step_from_result(r, true);
  const StepGroupResult& opt = step_group(without_optimizer.steps[0][0], "optimizer");
  const StepContextInfo ctx = test::fake_step_context();
  EXPECT_EQ(opt.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*opt.time.ms, opt.group.bytes / (ctx.stream_gb_per_s * 1e6 * ctx.efficiency));
  EXPECT_EQ(opt.time.how.find("measured"), std::string::npos) << opt.time.how;
  // measure_step asked the engine for each distinct kernel once.
  std::set<std::string> asked;
  for (const StepKernelSpec& s : engine.specs) asked.insert(s.describe());
  EXPECT_EQ(asked.size(), engine.specs.size());
}

TEST(StepRun, JsonRoundTripAndPeak) {
  StepEngine engine;
  RunResult r = run(engine, request());
  set_step_peak(*r.step, {989, "H100 datasheet"});
  ASSERT_TRUE(r.step->steps[0][0].mfu);
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j.contains("step"));
  EXPECT_EQ(j["step_options"]["recompute"], "none");
  EXPECT_EQ(j["step_options"]["grad_clip"], true);
  const nlohmann::json& bf16 = j["step"]["modes"]["training"]["BF16"];
  EXPECT_DOUBLE_EQ(bf16["step_ms"].get<double>(), *r.step->steps[0][0].step_ms);
  EXPECT_FALSE(bf16["breakdown"]["gemm"].is_null());
  EXPECT_FALSE(j["step"]["modes"]["training"]["FP8Current"]["speedup_vs_bf16"]["gemm"].is_null());
  const RunResult back = from_json(j, "r.json");
  ASSERT_TRUE(back.step);
  EXPECT_DOUBLE_EQ(*back.step->steps[0][0].step_ms, *r.step->steps[0][0].step_ms);
  EXPECT_DOUBLE_EQ(*back.step->steps[0][0].mfu, *r.step->steps[0][0].mfu);
  EXPECT_EQ(render_text(back), render_text(r));
}

// The position in j["records"] of the step kernel `kernel`'s record (values.kind: "adamw", ...).
size_t step_kernel_at(const nlohmann::json& j, const std::string& kernel) {
  for (size_t i = 0; i < j["records"].size(); ++i)
    if (const auto& v = j["records"][i].value("values", nlohmann::json::object()); v.value("kind", "") == kernel) return i;
  ADD_FAILURE() << "no " << kernel << " record";
  return 0;
}

std::string error_of(const nlohmann::json& j) {
  try {
    from_json(j, "r.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(read without an error)";
}

// The step kernels the engine timed are records of kinds optimizer, loss, embedding and host:
// each an item named by its kernel, its value the engine's cell with the kernel's spec; the step
// section holds none of them, and the step is derived from the records alone.
TEST(StepRun, StepKernelsAreRecords) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const std::vector<StepKernelRun> kernels = step_kernel_runs(r);
  ASSERT_EQ(kernels.size(), engine.specs.size());  // one record per kernel the engine was asked for, in order
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_EQ(kernels[i].spec.key(), engine.specs[i].key()) << i;
    const bool measured = kernels[i].spec.kind == StepKernelKind::AdamW || kernels[i].spec.kind == StepKernelKind::LaunchLatency;
    EXPECT_EQ(kernels[i].ok, measured) << kernels[i].spec.describe();
  }
  const nlohmann::json j = to_json(r);
  EXPECT_FALSE(j["step"].contains("kernels"));
  const nlohmann::json& adamw = j["records"][step_kernel_at(j, "adamw")];
  EXPECT_EQ(adamw["kind"], "optimizer");
  EXPECT_EQ(adamw["values"]["kind"], "adamw");
  EXPECT_EQ(adamw["source"], "measured");
  EXPECT_EQ(adamw["status"], "ok");
  EXPECT_DOUBLE_EQ(adamw["mean_ms"].get<double>(), 10.0);
  EXPECT_FALSE(adamw.contains("pass"));
  const nlohmann::json& loss = j["records"][step_kernel_at(j, "cross-entropy-fwd")];
  EXPECT_EQ(loss["kind"], "loss");
  EXPECT_EQ(loss["pass"], "fprop");
  EXPECT_EQ(loss["status"], "n/a");
  EXPECT_EQ(loss["reason"], "fake engine: no such kernel");
  EXPECT_EQ(j["items"]["host"], nlohmann::json::array({StepKernelSpec{}.describe()}));
  // Read back: the same records, the same step, the same document and report; the report's
  // "Other records" does not list them (the step block presents them).
  const RunResult back = from_json(j, "r.json");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(render_text(back), render_text(r));
  EXPECT_EQ(render_text(back).find("Other records:"), std::string::npos);
  // Measuring again replaces the step kernel records rather than adding to them.
  RunResult again = r;
  StepEngine second;
  measure_step(second, again);
  EXPECT_EQ(to_json(again)["records"], j["records"]);
}

// A step kernel record that breaks the schema is refused in one line naming the file, the record
// and the field.
TEST(StepRun, BrokenStepKernelRecordsAreRefused) {
  StepEngine engine;
  const nlohmann::json j = to_json(run(engine, request()));
  const size_t at = step_kernel_at(j, "adamw");  // measured (ok) by the fake engine
  const std::string where = fmt::format("r.json: records[{}] (optimizer step kernel): values", at);
  nlohmann::json bad = j;
  bad["records"][at]["values"]["kind"] = "warp-drive";
  EXPECT_NE(error_of(bad).find(where + ".kind must be"), std::string::npos) << error_of(bad);
  bad = j;
  bad["records"][at]["values"]["elements"] = 2.5;
  EXPECT_NE(error_of(bad).find(where + ".elements must be an integer from 0 to 2^50"), std::string::npos) << error_of(bad);
  bad = j;
  bad["records"][at]["values"]["elements"] = -1;
  EXPECT_NE(error_of(bad).find(where + ".elements must be an integer"), std::string::npos) << error_of(bad);
  bad = j;
  bad["records"][at]["values"]["storage"] = "fp4";
  EXPECT_NE(error_of(bad).find(where + ".storage must be"), std::string::npos) << error_of(bad);
  bad = j;
  bad["records"][at]["values"].erase("fused");
  EXPECT_NE(error_of(bad).find(where + " has no 'fused'"), std::string::npos) << error_of(bad);
  bad = j;
  bad["records"][at]["mean_ms"] = -1;
  EXPECT_NE(error_of(bad).find("mean_ms"), std::string::npos) << error_of(bad);
  // An optimizer kernel filed under another record kind.
  bad = j;
  bad["records"][at]["kind"] = "host";
  bad["items"]["host"].push_back("an optimizer's kernel");
  bad["records"][at]["item"] = bad["items"]["host"].size() - 1;
  EXPECT_NE(error_of(bad).find("step kernel adamw is a record of kind optimizer, not host"), std::string::npos) << error_of(bad);
  // A predicted step kernel has no band (none is measured for the carried step), a measured one
  // holds none either.
  bad = j;
  bad["records"][at]["predicted"] = true;
  bad["records"][at]["low_ms"] = 9.0;
  bad["records"][at]["high_ms"] = 11.0;
  EXPECT_NE(error_of(bad).find("belongs to a predicted record only"), std::string::npos) << error_of(bad);
  // More step kernels than a step measures: refused with the bound named (each is looked up per
  // group, mode and precision by every command that reads the file).
  bad = j;
  const nlohmann::json host = j["records"][step_kernel_at(j, "launch-latency")];
  while (bad["items"]["host"].size() <= kMaxStepKernels) {
    nlohmann::json k = host;
    k["item"] = bad["items"]["host"].size();
    bad["items"]["host"].push_back("launch-latency");
    bad["records"].push_back(k);
  }
  EXPECT_NE(error_of(bad).find("more than the 1024 step kernels"), std::string::npos) << error_of(bad);
}

// The result reader's fuzz seed with a whole step (tests/fuzz/corpus/result/whole_step.json, read
// by scripts/fuzz.sh's fuzz_result): what the writer writes now for this file's fake run, so the
// fuzzer starts from the step kernel records as they are. The test fails when the committed seed
// differs (apart from the tool version); GS_WRITE_FIXTURES=1 rewrites it:
//   GS_WRITE_FIXTURES=1 build/gemmscope_core_tests --gtest_filter='StepRun.FuzzSeedIsWhatTheWriterWrites'
TEST(StepRun, FuzzSeedIsWhatTheWriterWrites) {
  const std::string path = std::string(GS_SOURCE_DIR) + "/tests/fuzz/corpus/result/whole_step.json";
  StepEngine engine;
  RunResult r = run(engine, request());
  r.created = "2026-01-01T00:00:00Z";
  const nlohmann::json now = to_json(r);
  if (test::check_fixture(path, now) == test::Fixture::Written) GTEST_SKIP() << "wrote " << path;
  // It holds what the fuzzer is to start from: step kernel records, measured and N/A, and a step.
  EXPECT_TRUE(now.contains("step"));
  EXPECT_EQ(now["records"][step_kernel_at(now, "adamw")]["status"], "ok");
  EXPECT_EQ(now["records"][step_kernel_at(now, "zero-grad")]["status"], "n/a");
  // The committed seed reads as the run it was written from.
  EXPECT_EQ(render_text(from_json(read_json_file(path, "fuzz seed"), "whole_step.json")), render_text(r));
}

// A fleet document's top-level device is empty: its step (rank 0's) takes rank 0's GPU memory, as
// the step the run of rank 0 wrote does, so that a reader derives the same memory again.
TEST(StepRun, FleetStepHasRankZerosMemory) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  ASSERT_TRUE(r.step && r.step->steps[0][0].memory.device_bytes);
  const RunResult m = merge_ranks({{"GPU 0", r}, {"GPU 1", r}});
  ASSERT_FALSE(m.device);
  const StepResult s = step_from_result(m, true);
  EXPECT_EQ(s.steps[0][0].memory.device_bytes, r.step->steps[0][0].memory.device_bytes);
  EXPECT_EQ(s.steps[0][0].memory.fits(), r.step->steps[0][0].memory.fits());
}

// Files written before the step kernels were records held them in the step's "kernels" list: read
// into the same records, the same step, and written again as records. Both at once are refused.
TEST(StepRun, OlderFilesStepKernelsListReadsIntoRecords) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const nlohmann::json j = to_json(r);
  nlohmann::json old = j;
  nlohmann::json records = nlohmann::json::array();
  const std::set<std::string> kernel_kinds = {"optimizer", "loss", "embedding", "host"};
  for (const auto& rec : j["records"])
    if (!kernel_kinds.count(rec["kind"].get<std::string>())) records.push_back(rec);
  old["records"] = records;
  for (const std::string& k : kernel_kinds) old["items"].erase(k);
  for (const StepKernelRun& k : step_kernel_runs(r)) {
    nlohmann::json o;
    json_fields::write_fields(step_kernel_spec_fields(), k.spec, o);
    o["describe"] = k.spec.describe();
    o["status"] = k.ok ? "ok" : "n/a";
    o["mean_ms"] = k.ok ? nlohmann::json(k.mean_ms) : nlohmann::json();
    if (!k.ok) o["reason"] = k.reason;
    old["step"]["kernels"].push_back(o);
  }
  const RunResult back = from_json(old, "old.json");
  EXPECT_EQ(render_text(back), render_text(r));
  EXPECT_EQ(to_json(back), j);
  // A broken entry of the list is refused with its field's name, a list longer than a step's with
  // the count, and the list beside step kernel records as the two copies it is.
  nlohmann::json bad = old;
  bad["step"]["kernels"][0]["kind"] = "warp-drive";
  EXPECT_NE(error_of(bad).find("step.kernels[0].kind"), std::string::npos) << error_of(bad);
  bad = old;
  bad["step"]["kernels"][0]["status"] = "ok";
  bad["step"]["kernels"][0]["mean_ms"] = -1;
  EXPECT_NE(error_of(bad).find("step.kernels[0].mean_ms must be a positive number"), std::string::npos) << error_of(bad);
  bad = old;
  while (bad["step"]["kernels"].size() <= kMaxStepKernels) bad["step"]["kernels"].push_back(old["step"]["kernels"][0]);
  EXPECT_NE(error_of(bad).find("more than the 1024"), std::string::npos) << error_of(bad);
  bad = j;
  bad["step"]["kernels"] = old["step"]["kernels"];
  EXPECT_NE(error_of(bad).find("lists the step kernels that its records hold too"), std::string::npos) << error_of(bad);
}

// Every field of a step context, to compare two.
auto context_fields(const StepContextInfo& c) {
  return std::make_tuple(to_string(c.kind), c.stream_gb_per_s, c.efficiency, c.other_ms, c.move_ms, c.move_gb_per_s,
                         c.other_from_user, c.cast_ms, c.attention_fwd_ms, c.attention_bwd_ms, c.attention_measured,
                         c.attention_source, c.attention_shape);
}
void expect_same(const StepContextInfo& a, const StepContextInfo& b) { EXPECT_EQ(context_fields(a), context_fields(b)); }

// The position in j["records"] of the step context's record of `kind` ("attention", "step-work"),
// item `item` ("layer"; "other", "move", "cast"), pass `pass` ("" for none) and rank `rank`.
size_t context_at(const nlohmann::json& j, const std::string& kind, const std::string& item, const std::string& pass = "",
                  size_t rank = 0) {
  for (size_t i = 0; i < j["records"].size(); ++i) {
    const nlohmann::json& rec = j["records"][i];
    if (rec["kind"] != kind || rec.value("pass", "") != pass || rec.value("rank", size_t{0}) != rank) continue;
    if (j["items"][kind][rec["item"].get<size_t>()] == item) return i;
  }
  ADD_FAILURE() << "no " << kind << " " << item << " " << pass << " record of rank " << rank;
  return 0;
}

// j's records in one order: where a reader files a quantity among them is not part of the document.
nlohmann::json sorted_records(nlohmann::json j) {
  std::vector<std::string> texts;
  for (const auto& rec : j["records"]) texts.push_back(rec.dump());
  std::sort(texts.begin(), texts.end());
  j["records"] = nlohmann::json::array();
  for (const std::string& t : texts) j["records"].push_back(nlohmann::json::parse(t));
  return j;
}

// j in the layout of files written before the step context was records: its records as
// "step_context" objects (top level; a fleet document's in each rank's entry), the step estimate
// inside.
nlohmann::json with_step_context_objects(const nlohmann::json& j) {
  nlohmann::json old = j;
  old["records"] = nlohmann::json::array();
  for (const auto& rec : j["records"]) {
    if (rec["kind"] != "attention" && rec["kind"] != "step-work") {
      old["records"].push_back(rec);
      continue;
    }
    nlohmann::json& sc = j.contains("ranks") ? old["ranks"][rec["rank"].get<size_t>()]["step_context"] : old["step_context"];
    test::legacy_step_context_fields(j, rec, sc);
  }
  old["items"].erase("attention");
  old["items"].erase("step-work");
  if (j.contains("step_estimate_per_layer")) {
    old["step_context"]["step_estimate_per_layer"] = j["step_estimate_per_layer"];
    old.erase("step_estimate_per_layer");
  }
  return old;
}

// A context with every figure set: MoE dispatch, FP8 casts, attention modelled.
StepContextInfo full_context() {
  StepContextInfo c = test::fake_step_context();
  c.kind = StepContextKind::Eager;
  c.move_ms = 0.25;
  c.move_gb_per_s = 1800;
  c.cast_ms = 0.125;
  c.attention_measured = false;
  c.attention_source = "modelled: a test's";
  c.attention_shape = "batch 1 x seq 2048, heads 32/8, head dims 128/128, causal";
  return c;
}

// The step context the engine ran is records: attention per pass (measured: cuDNN), the step's
// memory-bound work per item (modelled), the context's figures as the "other" record's values; the
// document holds no step_context object, and the records read back to the same context, step,
// document and report.
TEST(StepRun, StepContextIsRecords) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const std::optional<StepContextInfo> view = step_context_view(r);
  ASSERT_TRUE(view);
  expect_same(*view, test::fake_step_context());
  const nlohmann::json j = to_json(r);
  EXPECT_FALSE(j.contains("step_context"));
  EXPECT_TRUE(j.contains("step_estimate_per_layer"));  // derived, for readers
  EXPECT_EQ(j["items"]["step-work"], nlohmann::json::array({"other", "move", "cast"}));
  EXPECT_EQ(j["items"]["attention"], nlohmann::json::array({"layer"}));
  const nlohmann::json& fwd = j["records"][context_at(j, "attention", "layer", "fprop")];
  EXPECT_EQ(fwd["source"], "measured");
  EXPECT_EQ(fwd["status"], "ok");
  EXPECT_DOUBLE_EQ(fwd["mean_ms"].get<double>(), test::fake_step_context().attention_fwd_ms);
  EXPECT_EQ(fwd["values"]["source"], test::fake_step_context().attention_source);
  EXPECT_DOUBLE_EQ(j["records"][context_at(j, "attention", "layer", "dgrad")]["mean_ms"].get<double>(),
                   test::fake_step_context().attention_bwd_ms);
  const nlohmann::json& other = j["records"][context_at(j, "step-work", "other")];
  EXPECT_EQ(other["source"], "modelled");
  EXPECT_DOUBLE_EQ(other["mean_ms"].get<double>(), test::fake_step_context().other_ms);
  EXPECT_EQ(other["values"]["kind"], "te");
  EXPECT_EQ(other["values"]["efficiency"], test::fake_step_context().efficiency);
  size_t work = 0;  // no MoE dispatch, no casts in the fake context: no records of theirs
  for (const auto& rec : j["records"]) work += rec["kind"] == "step-work" ? 1 : 0;
  EXPECT_EQ(work, 1u);
  const RunResult back = from_json(j, "r.json");
  expect_same(*step_context_view(back), test::fake_step_context());
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(render_text(back), render_text(r));
  EXPECT_EQ(render_text(back).find("Other records:"), std::string::npos);  // the step context's block has them
  // Every figure set: each quantity its record, the same context back.
  RunResult full = r;
  set_step_context_records(full, full_context());
  expect_same(*step_context_view(full), full_context());
  const nlohmann::json fj = to_json(full);
  EXPECT_EQ(fj["records"][context_at(fj, "attention", "layer", "dgrad")]["source"], "modelled");
  EXPECT_DOUBLE_EQ(fj["records"][context_at(fj, "step-work", "cast")]["mean_ms"].get<double>(), 0.125);
  expect_same(*step_context_view(from_json(fj, "full.json")), full_context());
  // Setting again replaces the records; clearing leaves none, nor their items.
  set_step_context_records(full, test::fake_step_context());
  EXPECT_EQ(sorted_records(to_json(full)), sorted_records(j));
  clear_step_context_records(full);
  EXPECT_FALSE(step_context_view(full));
  EXPECT_FALSE(to_json(full)["items"].contains("step-work"));
}

// --step-other-ms: the user's own figure is neither measured nor modelled: source "given", and the
// report says whose it is.
TEST(StepRun, StepOtherMsIsGiven) {
  StepEngine engine;
  RunResult r = run(engine, request());
  StepContextInfo c = full_context();
  c.other_from_user = true;
  c.cast_ms = 0;  // the user's figure holds the casts
  set_step_context_records(r, c);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["records"][context_at(j, "step-work", "other")]["source"], "given");
  EXPECT_EQ(j["records"][context_at(j, "step-work", "move")]["source"], "given");
  const RunResult back = from_json(j, "r.json");
  expect_same(*step_context_view(back), c);
  EXPECT_NE(render_text(back).find("(--step-other-ms, your step's figure"), std::string::npos);
  EXPECT_EQ(step_group(step_from_result(back, true).steps[0][0], "other bwd").time.source, TimeSource::Given);
  EXPECT_STREQ(to_string(Source::Given), "given");
}

// A fleet document: each rank's context is its records (rank 0 and rank 1 differ), read back the
// same, and each rank's run split from the document holds its own.
TEST(StepRun, FleetRanksStepContextsAreRecords) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  RunResult second = r;
  set_step_context_records(second, full_context());
  const RunResult m = merge_ranks({{"GPU 0", r}, {"GPU 1", second}});
  expect_same(*step_context_view(m, 0), test::fake_step_context());
  expect_same(*step_context_view(m, 1), full_context());
  const nlohmann::json j = to_json(m);
  EXPECT_FALSE(j["ranks"][1].contains("step_context"));
  const RunResult back = from_json(j, "fleet.json");
  expect_same(*step_context_view(back, 0), test::fake_step_context());
  expect_same(*step_context_view(back, 1), full_context());
  EXPECT_EQ(to_json(back), j);
  const std::vector<FleetRun> runs = split_ranks(back);
  ASSERT_EQ(runs.size(), 2u);
  expect_same(*step_context_view(runs[1].run), full_context());
  EXPECT_FALSE(step_context_view(runs[1].run, 1));
  // An older fleet document held each rank's context in its "step_context" object.
  const nlohmann::json old = with_step_context_objects(j);
  const RunResult older = from_json(old, "old-fleet.json");
  expect_same(*step_context_view(older, 1), full_context());
  EXPECT_EQ(sorted_records(to_json(older)), sorted_records(j));
  nlohmann::json both = j;
  both["ranks"][1]["step_context"] = old["ranks"][1]["step_context"];
  EXPECT_NE(error_of(both).find("r.json: the step_context object of rank 1 is what its records hold too"),
            std::string::npos)
      << error_of(both);
}

// Files written before the step context was records held it in a "step_context" object: read into
// the same records, the same context, step, report and document. Both at once are refused.
TEST(StepRun, OlderFilesStepContextObjectReadsIntoRecords) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const nlohmann::json j = to_json(r);
  const nlohmann::json old = with_step_context_objects(j);
  EXPECT_EQ(old["step_context"]["attention_fwd_ms"], test::fake_step_context().attention_fwd_ms);
  const RunResult back = from_json(old, "old.json");
  expect_same(*step_context_view(back), test::fake_step_context());
  EXPECT_EQ(render_text(back), render_text(r));
  EXPECT_EQ(sorted_records(to_json(back)), sorted_records(j));
  // The schema-2 layout holds it the same way.
  expect_same(*step_context_view(from_json(test::legacy_layout(j), "v2.json")), test::fake_step_context());
  // A bad field of the object is refused naming it; the object beside the records is refused.
  nlohmann::json bad = old;
  bad["step_context"]["kind"] = "turbo";
  EXPECT_NE(error_of(bad).find("r.json: step_context.kind must be one of te, eager, compile, none"), std::string::npos)
      << error_of(bad);
  bad = old;
  bad["step_context"]["attention_fwd_ms"] = -1;
  EXPECT_NE(error_of(bad).find("step_context.attention_fwd_ms"), std::string::npos) << error_of(bad);
  bad = j;
  bad["step_context"] = old["step_context"];
  EXPECT_NE(error_of(bad).find("the step_context object of rank 0 is what its records hold too"), std::string::npos)
      << error_of(bad);
}

// A step context record that breaks the layout is refused in one line naming the file and the record.
TEST(StepRun, BrokenStepContextRecordsAreRefused) {
  StepEngine engine;
  RunResult full = run(engine, request());
  set_step_context_records(full, full_context());
  const nlohmann::json j = to_json(full);
  const size_t fwd = context_at(j, "attention", "layer", "fprop"), bwd = context_at(j, "attention", "layer", "dgrad"),
               other = context_at(j, "step-work", "other"), move = context_at(j, "step-work", "move"),
               cast = context_at(j, "step-work", "cast");
  const auto at = [](size_t i, const std::string& what) { return fmt::format("r.json: records[{}] ({})", i, what); };
  const auto refused = [&](const nlohmann::json& bad, const std::string& message) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find(message), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  nlohmann::json bad = j;
  bad["records"][fwd]["mean_ms"] = -1;  // a negative time
  refused(bad, fmt::format("r.json: records[{}]: status \"ok\" needs a positive number mean_ms", fwd));
  bad = j;
  bad["records"][cast]["mean_ms"] = 2e4;  // above any layer's
  bad["records"][cast].erase("median_ms");
  bad["records"][cast].erase("min_ms");
  bad["records"][cast].erase("max_ms");
  refused(bad, at(cast, "step-work cast") + ": its time must be above 0 and at most 10000 ms per layer");
  bad = j;
  bad["items"]["step-work"][1] = "warp";  // the move record's item
  refused(bad, at(move, "step-work warp") + ": unknown step-work item 'warp' (other, move, cast)");
  bad = j;
  bad["items"]["attention"][0] = "head";
  refused(bad, "unknown attention item 'head'");
  bad = j;
  bad["records"][bwd]["pass"] = "wgrad";
  refused(bad, at(bwd, "attention layer") + ": an attention record's pass is fprop (the forward) or dgrad");
  bad = j;
  bad["records"][bwd]["source"] = "given";
  refused(bad, at(bwd, "attention layer") + ": attention is measured or modelled, not given");
  bad = j;
  bad["records"][cast]["source"] = "given";
  refused(bad, at(cast, "step-work cast") + ": step work 'cast' is modelled, not given");
  bad = j;
  bad["records"][move]["source"] = "given";
  refused(bad, "(step-work move) is given, its 'other' record modelled");
  bad = j;
  bad["records"][other]["mode"] = "training";
  refused(bad, at(other, "step-work other") + ": a step context record has no mode, precision or provider");
  bad = j;
  bad["records"].erase(bwd);
  refused(bad, "r.json: rank 0's step context has attention's fprop record without its dgrad one");
  bad = j;
  bad["records"][fwd]["source"] = "measured";
  refused(bad, "r.json: rank 0's step context's attention is measured forward and modelled backward");
  bad = j;
  bad["records"].erase(other);
  refused(bad, "r.json: rank 0's step context has no step-work 'other' record");
  bad = j;
  bad["records"].push_back(j["records"][other]);
  bad["records"].back()["source"] = "given";  // another key, the same quantity
  refused(bad, fmt::format("repeats records[{}]: one record per quantity", other));
  bad = j;
  bad["records"][other]["values"]["efficiency"] = -1;
  refused(bad, at(other, "step-work other") + ": values.efficiency must be");
  bad = j;
  bad["records"][other]["values"]["kind"] = "turbo";
  refused(bad, at(other, "step-work other") + ": values.kind must be one of te, eager, compile, none");
  // Set in code, not read: the view refuses the same.
  RunResult negative = full;
  StepContextInfo c = full_context();
  set_step_context_records(negative, c);
  for (size_t i = 0; i < negative.records.size(); ++i)
    if (negative.records[i].key.kind == RecordKind::Attention) negative.records.value(i).stats.mean_ms = -1;
  EXPECT_THROW(step_context_view(negative), UsageError);
}

TEST(StepRun, WithoutAContextTheStepIsUnknownNotGuessed) {
  StepEngine engine(false);
  const RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  const StepBreakdown& b = r.step->steps[0][0];
  EXPECT_FALSE(b.step_ms);
  EXPECT_EQ(step_group(b, "GEMMs fwd, dense layer").time.source, TimeSource::Measured);
  EXPECT_EQ(step_group(b, "attention fwd").time.source, TimeSource::Unknown);
  EXPECT_EQ(step_group(b, "optimizer").time.source, TimeSource::Measured);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Step time unknown"), std::string::npos);
  EXPECT_THROW(step_trace_text(r), UsageError);
}

TEST(StepRun, DryRunPrintsThePlanWithoutTimes) {
  RunRequest req = request();
  const RunResult r = plan_only(req);
  ASSERT_TRUE(r.step);
  EXPECT_FALSE(r.step->timed);
  EXPECT_FALSE(r.step->steps[0][0].step_ms);
  const std::string text = render_plan_text(r);
  EXPECT_NE(text.find("Whole training step plan"), std::string::npos);
  EXPECT_NE(text.find("loss fwd"), std::string::npos);
  EXPECT_NE(text.find("step kernel (measured, else modelled)"), std::string::npos);
  EXPECT_NE(text.find("no GPU: not set against a device's memory"), std::string::npos);
  EXPECT_EQ(text.find(" ms per step"), std::string::npos);
  const RunResult back = from_json(to_json(r), "dry.json");
  ASSERT_TRUE(back.step);
  EXPECT_FALSE(back.step->timed);
  // No step for standalone shapes.
  req.plan = build_shapes_plan("1024");
  EXPECT_FALSE(plan_only(req).step);
}

TEST(StepRun, TraceOfEveryPrecision) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const nlohmann::json t = nlohmann::json::parse(step_trace_text(r));
  int processes = 0;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
  EXPECT_EQ(processes, 2);  // BF16 and FP8Current
}

}  // namespace
}  // namespace gs

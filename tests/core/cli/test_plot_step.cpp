// The step chart (tools/gemmscope_charts/step.py, `gemmscope plot --kind step`) from a run made on a
// fake engine: one stacked bar per precision from the result's step breakdown. Skipped where no
// Python has matplotlib (gemmscope plot exits 3 saying so).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>

#include "core/io/output_paths.hpp"
#include "core/model/model_config.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

namespace gs {
namespace {

int count_ids(const std::string& svg, const std::string& id_regex) {
  const std::regex re("id=\"" + id_regex + "\"");
  return static_cast<int>(std::distance(std::sregex_iterator(svg.begin(), svg.end(), re), std::sregex_iterator()));
}

TEST(PlotStep, BreakdownPerPrecision) {
  RunRequest req;
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 2;
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::Training};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.step_context_kind = StepContextKind::TransformerEngine;
  test::FakeStepEngine engine;
  const RunResult r = run(engine, req);
  const auto dir = test::scratch_dir("plot_step");
  const std::string in = (dir / "r.json").string(), out = (dir / "step.svg").string();
  write_file_atomic(in, to_json(r).dump());
  const test::Out p = test::run_gemmscope("plot " + in + " --kind step -o " + out, dir);
  if (p.rc == 3 && p.err.find("matplotlib is not installed") != std::string::npos)
    GTEST_SKIP() << "no Python with matplotlib";
  ASSERT_EQ(p.rc, 0) << p.err;
  const std::string svg = test::slurp(out);
  EXPECT_EQ(count_ids(svg, "bar:(BF16|FP8Current):gemm"), 2);
  EXPECT_EQ(count_ids(svg, "bar:BF16:(attention|other|loss|optimizer)"), 4);
  EXPECT_EQ(count_ids(svg, "speedup:(BF16|FP8Current)"), 2);
  // A dry run has no timed step: bad input.
  RunRequest dry = req;
  write_file_atomic(in, to_json(plan_only(dry)).dump());
  EXPECT_EQ(test::run_gemmscope("plot " + in + " --kind step -o " + out, dir).rc, 2);
}

}  // namespace
}  // namespace gs

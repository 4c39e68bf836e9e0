// The whole step from the command line (no GPU: dry runs and refusals).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace gs {
namespace {

TEST(StepCli, DryRunPrintsTheStepPlan) {
  const auto dir = test::scratch_dir("step_cli");
  const std::string f = (dir / "r.json").string();
  test::Out r = test::run_gemmscope("--model llama-3-8b --dry-run -q --json " + f, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* s : {"Whole training step plan", "embedding fwd", "loss fwd", "optimizer", "zero-grad",
                        "Memory per GPU (BF16, modelled)", "no GPU: not set against a device's memory"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  const nlohmann::json j = nlohmann::json::parse(test::slurp(f));
  EXPECT_EQ(j["step"]["timed"], false);
  EXPECT_TRUE(j["step"]["modes"]["training"]["BF16"]["step_ms"].is_null());
  EXPECT_EQ(j["step_options"]["param_storage"], "bf16+fp32-main");
  // DeepSeek-V3: MoE routers, MLA, 61 layers.
  r = test::run_gemmscope("--model deepseek-v3 --dry-run -q", dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("router fwd"), std::string::npos);
  EXPECT_NE(r.out.find("GEMMs fwd, MoE layer"), std::string::npos);
  // Plain PyTorch's semantics, selectable.
  r = test::run_gemmscope("--model llama-3-8b --dry-run -q --step-context eager --param-storage bf16 --recompute full "
                          "--json " + f,
                          dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("recompute full, bf16 parameters"), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("recompute: GEMMs fwd, dense layer"), std::string::npos);
  const nlohmann::json e = nlohmann::json::parse(test::slurp(f));
  EXPECT_EQ(e["recipe_options"]["wgrad_output"], "bf16");
}

TEST(StepCli, TraceNeedsAMeasuredRunAndAFreePath) {
  const auto dir = test::scratch_dir("step_cli_trace");
  const std::string t = (dir / "t.json").string();
  test::Out r = test::run_gemmscope("--model llama-3-8b --dry-run -q --trace " + t, dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("--trace skipped: nothing was measured"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(t));
  r = test::run_gemmscope("--model llama-3-8b --dry-run -q --trace " + t + " --json " + t, dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("are the same file"), std::string::npos) << r.err;
  r = test::run_gemmscope("--model llama-3-8b --dry-run -q --trace " + dir.string(), dir);
  EXPECT_EQ(r.rc, 2) << r.err;
}

TEST(StepCli, StepFlagsAreForModels) {
  const auto dir = test::scratch_dir("step_cli_refuse");
  const test::Out r = test::run_gemmscope("--shapes 1024 --dry-run --grad-clip off", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--grad-clip shapes the whole training step of a model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gs

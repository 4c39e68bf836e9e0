// bench/validate_model_step.py's parts that need no GPU: its self-test (kernel classification, the
// phase windows over a synthetic trace, gemmscope's step block, the table and the bars), its dry
// run (every selected case and gemmscope's command line, without PyTorch) and its refusals.
#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"

namespace {

const std::string kScript = std::string(GS_SOURCE_DIR) + "/bench/validate_model_step.py";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(ValidateModelStep, SelfTestDryRunAndRefusals) {
  const auto dir = gs::test::scratch_dir("validate_model_step");
  if (gs::test::run_shell("python3 -c pass", dir).rc != 0) GTEST_SKIP() << "no python3";
  const gs::test::Out self = gs::test::run_shell("python3 " + kScript + " --self-test", dir);
  EXPECT_EQ(self.rc, 0) << self.err;
  EXPECT_TRUE(has(self.err, "self-test: ok")) << self.err;

  // The check set, one form: five models, both precisions, one gemmscope command per model.
  const gs::test::Out dry =
      gs::test::run_shell("python3 " + kScript + " --dry-run --models check --forms compile --gemmscope GS", dir);
  ASSERT_EQ(dry.rc, 0) << dry.err;
  for (const char* m : {"qwen3-1.7b (check)", "phi-2 (check)", "mistral-7b (check)", "llama-3-8b (check)",
                        "mixtral-8x7b (check)"})
    EXPECT_TRUE(has(dry.out, m)) << m << "\n" << dry.out;
  EXPECT_FALSE(has(dry.out, "(tune)"));
  EXPECT_TRUE(has(dry.out, "PyTorch compile fp8"));
  EXPECT_TRUE(has(dry.out, "gemmscope: GS --hidden_size 4096")) << dry.out;
  EXPECT_TRUE(has(dry.out, "--step-context compile")) << dry.out;
  EXPECT_TRUE(has(dry.out, "--precisions BF16,FP8Current")) << dry.out;
  EXPECT_TRUE(has(dry.out, "--routing 'file:<tmp>/mixtral-8x7b_routing.json'")) << dry.out;
  EXPECT_TRUE(has(dry.out, "8 of 32 layers")) << dry.out;  // truncation said

  // Refusals: one line, exit 2.
  for (const char* bad : {"--models nope", "--forms jit", "--precisions fp4", "--seconds 1"}) {
    const gs::test::Out o = gs::test::run_shell("python3 " + kScript + " --dry-run " + bad, dir);
    EXPECT_EQ(o.rc, 2) << bad;
    EXPECT_TRUE(has(o.err, "validate_model_step: ")) << bad << ": " << o.err;
  }
}

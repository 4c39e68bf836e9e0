// One "did you mean" rule (core/util/suggest.hpp) for flags, model presets, subcommands and enum values.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/model/model_config.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/util/suggest.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : presets()) out.push_back(p.name);
  return out;
}

}  // namespace

TEST(Suggest, TheRule) {
  using V = std::vector<std::string>;
  EXPECT_EQ(edit_distance("szie", "size"), 1u);
  // 1. Within a few edits; the spelling typed alike wins a tie between spellings of one name.
  EXPECT_EQ(suggestions("--hidden-szie", {"--hidden_size", "--hidden-size"}), V{"--hidden-size"});
  EXPECT_EQ(suggestions("--hidden_szie", {"--hidden_size", "--hidden-size"}), V{"--hidden_size"});
  EXPECT_EQ(suggestions("llama3-70b", preset_names()), V{"llama-3-70b"});
  EXPECT_EQ(suggestions("rport", {"plot", "compare", "report", "predict"}), V{"report"});
  EXPECT_EQ(suggestions("trainig", {"training", "per-gemm", "pre-quantized"}), V{"training"});
  // Every name as near is listed.
  EXPECT_EQ(suggestions("H300", {"H100", "H200", "B300", "A100"}), (V{"H100", "H200", "B300"}));
  // 2. Words that begin the candidate's words.
  EXPECT_EQ(suggestions("mixtral", preset_names()), V{"mixtral-8x7b"});
  EXPECT_EQ(suggestions("qwen3", preset_names()), (V{"qwen3-30b-a3b", "qwen3-235b-a22b"}));
  EXPECT_EQ(suggestions("--seq-len", {"--sequence_length", "--seed"}), V{"--sequence_length"});
  EXPECT_EQ(suggestions("--micro-batch", {"--micro_batch_size", "--mode"}), V{"--micro_batch_size"});
  // 3. Words that end the candidate.
  EXPECT_EQ(suggestions("--batch-size", {"--micro_batch_size", "--hidden_size"}), V{"--micro_batch_size"});
  // Nothing close: nothing.
  EXPECT_TRUE(suggestions("--zzzzzz", {"--hidden_size", "--micro_batch_size"}).empty());
  EXPECT_TRUE(suggestions("", {"a"}).empty());
  EXPECT_EQ(did_you_mean("qwen3", preset_names()), " (did you mean qwen3-30b-a3b or qwen3-235b-a22b?)");
  EXPECT_EQ(did_you_mean("H300", {"H100", "H200", "B300"}), " (did you mean H100, H200 or B300?)");
  EXPECT_EQ(did_you_mean("zzz", {"abcdef"}), "");
}

TEST(Suggest, PresetsModesPrecisionsAndGpus) {
  EXPECT_NE(usage_error([] { find_preset("llama3-70b"); }).find("unknown model preset 'llama3-70b' (did you mean llama-3-70b?)"),
            std::string::npos);
  EXPECT_NE(usage_error([] { find_preset("mixtral"); }).find("unknown model preset 'mixtral' (did you mean mixtral-8x7b?)"),
            std::string::npos);
  EXPECT_NE(usage_error([] { mode_from_string("trainig"); }).find("(did you mean training?)"), std::string::npos);
  EXPECT_NE(usage_error([] { precision_from_string("FP8Curent"); }).find("(did you mean FP8Current?)"), std::string::npos);
  const GpuDb db = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  EXPECT_NE(usage_error([&] { db.find("B3000"); }).find("unknown GPU 'B3000' (did you mean B300"), std::string::npos);
}

TEST(Suggest, CommandLine) {
  const auto dir = test::scratch_dir("suggest");
  test::Out o = test::run_gemmscope("--model llama3-70b --dry-run", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("unknown model preset 'llama3-70b' (did you mean llama-3-70b?)"), std::string::npos) << o.err;
  o = test::run_gemmscope("--model mixtral --dry-run", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("(did you mean mixtral-8x7b?)"), std::string::npos) << o.err;
  o = test::run_gemmscope("rport r.json", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err,
            "gemmscope: unknown subcommand 'rport' (did you mean report?) (subcommands: plot, compare, report, predict, layouts)\n");
  o = test::run_gemmscope("--dry-run --micro-batch 2", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err, "gemmscope: unknown option --micro-batch (did you mean --micro_batch_size?)\n");
  o = test::run_gemmscope("--dry-run --seq-len 2048", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err, "gemmscope: unknown option --seq-len (did you mean --sequence_length?)\n");
  o = test::run_gemmscope("--dry-run --mode trainin", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("got 'trainin' (did you mean training?)"), std::string::npos) << o.err;
  o = test::run_gemmscope("--dry-run --precisions BF16,FP8Curent", dir);
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("(did you mean FP8Current?)"), std::string::npos) << o.err;
  // Every enum value of the command line, through the same rule.
  for (const auto& [args, hint] : std::vector<std::pair<std::string, std::string>>{
           {"--l2 cld", "(did you mean cold?)"},
           {"--lm-head-precision bf61", "(did you mean bf16?)"},
           {"--grouped-quant fusd", "(did you mean fused?)"},
           {"--wgrad-output fp32-acumulate", "(did you mean fp32-accumulate?)"},
           {"--fp8-format hybird", "(did you mean hybrid?)"},
           {"--fp8-accum splt", "(did you mean split?)"},
           {"--block-fp8-format e4m2", "(did you mean e4m3?)"},
           {"--fp8-block-scales pow3", "(did you mean pow2?)"},
           {"--provider cutlas", "(did you mean cutlass?)"},
           {"--algo autotun", "(did you mean autotune?)"},
           {"--step-context eagr", "(did you mean eager?)"},
           {"--model deepseek-v3 --routing balnced", "(did you mean balanced?)"}}) {
    o = test::run_gemmscope("--dry-run " + args, dir);
    EXPECT_EQ(o.rc, 2) << args;
    EXPECT_NE(o.err.find(hint), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
  // A stray word that is no subcommand's misspelling stays an unexpected argument.
  o = test::run_gemmscope("--dry-run stray", dir);
  EXPECT_EQ(o.err, "gemmscope: unexpected argument 'stray'\n");
  std::filesystem::remove_all(dir);
}

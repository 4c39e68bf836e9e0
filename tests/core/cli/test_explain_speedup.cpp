// bench/explain_speedup.py over the committed DeepSeek-V3 results: it prints what
// docs/results/h100_deepseek-v3_explained.txt holds, takes the full-model times from the file's
// "totals" (gemmscope's), and sums the cells itself only for a file without them, saying so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "core/io/input_file.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kResults = std::string(GS_SOURCE_DIR) + "/docs/results/";
const std::string kScript = std::string(GS_SOURCE_DIR) + "/bench/explain_speedup.py";

gs::test::Out explain(const fs::path& result, const fs::path& dir) {
  return gs::test::run_shell("python3 " + kScript + " " + result.string() + " --wgrad-bf16 " + kResults +
                                 "h100_deepseek-v3_wgrad_bf16.json --copy-gbps 3011",
                             dir);
}

fs::path write(const fs::path& p, const json& j) {
  std::ofstream(p) << j.dump();
  return p;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(ExplainSpeedup, ReadsTheTotalsAndSumsOnlyWithoutThem) {
  const fs::path dir = gs::test::scratch_dir("explain_speedup");
  if (gs::test::run_shell("python3 -c pass", dir).rc != 0) GTEST_SKIP() << "no python3";
  const std::string both = kResults + "h100_deepseek-v3_both.json";
  const json doc = gs::read_json_file(both, both);
  ASSERT_EQ(doc["totals"]["scope"], "full_model");

  // The committed file: the committed explanation, word for word.
  const gs::test::Out as_is = explain(both, dir);
  ASSERT_EQ(as_is.rc, 0) << as_is.err;
  EXPECT_EQ(as_is.out, gs::test::slurp(kResults + "h100_deepseek-v3_explained.txt"));
  EXPECT_FALSE(has(as_is.out, "note:"));

  // Without "totals": the same figures, summed from the cells, and a note that says so.
  json old = doc;
  old.erase("totals");
  const gs::test::Out summed = explain(write(dir / "old.json", old), dir);
  ASSERT_EQ(summed.rc, 0) << summed.err;
  EXPECT_TRUE(has(summed.out, "has no \"totals\"")) << summed.out;
  std::string without_note = summed.out;
  const size_t note = without_note.find("note:");
  ASSERT_NE(note, std::string::npos);
  without_note.erase(note, without_note.find('\n', note) + 1 - note);
  EXPECT_EQ(without_note, as_is.out);

  // The totals are what it prints: one changed, its figures change with it (the cells stay).
  json moved = doc;
  moved["totals"]["pre-quantized"]["FP8Current"]["ms"] = 500.0;
  const gs::test::Out from_totals = explain(write(dir / "moved.json", moved), dir);
  ASSERT_EQ(from_totals.rc, 0) << from_totals.err;
  EXPECT_TRUE(has(from_totals.out, "GEMM kernels alone (pre-quantized): 500.0 ms, 2.64x BF16")) << from_totals.out;
  EXPECT_TRUE(has(from_totals.out, "it adds 462.9 ms")) << from_totals.out;

  // A total that is n/a in the file is n/a in the explanation, with the file's reason.
  json na = doc;
  na["totals"]["training"]["FP8Block"]["ms"] = nullptr;
  na["totals"]["training"]["FP8Block"]["na"] = {{"gemms", 1}, {"summary", "fprop LM Head: refused"}};
  const gs::test::Out with_na = explain(write(dir / "na.json", na), dir);
  ASSERT_EQ(with_na.rc, 0) << with_na.err;
  EXPECT_TRUE(has(with_na.out, "FP8Block: total n/a (training: fprop LM Head: refused)")) << with_na.out;
  EXPECT_FALSE(has(with_na.out, "880.0 ms, 1.50x BF16")) << with_na.out;

  // BF16's total n/a leaves nothing to explain.
  json no_bf16 = doc;
  no_bf16["totals"]["training"]["BF16"]["ms"] = nullptr;
  const gs::test::Out refused = explain(write(dir / "no_bf16.json", no_bf16), dir);
  EXPECT_EQ(refused.rc, 2);
  EXPECT_TRUE(has(refused.err, "BF16's training total is n/a")) << refused.err;
}

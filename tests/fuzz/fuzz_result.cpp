// libFuzzer harness: bytes of a result JSON -> the input-file policy (parse_json_text) ->
// from_json -> every reader of a RunResult: the text report, the CSV, the JSON writer, and
// compare (against itself and against tests/data/compare_a.json), text and markdown.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/compare.hpp"
#include "core/input_file.hpp"
#include "core/report.hpp"
#include "fuzz_common.hpp"

namespace {

const gs::RunResult& reference() {
  static const gs::RunResult r =
      gs::comparable_result(gs::read_json_file(GS_FUZZ_DATA_DIR "/compare_a.json", "result file"), "A");
  return r;
}

void compare_both_ways(const gs::RunResult& a, const gs::RunResult& b) {
  gs::fuzz::expect_documented_outcome([&] {
    const gs::CompareResult c = gs::compare_results(a, b, {});
    (void)gs::format_compare_text(c);
    (void)gs::format_compare_markdown(c);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<gs::RunResult> r;
  gs::fuzz::expect_documented_outcome([&] {
    const nlohmann::json doc = gs::parse_json_text(text, "fuzz.json");
    r = gs::from_json(doc, "fuzz.json");
  });
  if (!r) return 0;
  gs::fuzz::expect_documented_outcome([&] {
    (void)(r->dry_run ? gs::render_plan_text(*r) : gs::render_text(*r));
    (void)gs::render_csv(*r);
    // What the writer writes, the reader reads back.
    (void)gs::from_json(gs::to_json(*r), "round trip");
  });
  compare_both_ways(*r, *r);
  compare_both_ways(reference(), *r);
  return 0;
}

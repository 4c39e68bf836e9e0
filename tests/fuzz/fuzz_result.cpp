// libFuzzer harness: bytes of a result JSON (any schema: 3 with its records, items and ranks, or
// 1 and 2 with the cells inside each GEMM; seeds in tests/data and tests/fuzz/corpus/result) -> the
// input-file policy (parse_json_text) -> from_json -> every reader of a RunResult: the text report
// (with the MoE routing part), the CSV, the JSON writer, compare (against itself, a dense result and
// a MoE result, tests/data/compare_a.json and moe_mixtral_a.json, text and markdown) and predict
// (from the run, H100 to B200 with data/gpus.json, text and JSON), as `report`, `compare` and
// `predict` do; a fleet document (ranks) also through the fleet's reader, summary and chart.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/io/input_file.hpp"
#include "core/analysis/predict.hpp"
#include "core/node/fleet.hpp"
#include "core/report/report.hpp"
#include "fuzz_common.hpp"

namespace {

const gs::RunResult& reference(const char* name) {
  static const gs::RunResult dense =
      gs::comparable_result(gs::read_json_file(GS_FUZZ_DATA_DIR "/compare_a.json", "result file"), "A");
  static const gs::RunResult moe =
      gs::comparable_result(gs::read_json_file(GS_FUZZ_DATA_DIR "/moe_mixtral_a.json", "result file"), "M");
  return std::string(name) == "moe" ? moe : dense;
}

const gs::GpuDb& gpu_db() {
  static const gs::GpuDb db = gs::read_gpu_db_file(GS_FUZZ_SOURCE_DIR "/data/gpus.json");
  return db;
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
    if (gs::is_fleet_json(doc)) {  // as `report`, `compare` and `plot` read a fleet file
      gs::fuzz::expect_documented_outcome([&] {
        const std::vector<gs::FleetRun> runs = gs::fleet_from_json(doc, "fuzz.json");
        const gs::FleetSummary s = gs::summarize_fleet(runs, gs::fleet_threshold(doc));
        (void)gs::render_fleet_text(s);
        (void)gs::fleet_chart_json(s).dump();
        (void)gs::fleet_to_json(runs, s).dump();
      });
    }
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
  compare_both_ways(reference("dense"), *r);
  compare_both_ways(reference("moe"), *r);
  gs::fuzz::expect_documented_outcome([&] {
    const gs::Prediction p = gs::predict_from_run(*r, "fuzz.json", gpu_db().find("H100"), gpu_db().find("B200"));
    (void)gs::render_prediction_text(p);
    (void)gs::prediction_json(p).dump();
  });
  return 0;
}

// libFuzzer harness: bytes of a GPU spec database (data/gpus.json, GEMMSCOPE_GPU_SPECS) ->
// the input-file policy -> parse_gpu_db -> every entry found by key and by device name, what it
// cannot run, and a datasheet-only prediction of a small model and of a few shapes on it (text
// and JSON).
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>

#include "core/gpu/gpu_spec.hpp"
#include "core/io/input_file.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/analysis/predict.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gs::fuzz::expect_documented_outcome([&] {
    const gs::GpuDb db = gs::parse_gpu_db(gs::parse_json_text(text, "gpus.json"), "gpus.json");
    (void)db.known_keys();
    static const gs::Plan model = gs::build_model_plan(gs::find_preset("mixtral-8x7b").config);
    static const gs::Plan shapes = gs::build_shapes_plan("64x128x256,4096");
    size_t n = 0;
    for (const gs::GpuSpec& s : db.gpus) {
      if (++n > 4) break;  // the first few: each prediction is the bulk of the time
      (void)db.find(s.key);
      (void)db.match_device(s.name);
      for (gs::Precision p : gs::kAllPrecisions) (void)gs::cannot_run(s, p);
      for (const gs::Plan* plan : {&model, &shapes}) {
        const gs::Prediction pr =
            gs::predict_datasheet_only(*plan, {gs::Mode::Training}, gs::RecipeOptions{}, s);
        (void)gs::render_prediction_text(pr);
        (void)gs::prediction_json(pr).dump();
        // Never an "ok" cell without a finite, positive time (a spec of 5e-324 TFLOP/s gave inf).
        pr.result.for_each_cell([](size_t, size_t, size_t, size_t, const gs::Cell& c) {
          if (c.ok && !(std::isfinite(c.stats.mean_ms) && c.stats.mean_ms > 0)) {
            std::fprintf(stderr, "fuzz_gpus: an ok cell with time %g\n", c.stats.mean_ms);
            std::abort();
          }
        });
      }
    }
  });
  return 0;
}

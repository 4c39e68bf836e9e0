// libFuzzer harness: bytes of a Hugging Face config.json -> ModelConfig -> validated -> GEMM
// plan -> the plan report and result JSON (what `gemmscope --config X --dry-run` does).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gs::fuzz::expect_documented_outcome([&] {
    gs::ModelConfig c = gs::parse_hf_config(text, "config.json");
    gs::validate(c);
    gs::RunRequest req;
    req.plan = gs::build_model_plan(c);
    req.precisions.assign(std::begin(gs::kAllPrecisions), std::end(gs::kAllPrecisions));
    req.modes = {gs::Mode::PerGemm};
    const gs::RunResult r = gs::plan_only(req);
    (void)gs::render_plan_text(r);
    (void)gs::to_json(r).dump();
  });
  return 0;
}

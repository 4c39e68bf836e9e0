// libFuzzer harness: bytes of a fleet file (gemmscope --all-gpus --json, or an MPI run) -> the
// input-file policy -> fleet_from_json -> summarize_fleet (at the file's threshold) -> the text
// summary, the fleet JSON and the chart document `gemmscope plot` hands the script (what `report`
// and `plot` do with such a file; each GPU's run is a result file, fuzz_result's surface). Every
// input must be done well within the harness's time limit: the summary is linear in the file.
// Seeds: scripts/fuzz.sh builds two-GPU fleet files from tests/data.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/node/fleet.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gs::fuzz::expect_documented_outcome([&] {
    const nlohmann::json j = gs::parse_json_text(text, "fleet.json");
    const std::vector<gs::FleetRun> runs = gs::fleet_from_json(j, "fleet.json");
    const double t = j.contains("threshold") && j["threshold"].is_number() ? j["threshold"].get<double>() : 0.03;
    const gs::FleetSummary s = gs::summarize_fleet(runs, t);
    (void)gs::render_fleet_text(s);
    (void)gs::json_text(gs::fleet_chart_json(s));
    (void)gs::json_text(gs::fleet_to_json(runs, s));
  });
  return 0;
}

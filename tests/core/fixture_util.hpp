// Test fixtures kept to what the code writes now (tests/data/moe_mixtral_ep2_synthetic.json, the
// result reader's fuzz seed with a whole step).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace gs::test {

// A committed JSON fixture against what the code writes now, the tool version apart (it changes
// with every release): a difference or a missing file fails the calling test. GS_WRITE_FIXTURES=1
// rewrites the file instead and returns Written, for the test to skip with "wrote PATH".
enum class Fixture { Checked, Written };
inline Fixture check_fixture(const std::string& path, nlohmann::json now) {
  if (const char* w = std::getenv("GS_WRITE_FIXTURES"); w && std::string(w) == "1") {
    std::ofstream(path) << now.dump(1) << "\n";
    return Fixture::Written;
  }
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << path << " is missing: GS_WRITE_FIXTURES=1 writes it";
    return Fixture::Checked;
  }
  nlohmann::json committed = nlohmann::json::parse(in);
  if (!committed.is_object()) {
    ADD_FAILURE() << path << " is not a JSON object";
    return Fixture::Checked;
  }
  committed.erase("tool");
  now.erase("tool");
  if (committed == now) return Fixture::Checked;
  // The differences, not two dumps of the whole file: the first few JSON-patch operations.
  const nlohmann::json patch = nlohmann::json::diff(committed, now);
  std::string shown;
  for (std::size_t i = 0; i < patch.size() && i < 8; ++i) shown += "\n  " + patch[i].dump().substr(0, 240);
  if (patch.size() > 8) shown += "\n  ... " + std::to_string(patch.size() - 8) + " more";
  ADD_FAILURE() << path << " is not what the code writes now (" << patch.size()
                << " difference(s), committed -> now):" << shown << "\nregenerate it with GS_WRITE_FIXTURES=1";
  return Fixture::Checked;
}

}  // namespace gs::test

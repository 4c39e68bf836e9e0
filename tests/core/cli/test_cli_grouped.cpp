// --grouped (how grouped MoE expert GEMMs are measured): accepted values and one-line refusals.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

using gs::test::Out;
using gs::test::slurp;

Out run(const std::string& args) {
  static const fs::path d = gs::test::scratch_dir("cli_grouped");
  return gs::test::run_gemmscope(args, d);
}

}  // namespace

TEST(CliGrouped, AcceptsSerialAndStreams) {
  for (const char* v : {"serial", "streams:1", "streams:4", "streams:64", "Serial", "STREAMS:8"}) {  // any case
    SCOPED_TRACE(v);
    const Out r = run(std::string("--dry-run --shapes 64 --grouped ") + v);
    EXPECT_EQ(r.rc, 0) << r.err;
  }
  const Out help = run("--help");
  EXPECT_NE(help.out.find("--grouped"), std::string::npos);
}

TEST(CliGrouped, RefusesOtherValuesOnOneLine) {
  for (const char* v : {"streams:0", "streams:65", "streams:", "streams:-1", "streams:4x", "streams:99999999999999",
                        "parallel", "Serial2", "4", "cutlass2"}) {
    SCOPED_TRACE(v);
    const Out r = run(std::string("--dry-run --shapes 64 --grouped '") + v + "'");
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("--grouped must be serial, streams:N with N in 1..64, or cutlass"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

// --grouped cutlass is --provider cutlass (the CUTLASS single launch for the experts): the run's
// provider list, as the results JSON records it.
TEST(CliGrouped, CutlassSelectsTheCutlassProvider) {
  static const fs::path d = gs::test::scratch_dir("cli_grouped");
  auto providers = [&](const std::string& flags) {
    const fs::path json = d / "grouped_cutlass.json";
    fs::remove(json);
    const Out r = run("--dry-run --shapes 64 " + flags + " --json " + json.string());
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.err;
    const std::string text = slurp(json.string());
    const auto at = text.find("\"providers\"");
    return at == std::string::npos ? std::string() : text.substr(at, text.find(']', at) - at + 1);
  };
  auto compact = [](std::string s) {
    s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n'; }), s.end());
    return s;
  };
  EXPECT_EQ(compact(providers("--grouped cutlass")), "\"providers\":[\"cutlass\"]");
  EXPECT_EQ(compact(providers("--grouped CUTLASS --provider cublaslt")), "\"providers\":[\"cutlass\"]");
  EXPECT_EQ(compact(providers("--grouped cutlass --provider all")), "\"providers\":[\"cublaslt\",\"cutlass\",\"deepgemm\"]");
  EXPECT_EQ(compact(providers("--grouped streams:4")), "\"providers\":[\"cublaslt\"]");
  const Out help = run("--help");
  EXPECT_NE(help.out.find("cutlass, every expert in one CUTLASS launch"), std::string::npos);
}

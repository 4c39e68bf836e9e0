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
                        "parallel", "Serial2", "4"}) {
    SCOPED_TRACE(v);
    const Out r = run(std::string("--dry-run --shapes 64 --grouped '") + v + "'");
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("--grouped must be serial or streams:N with N in 1..64"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

// Output path checks: the chart-file rule shared by `gemmscope -o` and `gemmscope plot -o`, the
// writability probe and same-file detection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/util/error.hpp"
#include "core/io/output_paths.hpp"

namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("gs_paths_test_" + std::to_string(::getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("gs_paths_test_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

std::string error_of(const std::string& path) {
  try {
    gs::check_output_path(path, "--json");
  } catch (const gs::UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(OutputPaths, ChartExtensionRule) {
  for (const char* ok : {"chart.png", "chart.svg", "chart.pdf", "CHART.PNG", "c.Svg", "dir/x.PdF", "/tmp/a.b.png",
                         "..x.png", "x..png", "./chart.png"})
    EXPECT_EQ(gs::chart_path_problem(ok), "") << ok;
  for (const char* bad : {"chart.bmp", "chart", "chart.png.json", "chartpng", "chart.jpeg"})
    EXPECT_EQ(gs::chart_path_problem(bad), "the chart file must end in .png, .svg or .pdf") << bad;
  for (const char* no_stem : {".png", "dir/.PNG", "..png", "/tmp/.svg"})
    EXPECT_NE(gs::chart_path_problem(no_stem).find("needs a name before its extension"), std::string::npos) << no_stem;
  EXPECT_NE(gs::chart_path_problem("charts/").find("ends in '/'"), std::string::npos);
  EXPECT_THROW(gs::check_chart_path(".png", "-o"), gs::UsageError);
  EXPECT_NO_THROW(gs::check_chart_path("x.png", "-o"));
}

TEST(OutputPaths, WritableCheckProbesTheDirectory) {
  const fs::path d = scratch();
  EXPECT_EQ(error_of((d / "r.json").string()), "(accepted)");
  std::ofstream(d / "existing.json") << "{}";
  EXPECT_EQ(error_of((d / "existing.json").string()), "(accepted)");  // replaced when written
  EXPECT_NE(error_of(d.string()).find(": is a directory"), std::string::npos);
  EXPECT_NE(error_of(d.string() + "/").find("ends in '/'"), std::string::npos);
  EXPECT_NE(error_of((d / "no_such_dir" / "r.json").string()).find("cannot create files in"), std::string::npos);
  // root passes access(W_OK) on /proc; creating a file there fails for everyone
  EXPECT_NE(error_of("/proc/x.json").find("--json /proc/x.json: cannot create files in '/proc'"), std::string::npos)
      << error_of("/proc/x.json");
  EXPECT_NE(error_of("/dev/null").find("is not a regular file"), std::string::npos);
  // the probe leaves nothing behind
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".gemmscope-probe"), std::string::npos) << e.path();
}

TEST(OutputPaths, SameFile) {
  const fs::path d = scratch();
  EXPECT_TRUE(gs::same_output_path((d / "x.json").string(), (d / "x.json").string()));
  EXPECT_TRUE(gs::same_output_path((d / "x.json").string(), (d / "." / "x.json").string()));
  EXPECT_TRUE(gs::same_output_path((d / "x.json").string(), (d / "sub" / ".." / "x.json").string()));
  EXPECT_FALSE(gs::same_output_path((d / "x.json").string(), (d / "y.json").string()));
  EXPECT_FALSE(gs::same_output_path((d / "x.json").string(), ""));
  fs::create_directories(d / "real");
  std::error_code ec;
  fs::create_directory_symlink(d / "real", d / "link", ec);
  if (!ec) EXPECT_TRUE(gs::same_output_path((d / "real" / "x.csv").string(), (d / "link" / "x.csv").string()));
}

}  // namespace

// Setup as a newcomer meets it: the default CUDA build targets the build machine's GPU
// (cmake/gpu_arch.cmake), ctest lists why tests were skipped (cmake/print_skips.cmake), and the
// README says how long the default build takes and how to build for one architecture or without
// CUDA. The CMake scripts run in script mode (cmake -P) against a fake nvidia-smi and a fake log.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

}  // namespace

TEST(Setup, DefaultCudaBuildTargetsThisMachinesGpu) {
  const fs::path dir = gs::test::scratch_dir("setup_arch");
  // Which cmake: the one on the test's PATH (the fake PATH below would hide it).
  const gs::test::Out which = gs::test::run_shell("command -v cmake", dir);
  if (which.rc != 0) GTEST_SKIP() << "no cmake on PATH to run cmake/gpu_arch.cmake";
  std::string cmake = which.out;
  while (!cmake.empty() && (cmake.back() == '\n' || cmake.back() == '\r')) cmake.pop_back();
  auto run = [&](const std::string& smi) {
    const fs::path bin = dir / "bin";
    fs::remove_all(bin);
    fs::create_directories(bin);
    if (!smi.empty()) {
      write(bin / "nvidia-smi", "#!/bin/sh\n" + smi + "\n");
      fs::permissions(bin / "nvidia-smi", fs::perms::owner_all);
    }
    write(dir / "detect.cmake", "include(\"" + std::string(GS_SOURCE_DIR) +
                                    "/cmake/gpu_arch.cmake\")\ngs_detect_gpu_archs(a)\nmessage(\"archs=[${a}]\")\n");
    const gs::test::Out o = gs::test::run_shell("PATH=" + bin.string() + " " + cmake + " -P " + (dir / "detect.cmake").string(), dir);
    return o.out + o.err;
  };
  // One H100 (9.0), twice: one architecture.
  EXPECT_TRUE(has(run("echo 9.0; echo 9.0"), "archs=[90-real]")) << run("echo 9.0; echo 9.0");
  // Mixed GPUs: each architecture once.
  EXPECT_TRUE(has(run("echo 8.9; echo 10.0"), "archs=[89-real;100-real]")) << run("echo 8.9; echo 10.0");
  // No GPU (nvidia-smi fails) or no nvidia-smi: empty, so CMakeLists.txt falls back to the portable list.
  EXPECT_TRUE(has(run("echo 'NVIDIA-SMI has failed' >&2; exit 9"), "archs=[]"));
  EXPECT_TRUE(has(run(""), "archs=[]"));
}

TEST(Setup, CtestListsWhyTestsWereSkipped) {
  const fs::path dir = gs::test::scratch_dir("setup_skips");
  fs::create_directories(dir / "Testing" / "Temporary");
  // GoogleTest's skip lines as ctest logs them: two tests skipped for one reason, one for another.
  write(dir / "Testing" / "Temporary" / "LastTest.log.tmp",
        "[ RUN      ] Gpu.A\n/src/t.cpp:10: Skipped\nno CUDA device visible: no GPU\n[  SKIPPED ] Gpu.A (0 ms)\n"
        "[ RUN      ] Gpu.B\n/src/t.cpp:20: Skipped\nno CUDA device visible: no GPU\n[  SKIPPED ] Gpu.B (0 ms)\n"
        "[ RUN      ] Plot.C\n/src/p.cpp:5: Skipped\nmatplotlib not installed; [charts] skipped\n");
  const gs::test::Out o = gs::test::run_shell("cd " + dir.string() + " && cmake -P " + std::string(GS_SOURCE_DIR) +
                                                  "/cmake/print_skips.cmake",
                                              dir);
  if (o.rc == 127) GTEST_SKIP() << "no cmake on PATH to run cmake/print_skips.cmake";
  const std::string text = o.out + o.err;
  EXPECT_TRUE(has(text, "Skipped tests (3), by reason:")) << text;
  EXPECT_TRUE(has(text, "2 x no CUDA device visible: no GPU")) << text;
  EXPECT_TRUE(has(text, "1 x matplotlib not installed, (charts) skipped")) << text;
  // No skip: silent.
  write(dir / "Testing" / "Temporary" / "LastTest.log.tmp", "[ RUN      ] A.B\n[       OK ] A.B\n");
  const gs::test::Out quiet = gs::test::run_shell(
      "cd " + dir.string() + " && cmake -P " + std::string(GS_SOURCE_DIR) + "/cmake/print_skips.cmake", dir);
  EXPECT_FALSE(has(quiet.out + quiet.err, "Skipped tests")) << quiet.out << quiet.err;
}

TEST(Setup, ReadmeSaysHowLongTheBuildTakesAndTheFasterWays) {
  const std::string readme = gs::test::slurp(fs::path(GS_SOURCE_DIR) / "README.md");
  EXPECT_TRUE(has(readme, "about 22 minutes on 2 cores")) << "the default build's time";
  EXPECT_TRUE(has(readme, "CUDA_ARCHS=90-real scripts/setup.sh")) << "one architecture";
  EXPECT_TRUE(has(readme, "GEMMSCOPE_CUDA=OFF scripts/setup.sh")) << "without CUDA";
  EXPECT_TRUE(has(readme, "ctest lists why tests were skipped")) << "skip reasons";
}

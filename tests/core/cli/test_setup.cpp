// Setup as a newcomer meets it: the default CUDA build targets the build machine's GPU
// (cmake/gpu_arch.cmake), ctest lists why tests were skipped (cmake/print_skips.cmake), and the
// README says how long the default build takes and how to build for one architecture or without
// CUDA. The CMake scripts run in script mode (cmake -P) against a fake nvidia-smi and a fake log.
#include <gtest/gtest.h>

#include <chrono>
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

// scripts/setup.sh on a fresh offline machine, without building: a scratch checkout beside a
// scratch ../shared, a fake HOME, and fakes of cmake (records its arguments), git (records, and
// fails or hangs like an unreachable network), nvcc (reports a version) and dpkg (everything
// installed, so apt is never reached).
namespace {

struct SetupSandbox {
  fs::path root, repo, shared, home, bin;
  explicit SetupSandbox(const std::string& tag) {
    root = gs::test::scratch_dir(tag);
    fs::remove_all(root);
    repo = root / "repo";
    shared = root / "shared" / "third_party";
    home = root / "home";
    bin = root / "bin";
    for (const fs::path& d : {repo / "scripts", shared, home, bin}) fs::create_directories(d);
    fs::copy_file(fs::path(GS_SOURCE_DIR) / "scripts" / "setup.sh", repo / "scripts" / "setup.sh");
    fake("cmake", "if [ \"$1\" = --version ]; then echo \"cmake version ${FAKE_CMAKE_VERSION:-3.28.1}\"; exit 0; fi\n"
                  "echo \"$@\" >> " + (root / "cmake.log").string());
    fake("git", "echo \"$@\" >> " + (root / "git.log").string() + "\n[ -n \"$FAKE_GIT_HANG\" ] && sleep 30\nexit 128");
    fake("nvcc", "echo \"Cuda compilation tools, release ${FAKE_CUDA:-13.0}, V${FAKE_CUDA:-13.0}.48\"");
    fake("dpkg", "exit 0");
  }
  void fake(const std::string& name, const std::string& body) {
    write(bin / name, "#!/bin/sh\n" + body + "\n");
    fs::permissions(bin / name, fs::perms::owner_all);
  }
  // setup.sh with `env` and `args`; PATH starts with the fakes.
  gs::test::Out run(const std::string& env, const std::string& args = "--no-deps") const {
    return gs::test::run_shell("env -i PATH=" + bin.string() + ":/usr/bin:/bin HOME=" + home.string() +
                                   " CUDACXX=" + (bin / "nvcc").string() + " " + env + " bash " +
                                   (repo / "scripts" / "setup.sh").string() + " " + args,
                               root);
  }
  std::string cmake_log() const { return gs::test::slurp(root / "cmake.log"); }
  bool git_called() const { return fs::exists(root / "git.log"); }
  std::string git_log() const { return gs::test::slurp(root / "git.log"); }
};

size_t files_under(const fs::path& p) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p)) n += e.is_regular_file();
  return n;
}

}  // namespace

TEST(Setup, NoDepsNeverTouchesTheNetworkAndFindsSharedSources) {
  SetupSandbox s("setup_offline");
  const fs::path fe = s.shared / "cudnn-frontend-1.23.0";
  fs::create_directories(fe / "include");
  write(fe / "include" / "cudnn_frontend.h", "// fake\n");
  const size_t shared_files = files_under(s.root / "shared");
  const gs::test::Out o = s.run("");
  EXPECT_EQ(o.rc, 0) << o.out << o.err;
  EXPECT_FALSE(s.git_called()) << s.git_log();
  EXPECT_TRUE(has(s.cmake_log(), "-DGEMMSCOPE_CUDNN_FRONTEND_DIR=" + fs::canonical(fe).string())) << s.cmake_log();
  EXPECT_TRUE(has(s.cmake_log(), "-DGEMMSCOPE_CUTLASS_DIR= ")) << s.cmake_log();
  EXPECT_TRUE(has(o.out, "no CUTLASS: building without the CUTLASS provider")) << o.out;
  EXPECT_TRUE(has(s.cmake_log(), "--build")) << s.cmake_log();
  EXPECT_EQ(files_under(s.root / "shared"), shared_files) << "nothing written into ../shared";
  EXPECT_EQ(files_under(s.home), 0u) << "nothing fetched";
  // Without the frontend anywhere: built without cuDNN attention, said, still no fetch.
  fs::remove_all(fe);
  fs::remove(s.root / "cmake.log");
  const gs::test::Out none = s.run("");
  EXPECT_EQ(none.rc, 0) << none.err;
  EXPECT_FALSE(s.git_called());
  EXPECT_TRUE(has(none.out, "--no-deps fetches nothing")) << none.out;
  EXPECT_FALSE(has(s.cmake_log(), "GEMMSCOPE_CUDNN_FRONTEND_DIR")) << s.cmake_log();
}

// Without --no-deps, an offline fetch goes into the cache (never ../shared) and is cut off by its
// time limit; the build goes on without what it could not fetch, and says so.
TEST(Setup, FetchesGoToTheCacheWithATimeout) {
  SetupSandbox s("setup_fetch");
  const auto t0 = std::chrono::steady_clock::now();
  const gs::test::Out o = s.run("GEMMSCOPE_FETCH_TIMEOUT=2 FAKE_GIT_HANG=1", "");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.rc, 0) << o.out << o.err;
  EXPECT_LT(seconds, 25) << "each fetch must stop at GEMMSCOPE_FETCH_TIMEOUT";
  const std::string git = s.git_log();
  EXPECT_TRUE(has(git, "clone -q --depth 1 --branch v1.23.0 https://github.com/NVIDIA/cudnn-frontend " +
                           (s.home / ".cache/gemmscope-deps/cudnn-frontend-v1.23.0.tmp").string()))
      << git;
  EXPECT_TRUE(has(git, "--branch v4.2.1 https://github.com/NVIDIA/cutlass")) << git;
  EXPECT_FALSE(has(git, "shared")) << git;
  EXPECT_TRUE(has(o.out, "the fetch failed")) << o.out;
  EXPECT_FALSE(fs::exists(s.home / ".cache/gemmscope-deps/cudnn-frontend-v1.23.0.tmp"));
}

// Old tools are refused with what to do: CMake 3.22 (Ubuntu 22.04) under --no-deps, CUDA 12.
TEST(Setup, OldCmakeAndOldCudaAreRefusedClearly) {
  SetupSandbox s("setup_versions");
  gs::test::Out o = s.run("FAKE_CMAKE_VERSION=3.22.1");
  EXPECT_EQ(o.rc, 1);
  EXPECT_TRUE(has(o.err, "CMake >= 3.25 is needed, found 3.22.1")) << o.err;
  EXPECT_FALSE(fs::exists(s.root / "cmake.log")) << "no configure with an old CMake";
  o = s.run("FAKE_CUDA=12.4");
  EXPECT_EQ(o.rc, 1);
  EXPECT_TRUE(has(o.err, "needs the CUDA 13 toolkit")) << o.err;
  EXPECT_TRUE(has(o.err, "found CUDA 12.4")) << o.err;
  EXPECT_TRUE(has(o.err, "GEMMSCOPE_CUDA=OFF")) << o.err;
  o = s.run("FAKE_CUDA=12.4 GEMMSCOPE_CUDA=OFF");
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(has(s.cmake_log(), "-DGEMMSCOPE_CUDA=OFF")) << s.cmake_log();
}

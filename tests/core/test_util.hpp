// Helpers shared by the CPU tests: reading a file whole, a per-process scratch folder, running the
// gemmscope binary (or any shell command) without a GPU, and a base for the fake engines that
// stand in for the CUDA backend.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "core/run/engine.hpp"

namespace gs::test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// <temp>/gs_<tag>_<pid>, created on first use.
inline fs::path scratch_dir(const std::string& tag) {
  fs::path p = fs::temp_directory_path() / ("gs_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

struct Out {
  int rc;
  std::string out, err;
};

// `cmd` (a shell command line the test controls) with no GPU visible; its stdout and stderr go
// through files in `dir`. rc is the exit status, -1 when it did not exit normally.
inline Out run_shell(const std::string& cmd, const fs::path& dir) {
  const fs::path o = dir / "stdout", e = dir / "stderr";
  const std::string full = "CUDA_VISIBLE_DEVICES= " + cmd + " >" + o.string() + " 2>" + e.string();
  const int st = std::system(full.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
}

#ifdef GS_BINARY
// The gemmscope binary with `args` (shell-quoted by the test), no GPU: the tests use --dry-run or
// inputs refused before any device is touched.
inline Out run_gemmscope(const std::string& args, const fs::path& dir) {
  return run_shell(std::string(GS_BINARY) + " " + args, dir);
}
#endif

// A Hopper-class device that warms up instantly and measures no accuracy; subclasses supply
// measure() and override the rest where a test needs it.
class FakeEngineBase : public Engine {
 public:
  explicit FakeEngineBase(std::string name = "Fake GPU", int sm_count = 0) : name_(std::move(name)), sms_(sm_count) {}
  DeviceInfo device_info() const override {
    DeviceInfo d;
    d.name = name_;
    d.cc_major = 9;
    d.cc_minor = 0;
    d.sm_count = sms_;
    return d;
  }
  void gpu_warmup(double) override {}
  AccuracyCell accuracy(const Gemm&, Precision, Dist) override { return AccuracyCell::na("fake engine"); }

 private:
  std::string name_;
  int sms_;
};

}  // namespace gs::test

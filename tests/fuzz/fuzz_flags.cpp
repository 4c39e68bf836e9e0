// libFuzzer harness: the command line. The input is split at newlines into arguments and given
// to the gemmscope front end (src/cli/main.cpp, compiled in with its main() renamed): flags,
// --shapes/--sweep-sizes/--precisions lists, presets, model sizes, `compare` and its
// --threshold. The documented exit statuses are 0 (the plan, in this CPU-only build), 1
// (compare: regressions) and 2 (bad input); 70 (internal error) or anything else is a finding.
//
// The harness runs in a fresh scratch directory and refuses arguments containing '/', so a
// fuzzed --json/--csv/-o/--config/compare path can only name files there; `plot` (which starts
// Python) is not fuzzed here.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_util.hpp"
#include "core/error.hpp"
#include "core/model_config.hpp"
#include "core/output_paths.hpp"
#include "core/plan.hpp"
#include "core/report.hpp"
#include "core/runner.hpp"
#include "core/text_util.hpp"

// main.cpp's own text only: its headers are included above (include guards keep them out now).
#define main gemmscope_cli_main
#include "cli/main.cpp"
#undef main

namespace {

std::filesystem::path& scratch_dir() {
  static std::filesystem::path d;
  return d;
}

// Empties the scratch directory: what one input wrote (--json, --csv) is not there for the next.
void clear_scratch() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir(), ec)) std::filesystem::remove_all(e.path(), ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/gemmscope-fuzz-flags-XXXXXX";
  if (!::mkdtemp(tmpl) || ::chdir(tmpl) != 0) {
    std::perror("fuzz_flags: scratch directory");
    std::abort();
  }
  scratch_dir() = tmpl;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  });
  // The reports are not looked at; printing them would only slow the fuzzer.
  if (!std::freopen("/dev/null", "w", stdout)) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  std::vector<std::string> args = {"gemmscope"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    const char ch = static_cast<char>(data[i]);
    if (ch == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (size) args.push_back(cur);
  if (args.size() > 64) return -1;
  for (const std::string& a : args)
    if (a.find('/') != std::string::npos || a.find('\0') != std::string::npos) return -1;
  if (args.size() > 1 && args[1] == "plot") return -1;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.clear();
  const int rc = gemmscope_cli_main(static_cast<int>(args.size()), argv.data());
  clear_scratch();
  if (rc != 0 && rc != 1 && rc != 2) {
    std::fprintf(stderr, "fuzz_flags: exit status %d is not in the documented set {0, 1, 2}\n", rc);
    std::abort();
  }
  return 0;
}

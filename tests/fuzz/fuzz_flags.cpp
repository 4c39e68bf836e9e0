// libFuzzer harness: the command line. The input is split at newlines into arguments and given
// to the gemmscope front end (cli/cli.hpp's gemmscope_main, the library main.cpp calls): flags,
// --shapes/--sweep-sizes/--precisions lists, presets, model sizes, `compare` and its
// --threshold. The documented exit statuses are 0 (the plan, in this CPU-only build), 1
// (compare: regressions) and 2 (bad input); 70 (internal error) or anything else is a finding.
//
// The harness runs in a fresh scratch directory. Real input files are there under in/: copies of
// tests/fuzz/corpus/files (a config.json, a routing file) and of tests/data's dense and MoE
// results, so --config, --routing file:, compare, report and predict read real files. An argument
// may contain '/' only as "in/NAME" (or "file:in/NAME"), with no "..": fuzzed output paths stay
// in the scratch directory, and in/ is restored whenever a run changed it. `plot` (which starts
// Python) is not fuzzed here.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
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

#include "cli/cli.hpp"

namespace {

namespace fs = std::filesystem;

fs::path& scratch_dir() {
  static fs::path d;
  return d;
}

// The files copied into in/, and what in/ looks like after the copy (names, sizes, times).
const char* const kInputFiles[] = {GS_SOURCE_DIR "/tests/fuzz/corpus/files/llama.json",
                                   GS_SOURCE_DIR "/tests/fuzz/corpus/files/routing8.json",
                                   GS_SOURCE_DIR "/tests/data/compare_a.json",
                                   GS_SOURCE_DIR "/tests/data/compare_b.json",
                                   GS_SOURCE_DIR "/tests/data/moe_mixtral_a.json",
                                   GS_SOURCE_DIR "/tests/data/shapes_4.json",
                                   GS_SOURCE_DIR "/data/gpus.json"};

std::string in_listing() {
  std::string out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(scratch_dir() / "in", ec)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    out += e.path().filename().string() + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_nsec) +
           ":" + std::to_string(st.st_mode) + ";";
  }
  return out;
}

std::string& pristine_listing() {
  static std::string s;
  return s;
}

void copy_inputs() {
  std::error_code ec;
  fs::remove_all(scratch_dir() / "in", ec);
  fs::create_directory(scratch_dir() / "in");
  for (const char* f : kInputFiles)
    if (!fs::copy_file(f, scratch_dir() / "in" / fs::path(f).filename(), ec)) {
      std::fprintf(stderr, "fuzz_flags: cannot copy %s\n", f);
      std::abort();
    }
  pristine_listing() = in_listing();
}

// Empties the scratch directory but in/: what one input wrote (--json, --csv) is not there for
// the next; in/ is copied again when the run changed it (wrote into it, say).
void clear_scratch() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(scratch_dir(), ec))
    if (e.path().filename() != "in") fs::remove_all(e.path(), ec);
  if (in_listing() != pristine_listing()) copy_inputs();
}

// Whether an argument may name a path: only "in/NAME" or "file:in/NAME", without "..".
bool allowed_argument(const std::string& a) {
  if (a.find('\0') != std::string::npos) return false;
  if (a.find('/') == std::string::npos) return true;
  const std::string rest = a.rfind("file:", 0) == 0 ? a.substr(5) : a;
  return rest.rfind("in/", 0) == 0 && rest.find('/', 3) == std::string::npos && rest.find("..") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/gemmscope-fuzz-flags-XXXXXX";
  if (!::mkdtemp(tmpl) || ::chdir(tmpl) != 0) {
    std::perror("fuzz_flags: scratch directory");
    std::abort();
  }
  scratch_dir() = tmpl;
  copy_inputs();
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
    if (!allowed_argument(a)) return -1;
  if (args.size() > 1 && args[1] == "plot") return -1;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.clear();
  const int rc = gs::cli::gemmscope_main(static_cast<int>(args.size()), argv.data());
  clear_scratch();
  if (rc != 0 && rc != 1 && rc != 2) {
    std::fprintf(stderr, "fuzz_flags: exit status %d is not in the documented set {0, 1, 2}\n", rc);
    std::abort();
  }
  return 0;
}

// Shared by the libFuzzer harnesses (tests/fuzz, built with -DGEMMSCOPE_FUZZ=ON and clang).
// The documented outcomes of hostile input are: success, or a gs::UsageError (exit 2 with one
// line). Anything else -- another exception, a crash, a sanitizer report, a timeout -- is a
// finding: the harness aborts so libFuzzer records the input.
#pragma once
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "core/util/error.hpp"

namespace gs::fuzz {

template <class F>
void expect_documented_outcome(F&& body) {
  try {
    body();
  } catch (const gs::UsageError& e) {
    const std::string msg = e.what();
    // Messages quote a short prefix of a value at most (about 80 characters, paths 200): a message
    // over 1 KB is a finding.
    if (msg.size() > 1024) {
      std::fprintf(stderr, "fuzz: UsageError message of %zu bytes\n", msg.size());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: undocumented exception: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: undocumented non-standard exception\n");
    std::abort();
  }
}

// A scratch folder of this process, "/tmp/gemmscope-fuzz-<tag>-XXXXXX", created on first use and
// removed at exit (one per harness binary: `tag` must be the same on every call).
inline const std::filesystem::path& scratch_dir(const char* tag) {
  static const std::filesystem::path d = [tag] {
    std::string tmpl = std::string("/tmp/gemmscope-fuzz-") + tag + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return d;
}

}  // namespace gs::fuzz

// libFuzzer harness: output writing. The input is a file name (up to the first newline; no '/')
// and the bytes to write. check_output_path then write_file_atomic into a scratch directory:
// the file must then hold exactly the bytes, no temporary file may be left, and a refusal must
// be a UsageError. A symlink planted at the old fixed temporary name must never be followed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/io/output_paths.hpp"
#include "fuzz_common.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& scratch() { return gs::fuzz::scratch_dir("output"); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string name = in.substr(0, nl), text = nl == std::string::npos ? "" : in.substr(nl + 1);
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos || name == "." || name == "..")
    return -1;
  const fs::path d = scratch();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) fs::remove_all(e.path(), ec);
  const std::string victim = (d / "victim").string();
  { std::ofstream(victim) << "victim"; }
  const std::string path = (d / name).string();
  if (!name.empty() && name != "victim") fs::create_symlink(victim, path + ".tmp", ec);
  bool written = false;
  gs::fuzz::expect_documented_outcome([&] {
    gs::check_output_path(path, "--json");
    gs::write_file_atomic(path, text);
    written = true;
  });
  std::ifstream v(victim, std::ios::binary);
  std::stringstream vs;
  vs << v.rdbuf();
  if (vs.str() != "victim" && name != "victim") {
    std::fprintf(stderr, "fuzz_output: a planted symlink was followed\n");
    std::abort();
  }
  if (written) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (ss.str() != text) {
      std::fprintf(stderr, "fuzz_output: the file does not hold what was written\n");
      std::abort();
    }
  }
  for (const auto& e : fs::directory_iterator(d, ec))
    if (const std::string f = e.path().filename().string();
        f.size() == name.size() + 11 && f.rfind(name + ".tmp-", 0) == 0) {  // NAME.tmp-XXXXXX
      std::fprintf(stderr, "fuzz_output: temporary file left: %s\n", e.path().c_str());
      std::abort();
    }
  return 0;
}

// libFuzzer harness: outputs against inputs and other outputs (core/io/output_paths:
// check_distinct_files, check_output_path). The input is lines "KIND NAME" in a scratch folder:
// KIND 'f' makes NAME a file, 'l' a hard link to the previous file, 's' a symlink to it, 'o' names
// an output, 'i' an input (NAME may hold one '/' for a sub-folder, "." and ".." parts included).
// Then:
//   - check_distinct_files accepts the set only when no output is an input or another output by
//     device and inode (or, for names that do not exist, by normalised path), and refuses it with
//     a UsageError otherwise;
//   - check_output_path never creates or removes an output's own name: a name that did not exist
//     still does not, an existing file keeps its inode and bytes, and the folders hold exactly
//     what they held (no temporary file left).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/io/output_paths.hpp"
#include "core/util/error.hpp"
#include "fuzz_common.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& scratch() { return gs::fuzz::scratch_dir("sets"); }

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_output_sets: %s\n", what.c_str());
  std::abort();
}

// The same file by an independent rule: both exist with one device and inode, or neither exists
// and the absolute, normalised names are equal.
bool same(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  return fs::weakly_canonical(fs::absolute(a)) == fs::weakly_canonical(fs::absolute(b));
}

std::string state_of(const std::string& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return "absent";
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return std::to_string(st.st_ino) + ":" + ss.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  const fs::path d = scratch();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) fs::remove_all(e.path(), ec);
  fs::create_directory(d / "sub", ec);
  std::vector<gs::NamedFile> outs, ins;
  std::string last_file;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  int n = 0;
  for (std::string line; std::getline(in, line) && n < 16; ++n) {
    if (line.size() < 3 || line[1] != ' ') continue;
    const std::string name = line.substr(2);
    if (name.empty() || name.find('\0') != std::string::npos || name.size() > 300 || name.front() == '/') continue;
    if (std::count(name.begin(), name.end(), '/') > 1 || (name.find('/') != std::string::npos && name.rfind("sub/", 0) != 0))
      continue;
    const std::string path = (d / name).string();
    switch (line[0]) {
      case 'f': std::ofstream(path) << name; last_file = path; break;
      case 'l': if (!last_file.empty()) fs::create_hard_link(last_file, path, ec); break;
      case 's': if (!last_file.empty()) fs::create_symlink(last_file, path, ec); break;
      case 'o': outs.push_back({path, "--out" + std::to_string(outs.size())}); break;
      case 'i': ins.push_back({path, "--in" + std::to_string(ins.size())}); break;
      default: break;
    }
  }
  bool clash = false;
  for (size_t i = 0; i < outs.size(); ++i) {
    for (const auto& x : ins) clash |= same(outs[i].path, x.path);
    for (size_t j = i + 1; j < outs.size(); ++j) clash |= same(outs[i].path, outs[j].path);
  }
  bool refused = false;
  try {
    gs::check_distinct_files(outs, ins);
  } catch (const gs::UsageError&) {
    refused = true;
  } catch (const std::exception& e) {
    finding(std::string("exception: ") + e.what());
  }
  if (clash && !refused) finding("an output that is an input or another output was accepted");
  if (!clash && refused) finding("distinct files were refused");
  // What the folders hold before the checks: they must hold exactly that after (no temporary file
  // left, the target's own name never created or removed).
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const fs::path& folder : {d, d / "sub"})
      for (const auto& e : fs::directory_iterator(folder, ec)) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = listing();
  for (const auto& o : outs) {
    const std::string was = state_of(o.path);
    try {
      gs::check_output_path(o.path, o.what);
    } catch (const gs::UsageError&) {
    } catch (const std::exception& e) {
      finding(std::string("exception: ") + e.what());
    }
    if (state_of(o.path) != was) finding("check_output_path changed the output's own name: " + o.path);
  }
  if (listing() != before) finding("the checks left or removed a file");
  return 0;
}

// libFuzzer harness: the DeepGEMM provider's disk cache (core/providers/jit_cache). The first byte
// chooses what sits at the entry's name and how it is planted (bit 0-1: a regular file with the
// rest of the input as its bytes, a symlink to a victim file, a FIFO, a directory; bit 2: the
// bytes prefixed with a valid header for the key; bit 3: group-writable; bit 4: a folder others
// may write; bit 5: another owner expected). Then load() and store() run, and:
//   - load() returns a binary only from a trusted regular file whose bytes are exactly a valid
//     entry for the key (header, then that payload), never through the symlink, never blocking;
//   - store() leaves the victim untouched, no temporary file behind, and, when it succeeds, an
//     entry that loads back as the binary stored;
//   - nothing throws (a cache problem is a miss or a note).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/providers/jit_cache.hpp"
#include "fuzz_common.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& scratch() { return gs::fuzz::scratch_dir("jit"); }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_jit_cache: %s\n", what);
  std::abort();
}

gs::jit::CacheKey key() {
  gs::jit::CacheKey k;
  k.kernel = "sm90_fp8_gemm_1d2d";
  k.source = "#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>\n&f<1, 2>";
  k.commit = "54e2261";
  k.header_hash = 0x1234;
  k.nvrtc_major = 13;
  k.arch = "sm_90a";
  k.options = {"-std=c++20", "-DNDEBUG"};
  return k;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return -1;
  const uint8_t mode = data[0];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const fs::path top = scratch();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(top, ec)) fs::remove_all(e.path(), ec);
  const fs::path dir = top / "cache";
  fs::create_directory(dir, ec);
  ::chmod(dir.c_str(), (mode & 0x10) ? 0777 : 0700);
  const fs::path victim = top / "victim";
  { std::ofstream(victim) << "victim"; }
  const gs::jit::CacheKey k = key();
  const gs::jit::DiskCache cache(dir.string(), (mode & 0x20) ? ::geteuid() + 1 : ::geteuid());
  const std::string entry = cache.path_for(k);
  // A valid entry's bytes for this key and a payload, written the way store() writes them.
  const auto valid_entry = [&](const std::string& payload) {
    const gs::jit::DiskCache maker((top / "maker").string());
    std::string why;
    if (!maker.store(k, payload, why)) finding("a store into a fresh private folder failed");
    return slurp(maker.path_for(k));
  };
  const std::string planted = (mode & 0x04) && !bytes.empty() ? valid_entry(bytes) : bytes;
  switch (mode & 3) {
    case 0: {
      std::ofstream(entry, std::ios::binary) << planted;
      ::chmod(entry.c_str(), (mode & 0x08) ? 0664 : 0600);
      break;
    }
    case 1: fs::create_symlink(victim, entry, ec); break;
    case 2: ::mkfifo(entry.c_str(), 0600); break;
    default: fs::create_directory(entry, ec); break;
  }
  // Root is trusted as an owner too: a file of root's is never "another owner's".
  const bool trusted = !(mode & 0x10) && !((mode & 0x20) && ::geteuid() != 0);
  try {
    const auto hit = cache.load(k);
    if (hit) {
      if ((mode & 3) != 0 || (mode & 0x08) || !trusted) finding("an untrusted or non-regular entry was loaded");
      if (valid_entry(*hit) != planted) finding("a binary was loaded from bytes that are not a valid entry");
    }
    std::string why;
    const std::string binary = bytes.empty() ? std::string("x") : bytes;
    const bool stored = cache.store(k, binary, why);
    if (stored && !trusted) finding("stored into an untrusted folder");
    if (stored) {
      const auto back = cache.load(k);
      if (!back || *back != binary) finding("a stored entry does not load back");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_jit_cache: exception: %s\n", e.what());
    std::abort();
  }
  if (slurp(victim) != "victim") finding("the symlink's target was written");
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) finding("a temporary file was left");
  return 0;
}

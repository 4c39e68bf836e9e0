// Disk cache of run-time compiled GPU code (the DeepGEMM provider's NVRTC cubins).
// Pure C++: the key, the location and the file store, testable without a GPU or NVRTC.
//
// A cubin is reused only when every input that shaped it is the same: the kernel's generated
// source (which names its template arguments), the third-party commit, a hash of the embedded
// headers, the NVRTC version, the target arch and the compile options. Any change gives a new
// key, so a stale cubin is never loaded (invalidation by construction; old files just linger).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gs::jit {

// 64-bit FNV-1a, used for the key and the header hash (stable across runs and machines).
uint64_t fnv1a64(const std::string& text, uint64_t seed = 0xcbf29ce484222325ull);

struct CacheKey {
  std::string kernel;        // short kernel name, e.g. "sm90_fp8_gemm_1d2d"
  std::string source;        // the generated instantiation source (template arguments included)
  std::string commit;        // DeepGEMM commit the headers come from
  uint64_t header_hash = 0;  // hash over the embedded header texts
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::string arch;          // e.g. "sm_90a"
  std::vector<std::string> options;  // compile options

  // Canonical text of every field; the file name is a hash of it.
  std::string canonical() const;
  // "<kernel>-<16 hex digits>", safe as a file name.
  std::string file_stem() const;
};

// Where the cache lives: $GEMMSCOPE_CACHE_DIR if set and non-empty, else
// $XDG_CACHE_HOME/gemmscope/deepgemm, else $HOME/.cache/gemmscope/deepgemm; empty if none
// of these is set (then nothing is cached). `getenv` is injectable for tests.
std::string cache_dir(const std::function<const char*(const char*)>& getenv_fn);
std::string cache_dir();

class DiskCache {
 public:
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }
  // The cached binary for `key`, if present and its stored canonical key matches exactly
  // (a hash collision or a truncated file reads as a miss).
  std::optional<std::string> load(const CacheKey& key) const;
  // Stores atomically (write to a temporary, then rename). False with `why` on failure; a
  // failed store is a note, never an error: the kernel still runs from memory.
  bool store(const CacheKey& key, const std::string& binary, std::string& why) const;
  std::string path_for(const CacheKey& key) const;

 private:
  std::string dir_;
};

}  // namespace gs::jit

// Disk cache of run-time compiled GPU code (the DeepGEMM provider's NVRTC cubins).
// Pure C++: the key, the location and the file store, testable without a GPU or NVRTC.
//
// A cubin is reused only when every input that shaped it is the same: the kernel's generated
// source (which names its template arguments), the third-party commit, a hash of the embedded
// headers, the NVRTC version, the target arch and the compile options. Any change gives a new
// key, so a stale cubin is never loaded (invalidation by construction; old files just linger).
#pragma once
#include <sys/types.h>

#include <cstddef>
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

// The largest entry read back: a cubin is a few hundred KB to a few MB.
constexpr size_t kMaxCacheEntryBytes = size_t{64} << 20;

// The cache's trust rules (docs/hostile-input.md), as ssh and git treat their folders: its cubins
// run on the GPU, so a cache anyone else can write is never used.
//   - The folder must be a directory owned by the user (or root) and writable by nobody else; its
//     parent must be owned by the user or root and, when others may write it, sticky (/tmp).
//     Otherwise nothing is loaded from it or stored in it, and store() says why (a note).
//   - An entry is read only when it is a regular file (opened with O_NOFOLLOW|O_NONBLOCK, so a
//     symlink, FIFO or device is never followed, waited on or read), owned by the user (or root),
//     writable by nobody else, and at most kMaxCacheEntryBytes; then its header must hold exactly
//     the key's canonical text (every input of the compile: source, options, NVRTC version, ...)
//     and the payload's size and checksum. Anything else is a miss.
//   - A store creates the folders it needs 0700, writes a new file under a random name in the
//     folder (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: never an existing file, never through a
//     symlink) and renames it over the entry's name.
class DiskCache {
 public:
  // `owner`: the user whose folder and entries are trusted (besides root); the effective user by
  // default (tests pass another to check the ownership rule without root).
  explicit DiskCache(std::string dir);
  DiskCache(std::string dir, uid_t owner);
  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }
  // The cached binary for `key`, if present, trusted and its stored key and checksum match
  // exactly (a hash collision, a truncated or edited file, a planted entry read as a miss).
  // `why` (optional) gets the reason an existing entry was not used.
  std::optional<std::string> load(const CacheKey& key, std::string* why = nullptr) const;
  // Stores atomically (a new random file, then rename). False with `why` on failure; a failed
  // store is a note, never an error: the kernel still runs from memory.
  bool store(const CacheKey& key, const std::string& binary, std::string& why) const;
  std::string path_for(const CacheKey& key) const;
  // Why the folder is not trusted (the rules above), "" when it is or does not exist yet.
  std::string folder_problem() const;

 private:
  std::string dir_;
  uid_t owner_;
};

}  // namespace gs::jit

#include "core/providers/jit_cache.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "core/io/input_file.hpp"
#include "core/io/output_paths.hpp"
#include "core/io/temp_files.hpp"

namespace gs::jit {

uint64_t fnv1a64(const std::string& text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string CacheKey::canonical() const {
  std::string s;
  auto field = [&](const char* name, const std::string& v) {
    // Length-prefixed, so no two different field lists read the same.
    s += fmt::format("{}:{}:{}\n", name, v.size(), v);
  };
  field("kernel", kernel);
  field("commit", commit);
  field("headers", fmt::format("{:016x}", header_hash));
  field("nvrtc", fmt::format("{}.{}", nvrtc_major, nvrtc_minor));
  field("arch", arch);
  for (const auto& o : options) field("option", o);
  field("source", source);
  return s;
}

std::string CacheKey::file_stem() const {
  return fmt::format("{}-{:016x}", kernel.empty() ? std::string("kernel") : kernel, fnv1a64(canonical()));
}

std::string cache_dir(const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* n) -> std::string {
    const char* v = getenv_fn(n);
    return v ? std::string(v) : std::string();
  };
  if (auto d = env("GEMMSCOPE_CACHE_DIR"); !d.empty()) return d;
  if (auto x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/gemmscope/deepgemm";
  if (auto h = env("HOME"); !h.empty()) return h + "/.cache/gemmscope/deepgemm";
  return {};
}

std::string cache_dir() {
  return cache_dir([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
}

std::string DiskCache::path_for(const CacheKey& key) const { return dir_ + "/" + key.file_stem() + ".cubin"; }

DiskCache::DiskCache(std::string dir) : DiskCache(std::move(dir), ::geteuid()) {}
DiskCache::DiskCache(std::string dir, uid_t owner) : dir_(std::move(dir)), owner_(owner) {}

// File format: "GSJIT2\n", the canonical key's byte count and text, the payload's byte count and
// FNV-1a hash (16 hex digits), then the payload.
static const char kMagic[] = "GSJIT2\n";

namespace {

std::string header_of(const std::string& canon, const std::string& payload) {
  return fmt::format("{}{}\n{}{} {:016x}\n", kMagic, canon.size(), canon, payload.size(), fnv1a64(payload));
}

std::string parent_of(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const auto slash = d.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : d.substr(0, slash);
}

bool trusted_owner(uid_t file_owner, uid_t owner) { return file_owner == owner || file_owner == 0; }

}  // namespace

std::string DiskCache::folder_problem() const {
  if (!enabled()) return "";
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) return errno == ENOENT ? "" : fmt::format("cannot use {}: {}", dir_, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir_);
  if (!trusted_owner(st.st_uid, owner_))
    return fmt::format("{} is owned by user {}, not by this user ({}): not used", dir_, st.st_uid, owner_);
  if (st.st_mode & 022)
    return fmt::format("{} is writable by others (mode {:o}): not used (chmod go-w it)", dir_, st.st_mode & 0777);
  const std::string parent = parent_of(dir_);
  struct stat pst {};
  if (::stat(parent.c_str(), &pst) != 0) return fmt::format("cannot use {}: {}", parent, std::strerror(errno));
  if (!trusted_owner(pst.st_uid, owner_))
    return fmt::format("{}'s folder {} is owned by user {}: not used", dir_, parent, pst.st_uid);
  if ((pst.st_mode & 022) && !(pst.st_mode & S_ISVTX))
    return fmt::format("{}'s folder {} is writable by others and not sticky: not used", dir_, parent);
  return "";
}

std::optional<std::string> DiskCache::load(const CacheKey& key, std::string* why) const {
  const auto miss = [&](std::string reason) -> std::optional<std::string> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (!enabled()) return miss("");
  if (std::string p = folder_problem(); !p.empty()) return miss(p);
  const std::string path = path_for(key);
  // O_NOFOLLOW: a symlink is never followed; O_NONBLOCK: a FIFO never blocks the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return miss(errno == ENOENT ? "" : fmt::format("{}: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return miss(fmt::format("{}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return miss(fmt::format("{} is not a regular file", path));
  if (!trusted_owner(st.st_uid, owner_)) return miss(fmt::format("{} is owned by user {}: not used", path, st.st_uid));
  if (st.st_mode & 022) return miss(fmt::format("{} is writable by others: not used", path));
  if (static_cast<unsigned long long>(st.st_size) > kMaxCacheEntryBytes)
    return miss(fmt::format("{} is larger than {} bytes", path, kMaxCacheEntryBytes));
  std::string all;
  all.reserve(static_cast<size_t>(st.st_size));
  if (const ReadStatus r = read_to_end(fd, kMaxCacheEntryBytes, all); r.error)
    return miss(fmt::format("{}: {}", path, std::strerror(r.error)));
  else if (r.over_limit)
    return miss(fmt::format("{} is larger than {} bytes", path, kMaxCacheEntryBytes));
  // The header names the payload's size and hash: compare the key's first, then take the payload
  // and check both (a truncated or edited entry is a miss).
  const std::string canon = key.canonical();
  const std::string head = fmt::format("{}{}\n{}", kMagic, canon.size(), canon);
  if (all.compare(0, head.size(), head) != 0) return miss(fmt::format("{} holds another key", path));
  const size_t nl = all.find('\n', head.size());
  if (nl == std::string::npos || nl - head.size() > 40) return miss(fmt::format("{} has no payload header", path));
  std::string payload = all.substr(nl + 1);
  if (all.compare(0, nl + 1, header_of(canon, payload)) != 0)
    return miss(fmt::format("{}: the payload's size or checksum does not match", path));
  if (payload.empty()) return miss(fmt::format("{} is empty", path));
  if (why) why->clear();
  return payload;
}

bool DiskCache::store(const CacheKey& key, const std::string& binary, std::string& why) const {
  if (!enabled()) { why = "no cache folder (set GEMMSCOPE_CACHE_DIR)"; return false; }
  // The folders that are missing, created 0700 from the top.
  std::vector<std::string> missing;
  for (std::string d = dir_; !d.empty() && d != "/" && d != ".";) {
    struct stat st {};
    if (::stat(d.c_str(), &st) == 0) break;
    missing.push_back(d);
    const std::string up = parent_of(d);
    if (up == d) break;
    d = up;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      why = fmt::format("cannot create {}: {}", *it, std::strerror(errno));
      return false;
    }
  if (std::string p = folder_problem(); !p.empty()) { why = p; return false; }
  const std::string final_path = path_for(key);
  static std::mt19937_64 rng{std::random_device{}()};
  std::optional<TempFile> guard;  // removed on a failure and on a fatal signal
  const int fd = create_guarded(
      [&](std::string& name) {
        int f = -1;
        for (int attempt = 0; attempt < 16 && f < 0; ++attempt) {
          name = fmt::format("{}/.{}.tmp-{:016x}", dir_, key.file_stem(), rng());
          f = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
          if (f < 0 && errno != EEXIST) break;
        }
        return f;
      },
      guard);
  if (fd < 0) { why = fmt::format("cannot create a file in {}: {}", dir_, std::strerror(errno)); return false; }
  const std::string& tmp = guard->name();
  int err = write_all(fd, header_of(key.canonical(), binary));
  if (err == 0) err = write_all(fd, binary);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) { why = fmt::format("cannot write {}: {}", tmp, std::strerror(err)); return false; }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    why = fmt::format("cannot rename into {}: {}", final_path, std::strerror(errno));
    return false;
  }
  guard->release();
  return true;
}

}  // namespace gs::jit

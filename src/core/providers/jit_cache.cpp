#include "core/providers/jit_cache.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

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

// File format: "GSJIT1\n", the canonical key's byte count and text, then the binary.
static const char kMagic[] = "GSJIT1\n";

std::optional<std::string> DiskCache::load(const CacheKey& key) const {
  if (!enabled()) return std::nullopt;
  std::ifstream f(path_for(key), std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  const std::string canon = key.canonical();
  const std::string head = std::string(kMagic) + std::to_string(canon.size()) + "\n" + canon;
  if (all.size() <= head.size() || all.compare(0, head.size(), head) != 0) return std::nullopt;
  return all.substr(head.size());
}

bool DiskCache::store(const CacheKey& key, const std::string& binary, std::string& why) const {
  if (!enabled()) { why = "no cache folder (set GEMMSCOPE_CACHE_DIR)"; return false; }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) { why = fmt::format("cannot create {}: {}", dir_, ec.message()); return false; }
  const std::string canon = key.canonical();
  const std::string final_path = path_for(key);
  const std::string tmp = fmt::format("{}.tmp{}", final_path, static_cast<long>(getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) { why = fmt::format("cannot write {}", tmp); return false; }
    f << kMagic << canon.size() << "\n" << canon;
    f.write(binary.data(), static_cast<std::streamsize>(binary.size()));
    if (!f) { why = fmt::format("write to {} failed", tmp); std::filesystem::remove(tmp, ec); return false; }
  }
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) { why = fmt::format("cannot rename into {}: {}", final_path, ec.message()); std::filesystem::remove(tmp, ec); return false; }
  return true;
}

}  // namespace gs::jit

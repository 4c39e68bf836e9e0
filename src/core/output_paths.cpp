#include "core/output_paths.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.hpp"
#include "core/text_util.hpp"

namespace gs {

namespace fs = std::filesystem;

namespace {

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string chart_path_problem(const std::string& path) {
  if (path.empty()) return "empty file name";
  std::string name = base_name(path);
  if (name.empty()) return "ends in '/': give a file name ending in .png, .svg or .pdf";
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto ends = [&](const char* e) { return lower.size() >= 4 && lower.compare(lower.size() - 4, 4, e) == 0; };
  if (!ends(".png") && !ends(".svg") && !ends(".pdf")) return "the chart file must end in .png, .svg or .pdf";
  const std::string stem = name.substr(0, name.size() - 4);
  if (stem.find_first_not_of('.') == std::string::npos)
    return "the chart file needs a name before its extension (not just '" + name + "')";
  return "";
}

void check_chart_path(const std::string& path, const std::string& flag) {
  if (const std::string why = chart_path_problem(path); !why.empty())
    throw UsageError(fmt::format("{} {}: {}", flag, printable(path), why));
}

std::string temp_output_path(const std::string& path) { return path + ".tmp"; }

namespace {

// Creates `file` (O_CREAT|O_EXCL: never opens what is there) and removes it again: proves that
// this exact name can be created ("File name too long" is found here, not after the run).
// "" when it could, else the reason. A file that appeared meanwhile (EEXIST) counts as creatable.
std::string create_and_remove(const std::string& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) return errno == EEXIST ? "" : std::strerror(errno);
  ::close(fd);
  ::unlink(file.c_str());
  return "";
}

}  // namespace

void check_output_path(const std::string& path, const std::string& flag) {
  const auto fail = [&](const std::string& why) { return UsageError(fmt::format("{} {}: {}", flag, printable(path), why)); };
  if (path.empty()) throw fail("empty file name");
  if (path.back() == '/') throw fail("ends in '/': give a file name, not a directory");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw fail("is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) throw fail("exists and is not a regular file");
  // Create and remove a probe file next to the target: what writing it (a temp file, then a
  // rename) needs.
  const std::string dir = dir_name(path);
  static std::mt19937_64 rng{std::random_device{}()};
  bool probed = false;
  for (int attempt = 0; attempt < 16 && !probed; ++attempt) {
    const std::string probe =
        fmt::format("{}/.gemmscope-probe-{}-{:016x}", dir, static_cast<long>(::getpid()), rng());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      probed = true;
    } else if (errno != EEXIST) {
      throw fail(fmt::format("cannot create files in '{}': {}", printable(dir), std::strerror(errno)));
    }
  }
  if (!probed) throw fail(fmt::format("cannot create a probe file in '{}'", printable(dir)));
  // The probe's name is short: the exact names written must be created too, the file and the
  // temporary file it is written through (a name too long for the file system fails only there).
  const std::string tmp = temp_output_path(path);
  const fs::file_status tst = fs::status(tmp, ec);
  if (fs::exists(tst)) {
    // A temporary file left by an interrupted run: it is truncated and renamed, so it must be a
    // writable regular file.
    if (!fs::is_regular_file(tst))
      throw fail(fmt::format("its temporary file {} exists and is not a regular file", printable(tmp)));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw fail(fmt::format("cannot write its temporary file {}: {}", printable(tmp), std::strerror(errno)));
    ::close(fd);
  } else if (const std::string why = create_and_remove(tmp); !why.empty()) {
    throw fail(fmt::format("cannot create its temporary file {}: {}", printable(tmp), why));
  }
  if (!fs::exists(st)) {
    if (const std::string why = create_and_remove(path); !why.empty()) throw fail(fmt::format("cannot create it: {}", why));
  }
}

bool same_output_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a, ea), ea);
  const fs::path pb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  if (ea || eb) return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  return pa == pb;
}

}  // namespace gs

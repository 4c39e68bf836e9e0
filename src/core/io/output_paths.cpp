#include "core/io/output_paths.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <optional>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/util/text_util.hpp"

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
  const std::string lower = ascii_lower(name);
  const auto ends = [&](const char* e) { return lower.size() >= 4 && lower.compare(lower.size() - 4, 4, e) == 0; };
  if (!ends(".png") && !ends(".svg") && !ends(".pdf")) return "the chart file must end in .png, .svg or .pdf";
  const std::string stem = name.substr(0, name.size() - 4);
  if (stem.find_first_not_of('.') == std::string::npos)
    return "the chart file needs a name before its extension (not just '" + name + "')";
  return "";
}

void check_chart_path(const std::string& path, const std::string& flag) {
  if (const std::string why = chart_path_problem(path); !why.empty())
    throw UsageError(fmt::format("{} {}: {}", flag, clip_text(path), why));
}

std::string temp_output_path(const std::string& path) { return path + ".tmp-XXXXXX"; }

namespace {

// Creates `file` (O_CREAT|O_EXCL: never opens what is there, never follows a symlink) and
// removes it again: proves that this exact name can be created ("File name too long" is found
// here, not after the run). "" when it could, else the reason. A file that appeared meanwhile
// (EEXIST) counts as creatable.
std::string create_and_remove(const std::string& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) return errno == EEXIST ? "" : std::strerror(errno);
  ::close(fd);
  ::unlink(file.c_str());
  return "";
}

// A new temporary file for `path` (mkostemp: O_CREAT|O_EXCL, so never an existing file or a
// symlink's target); its descriptor and its name in `name`, or -1 with errno set.
int create_temp(const std::string& path, std::string& name) {
  std::string tmpl = temp_output_path(path);
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0) name = tmpl;
  return fd;
}

// The temporary file being written, for the signal handler: a fixed buffer (nothing in a
// handler may allocate) and a flag set only while the name in it is a file of ours.
char g_temp_name[8192];
volatile sig_atomic_t g_temp_live = 0;

extern "C" void remove_temp_and_reraise(int sig) {
  if (g_temp_live) ::unlink(g_temp_name);  // async-signal-safe
  // The default action, so the process ends as the signal meant (status 130/143 in a shell).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// While it lives, SIGINT and SIGTERM remove the temporary file `name` before ending the
// process; the previous handlers are restored after.
class TempGuard {
 public:
  explicit TempGuard(const std::string& name) {
    const size_t n = std::min(name.size(), sizeof g_temp_name - 1);
    std::memcpy(g_temp_name, name.data(), n);
    g_temp_name[n] = '\0';
    struct sigaction sa {};
    sa.sa_handler = remove_temp_and_reraise;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    g_temp_live = 1;
  }
  ~TempGuard() {
    g_temp_live = 0;
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The mode a file created with 0666 would have had (mkostemp creates 0600).
mode_t default_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
  const auto fail = [&](int err) {
    return UsageError(fmt::format("cannot write '{}': {}", clip_text(path), std::strerror(err)));
  };
  std::string tmp;
  // SIGINT and SIGTERM blocked while the file is created and the guard set up, so that none
  // lands between the two and leaves the file behind.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  const int fd = create_temp(path, tmp);
  const int create_errno = errno;
  std::optional<TempGuard> guard;
  if (fd >= 0) guard.emplace(tmp);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (fd < 0) throw fail(create_errno);
  const auto abandon = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(err);
  };
  if (::fchmod(fd, default_file_mode()) != 0) throw abandon(errno);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t{1} << 20));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw abandon(errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  // A full disk or quota on a network or delayed-allocation file system shows at fsync or
  // close, not at write: either failing keeps the old file.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) throw abandon(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw fail(err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw fail(err);
  }
}

void check_output_path(const std::string& path, const std::string& flag) {
  const auto fail = [&](const std::string& why) { return UsageError(fmt::format("{} {}: {}", flag, clip_text(path), why)); };
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
      throw fail(fmt::format("cannot create files in '{}': {}", clip_text(dir), std::strerror(errno)));
    }
  }
  if (!probed) throw fail(fmt::format("cannot create a probe file in '{}'", clip_text(dir)));
  // The probe's name is short: the exact names written must be created too, the file and the
  // temporary files it is written through (a name too long for the file system fails only there).
  {
    std::string tmp;
    const int fd = create_temp(path, tmp);
    if (fd < 0)
      throw fail(fmt::format("cannot create its temporary file {}: {}", clip_text(temp_output_path(path)),
                             std::strerror(errno)));
    ::close(fd);
    ::unlink(tmp.c_str());
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

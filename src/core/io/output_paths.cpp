#include "core/io/output_paths.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/temp_files.hpp"
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

// A new temporary file for `path` (mkostemp: O_CREAT|O_EXCL, so never an existing file or a
// symlink's target); its descriptor and its name in `name`, or -1 with errno set.
int create_temp(const std::string& path, std::string& name) {
  std::string tmpl = temp_output_path(path);
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0) name = tmpl;
  return fd;
}

// The mode a file created with 0666 would have had (mkostemp creates 0600).
mode_t default_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

}  // namespace

int write_all(int fd, std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t{1} << 20));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const auto fail = [&](int err) {
    return UsageError(fmt::format("cannot write '{}': {}", clip_text(path), std::strerror(err)));
  };
  std::optional<TempFile> guard;  // removes the file on every way out, fatal signals included
  const int fd = create_guarded([&](std::string& name) { return create_temp(path, name); }, guard);
  if (fd < 0) throw fail(errno);
  const std::string& tmp = guard->name();
  const auto abandon = [&](int err) {
    ::close(fd);
    return fail(err);  // the guard removes the file
  };
  // An existing file keeps its mode, and its group (and owner, when run as root) where the
  // system permits: overwriting a 0600 result must not leave it 0644. A new file gets the
  // umask's mode (mkostemp creates 0600).
  struct stat old {};
  if (::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    if (::geteuid() == 0) (void)!::fchown(fd, old.st_uid, old.st_gid);
    else if (old.st_gid != ::getegid()) (void)!::fchown(fd, static_cast<uid_t>(-1), old.st_gid);
    if (::fchmod(fd, old.st_mode & 0777) != 0) throw abandon(errno);
  } else if (::fchmod(fd, default_file_mode()) != 0) {
    throw abandon(errno);
  }
  // EFBIG beyond `ulimit -f`: SIGXFSZ is ignored while a TempFile lives.
  if (const int err = write_all(fd, text)) throw abandon(err);
  // A full disk or quota on a network or delayed-allocation file system shows at fsync or
  // close, not at write: either failing keeps the old file.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) throw abandon(errno);
  if (::close(fd) != 0) throw fail(errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail(errno);
  guard->release();
}

void check_output_path(const std::string& path, const std::string& flag) {
  const auto fail = [&](const std::string& why) { return UsageError(fmt::format("{} {}: {}", flag, clip_text(path, 120), why)); };
  if (path.empty()) throw fail("empty file name");
  if (path.back() == '/') throw fail("ends in '/': give a file name, not a directory");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw fail("is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) throw fail("exists and is not a regular file");
  // Probe the folder, never the target's own name (a concurrent run may be renaming its finished
  // file onto it, and a probe that removed that name would delete it): create the temporary file
  // the output is written through, a random name beside the target, and remove it. It proves
  // what writing needs (a file created in the folder, then a rename), and that the name is not too
  // long for the file system: the temporary name is the target's plus a suffix, so when it can be
  // created, so can the target's.
  const std::string dir = dir_name(path);
  std::optional<TempFile> guard;  // removed when this function returns, or on a fatal signal
  const int fd = create_guarded([&](std::string& name) { return create_temp(path, name); }, guard);
  const int err = errno;
  if (fd < 0) {
    if (err == ENAMETOOLONG)
      throw fail(fmt::format("cannot create its temporary file {}: {}", clip_text(temp_output_path(path), 120),
                             std::strerror(err)));
    throw fail(fmt::format("cannot create files in '{}': {}", clip_text(dir, 120), std::strerror(err)));
  }
  ::close(fd);
}

bool same_output_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a, ea), ea);
  const fs::path pb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  if (ea || eb) return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  return pa == pb;
}

bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return same_output_path(a, b);
}

void check_distinct_files(const std::vector<NamedFile>& outputs, const std::vector<NamedFile>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedFile& o = outputs[i];
    if (o.path.empty()) continue;
    for (const NamedFile& in : inputs)
      if (same_file(o.path, in.path))
        throw UsageError(fmt::format("{} {} is the {} {}: an output never replaces an input", o.what, clip_text(o.path, 80),
                                     in.what, clip_text(in.path, 80)));
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (same_file(o.path, outputs[j].path))
        throw UsageError(fmt::format("{} {} and {} {} are the same file", o.what, clip_text(o.path, 80), outputs[j].what,
                                     clip_text(outputs[j].path, 80)));
  }
}

}  // namespace gs


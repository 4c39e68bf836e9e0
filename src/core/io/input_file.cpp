#include "core/io/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

namespace {

std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, clipped: the
// "last read: '...'" part quotes the file and can be as long as the file.
std::string library_message(const json::exception& e) {
  std::string_view msg = e.what();
  if (const auto p = msg.find("] "); p != std::string_view::npos) msg.remove_prefix(p + 2);
  return clip_text(msg);
}

}  // namespace

std::string json_value_hint(const json& v, size_t max_chars) {
  switch (v.type()) {
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      return fmt::format("\"{}\"", clip_text(s, max_chars));  // "abc... (N bytes)" when cut
    }
    case json::value_t::array:
      return v.empty() ? "an empty list" : fmt::format("a list of {} item{}", v.size(), v.size() == 1 ? "" : "s");
    case json::value_t::object:
      return v.empty() ? "an empty object" : fmt::format("an object with {} key{}", v.size(), v.size() == 1 ? "" : "s");
    case json::value_t::discarded:
      return "nothing";
    default:  // null, boolean, numbers: short by nature
      return v.dump();
  }
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  const auto fail = [&](const std::string& why) {
    return UsageError(fmt::format("{} '{}' {}", what, clip_text(path), why));
  };
  const auto cannot_read = [&](int err) {
    return UsageError(fmt::format("cannot read {} '{}': {}", what, clip_text(path),
                                  err == ENOENT   ? std::string("no such file")
                                  : err == EACCES ? std::string("permission denied")
                                                  : std::string(std::strerror(err))));
  };
  if (path.empty()) throw UsageError(fmt::format("{}: empty file name", what));
  // stat first: opening a FIFO for reading blocks until a writer appears, and a device such as
  // /dev/zero never ends.
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) throw cannot_read(errno);
  if (S_ISDIR(before.st_mode)) throw fail("is a directory");
  if (!S_ISREG(before.st_mode)) throw fail("is not a regular file");
  if (static_cast<unsigned long long>(before.st_size) > max_bytes)
    throw fail(fmt::format("is {} bytes, larger than the {} limit for input files", before.st_size, size_text(max_bytes)));
  // O_NONBLOCK: should the path have been replaced by a FIFO since the stat, open still returns.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw cannot_read(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw cannot_read(errno);
  if (!S_ISREG(st.st_mode)) throw fail("is not a regular file");
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  if (const ReadStatus r = read_to_end(fd, max_bytes, text); r.error) throw cannot_read(r.error);
  else if (r.over_limit) throw fail(fmt::format("is larger than the {} limit for input files", size_text(max_bytes)));
  return text;
}

ReadStatus read_to_end(int fd, size_t max_bytes, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return {errno, false};
    }
    if (n == 0) return {};
    // The file may grow while it is read: the limit holds for what is read, not for a stat.
    if (out.size() + static_cast<size_t>(n) > max_bytes) return {0, true};
    out.append(buf, static_cast<size_t>(n));
  }
}

namespace {

// One pass over the text, outside strings: the nesting depth (every '[' and '{') and the number
// of values (the top one, the first of each non-empty list or object, and one after each ',';
// an object's keys are not counted). O(n) in time, O(1) in memory, so the
// parse that follows needs no callback: nlohmann's callback parser re-examines the enclosing
// container at the end of each object, which made many small objects cost O(n^2). For text that
// is valid JSON these are exactly the document's depth and an upper bound on its values; for any
// other text the parser reports the error (or this scan refuses it first, which is as good).
void prescan(std::string_view text, const std::string& where, int max_depth, size_t max_values) {
  int depth = 0;
  size_t values = 1;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    switch (*p++) {
      case '"':
        // Skip the string: to the next unescaped quote (an unclosed string ends the scan).
        while (p < end) {
          const char c = *p++;
          if (c == '\\') {
            if (p < end) ++p;
          } else if (c == '"') {
            break;
          }
        }
        break;
      case '[':
      case '{': {
        if (++depth > max_depth)
          throw UsageError(fmt::format("{}: nested deeper than {} levels (the limit for input files)", where, max_depth));
        // Empty ("[]", "{ }"): no first value.
        const char* q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) ++q;
        if (q < end && (*q == ']' || *q == '}')) break;
        [[fallthrough]];
      }
      case ',':
        if (++values > max_values)
          throw UsageError(fmt::format("{}: more than {} values (lists, objects, numbers, strings: the limit for "
                                       "input files)", where, max_values));
        break;
      case ']':
      case '}':
        --depth;  // below zero only in invalid JSON, which the parser refuses
        break;
      default:
        break;
    }
  }
}

}  // namespace

json parse_json_text(std::string_view text, const std::string& origin, int max_depth) {
  const std::string where = clip_text(origin);
  // nlohmann's lexer takes a NUL byte for the end of the input: "{...}\0garbage" would parse.
  // JSON has no place for a raw NUL (inside strings it must be escaped).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw UsageError(fmt::format("{}: not valid JSON: a NUL byte at offset {}", where, nul));
  // Depth and size first, in linear time: a document nested 10^6 deep is refused before the
  // parser (or anything that recurses over a document) sees it.
  prescan(text, where, max_depth, kMaxJsonValues);
  try {
    // strict (the default): anything but white space after the value is an error.
    return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    throw UsageError(fmt::format("{}: not valid JSON: {}", where, library_message(e)));
  } catch (const json::exception& e) {  // out_of_range.406: a number that overflows a double (1e400)
    throw UsageError(fmt::format("{}: a number is too large: {}", where, library_message(e)));
  }
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw UsageError(fmt::format("{} is too large (beyond 64-bit integers)", what));
  return r;
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw UsageError(fmt::format("{} is too large (beyond 64-bit integers)", what));
  return r;
}

int64_t checked_neg(int64_t a, std::string_view what) {
  int64_t r = 0;
  if (__builtin_sub_overflow(int64_t{0}, a, &r)) throw UsageError(fmt::format("{} is too large (beyond 64-bit integers)", what));
  return r;
}

std::pair<int, int> parse_version_xy(const std::string& s, const std::string& what, int max_major, int max_minor) {
  const auto bad = [&] {
    return UsageError(fmt::format("{} must be \"X.Y\" with X from 0 to {} and Y from 0 to {}, got {}", what, max_major,
                                  max_minor, json_value_hint(json(s))));
  };
  const auto dot = s.find('.');
  if (dot == std::string::npos) throw bad();
  const auto part = [&](std::string_view p, int max) {
    if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string_view::npos) throw bad();
    int v = 0;
    for (char ch : p) v = v * 10 + (ch - '0');  // at most 9 digits: fits an int
    if (v > max) throw bad();
    return v;
  };
  const std::string_view sv(s);
  return {part(sv.substr(0, dot), max_major), part(sv.substr(dot + 1), max_minor)};
}

json read_json_file(const std::string& path, const std::string& what) {
  return parse_json_text(read_input_file(path, what), path);
}

}  // namespace gs

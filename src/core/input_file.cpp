#include "core/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/text_util.hpp"

namespace gs {

using nlohmann::json;

namespace {

std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

// Thrown by the parser callback when the document nests too deep; turned into a UsageError
// with the origin outside the parser.
struct TooDeep {};

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, clipped: the
// "last read: '...'" part quotes the file and can be as long as the file.
std::string library_message(const json::exception& e) {
  std::string_view msg = e.what();
  if (const auto p = msg.find("] "); p != std::string_view::npos) msg.remove_prefix(p + 2);
  return clip_text(msg);
}

}  // namespace

std::string clip_text(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return printable(text);
  size_t cut = max_chars;
  // Do not cut a UTF-8 sequence in two: back up to the first byte of the character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return printable(text.substr(0, cut)) + "...";
}

std::string json_value_hint(const json& v, size_t max_chars) {
  switch (v.type()) {
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (s.size() <= max_chars) return fmt::format("\"{}\"", printable(s));
      return fmt::format("\"{}\" ({} bytes)", clip_text(s, max_chars), s.size());
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
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw cannot_read(errno);
    }
    if (n == 0) break;
    // The file may grow while it is read: the limit holds for what is read, not for the stat.
    if (text.size() + static_cast<size_t>(n) > max_bytes)
      throw fail(fmt::format("is larger than the {} limit for input files", size_text(max_bytes)));
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

json parse_json_text(std::string_view text, const std::string& origin, int max_depth) {
  const std::string where = clip_text(origin);
  // nlohmann's lexer takes a NUL byte for the end of the input: "{...}\0garbage" would parse.
  // JSON has no place for a raw NUL (inside strings it must be escaped).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw UsageError(fmt::format("{}: not valid JSON: a NUL byte at offset {}", where, nul));
  // The depth is checked by the parser callback as each object or list opens, so a document
  // nested 10^6 deep is refused after reading max_depth levels, before any recursion over it.
  // `depth` is the number of enclosing containers of the one that opens.
  const json::parser_callback_t limit = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
      throw TooDeep{};
    return true;
  };
  try {
    // strict (the default): anything but white space after the value is an error.
    return json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const TooDeep&) {
    throw UsageError(fmt::format("{}: nested deeper than {} levels (the limit for input files)", where, max_depth));
  } catch (const json::parse_error& e) {
    throw UsageError(fmt::format("{}: not valid JSON: {}", where, library_message(e)));
  } catch (const json::exception& e) {  // out_of_range.406: a number that overflows a double (1e400)
    throw UsageError(fmt::format("{}: a number is too large: {}", where, library_message(e)));
  }
}

json read_json_file(const std::string& path, const std::string& what) {
  return parse_json_text(read_input_file(path, what), path);
}

}  // namespace gs

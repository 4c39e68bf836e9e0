// The one policy for files gemmscope reads but did not write (a Hugging Face config.json, a
// result JSON from another machine, a routing file): they may be anything, so every reader goes
// through here. What is refused, each with one clear UsageError line:
//   - anything but a regular file (checked with stat before opening, and again on the open
//     descriptor, so a FIFO never blocks and /dev/zero never fills memory);
//   - a file larger than kMaxInputBytes;
//   - a NUL byte anywhere (the JSON parser would stop there and ignore what follows);
//   - invalid JSON, and any content after the one JSON value;
//   - nesting deeper than kMaxJsonDepth and more than kMaxJsonValues values, both found by a
//     linear pre-scan before the parser runs (a deep document must never reach code that
//     recurses over it: dump(), copies, destructors), so reading costs O(n) for any shape;
//   - numbers that overflow a double.
// Messages never quote a whole value: json_value_hint() gives a short, printable description.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "core/util/text_util.hpp"

namespace gs {

// 64 MiB: a result JSON of the largest model plan is a few MB, a config.json a few KB.
constexpr size_t kMaxInputBytes = size_t{64} << 20;
// Result JSON nests 6 levels, config.json rarely more than 4; 64 leaves room and stays far from
// any stack limit.
constexpr int kMaxJsonDepth = 64;
// Values in one document (each list, object, string, number, ...): the largest result file of a
// bounded plan holds a few 10^5; 2^21 keeps a parsed document under about 200 MB whatever its
// shape (2^21 empty objects is the worst case).
constexpr size_t kMaxJsonValues = size_t{1} << 21;

// The bytes of the regular file at `path`. `what` names the kind of file in messages
// ("config file", "result file"): "cannot read config file 'x.json': No such file or directory",
// "result file '/dev/zero' is not a regular file", "... is larger than the 64 MiB limit".
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes = kMaxInputBytes);

// Reads the open descriptor `fd` to its end into `out` (appended), at most `max_bytes` in all:
// what read_input_file does after its checks, for readers with checks of their own (the JIT
// cache's entries). `error`: the errno of a failed read; `over_limit`: stopped past max_bytes.
struct ReadStatus {
  int error = 0;
  bool over_limit = false;
};
ReadStatus read_to_end(int fd, size_t max_bytes, std::string& out);

// `text` parsed as exactly one JSON value under the policy above; `origin` (a path) starts every
// message: "x.json: not valid JSON: ...", "x.json: nested deeper than 64 levels",
// "x.json: a number is too large ...".
nlohmann::json parse_json_text(std::string_view text, const std::string& origin, int max_depth = kMaxJsonDepth);

// read_input_file + parse_json_text: the function every JSON input goes through
// (config.json, result JSON, routing files).
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// A short printable description of `v` for error messages: numbers, booleans and null as JSON,
// strings quoted and cut to `max_chars` ("\"abcdef...\" (1000000 characters)"), lists and
// objects by their size ("a list of 3 items"): never the serialisation of an unbounded value.
std::string json_value_hint(const nlohmann::json& v, size_t max_chars = 40);

// clip_text (quoting file contents or library messages that embed them) is in
// core/util/text_util.hpp, included here.

// Arithmetic on integers read from input: a + b, a * b and -a, or a UsageError "{what} is
// too large (beyond 64-bit integers)" when the result would overflow (signed overflow is
// undefined behaviour, and in practice prints nonsense such as "sum -2").
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
int64_t checked_neg(int64_t a, std::string_view what);

// "X.Y" (a version or compute capability in an input file): decimal digits only, at most 9 per
// part, X at most max_major and Y at most max_minor; otherwise a UsageError "{what} must be
// \"X.Y\" with X from 0 to ... , got ...". No sscanf: its %d overflows on long digit strings.
std::pair<int, int> parse_version_xy(const std::string& s, const std::string& what, int max_major, int max_minor);

}  // namespace gs

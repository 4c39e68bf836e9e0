// The one policy for files gemmscope reads but did not write (a Hugging Face config.json, a
// result JSON from another machine, a routing file): they may be anything, so every reader goes
// through here. What is refused, each with one clear UsageError line:
//   - anything but a regular file (checked with stat before opening, and again on the open
//     descriptor, so a FIFO never blocks and /dev/zero never fills memory);
//   - a file larger than kMaxInputBytes;
//   - a NUL byte anywhere (the JSON parser would stop there and ignore what follows);
//   - invalid JSON, and any content after the one JSON value;
//   - nesting deeper than kMaxJsonDepth, refused while parsing (never after: a deep document
//     must not reach code that recurses over it: dump(), copies, destructors);
//   - numbers that overflow a double.
// Messages never quote a whole value: json_value_hint() gives a short, printable description.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gs {

// 64 MiB: a result JSON of the largest model plan is a few MB, a config.json a few KB.
constexpr size_t kMaxInputBytes = size_t{64} << 20;
// Result JSON nests 6 levels, config.json rarely more than 4; 64 leaves room and stays far from
// any stack limit.
constexpr int kMaxJsonDepth = 64;

// The bytes of the regular file at `path`. `what` names the kind of file in messages
// ("config file", "result file"): "cannot read config file 'x.json': No such file or directory",
// "result file '/dev/zero' is not a regular file", "... is larger than the 64 MiB limit".
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes = kMaxInputBytes);

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

// `text` made printable and cut to `max_chars` characters plus "..." : for quoting file
// contents or library messages that embed them.
std::string clip_text(std::string_view text, size_t max_chars = 200);

}  // namespace gs

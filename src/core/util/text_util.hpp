// Small text helpers for the command-line parsers (--shapes, --precisions, --threshold) and for
// numbers in reports and notes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gs {

// `text` without leading and trailing white space.
std::string trim(std::string_view text);

// The items of a `sep`-separated list, each trimmed: " a, b ,c" -> {"a", "b", "c"}.
// An item that is empty after trimming ("a,,b", "a,", ",a", and a blank `text`, which is one
// empty item) stays in the list as "" at its place, so the caller reports it with its own message
// and in list order: the first bad item is the one named, whatever is wrong with it.
std::vector<std::string> split_list(std::string_view text, char sep = ',');

// Numbers on the command line are plain decimal, whatever a C library would also accept.
// An integer is an optional '-' and digits only: leading zeros are decimal ("010" is 10); no '+',
// no white space, no 0x/0o/0b prefixes, no exponent. A number is an optional '-', digits with at
// most one '.', and an optional exponent (e or E, optional sign, digits); it must be finite: no
// inf, nan or hex floats. Each throws a UsageError that starts with `what` ("--num-iters '0x10'
// is not a decimal integer (hex, octal and binary prefixes are not accepted)"; "... is too large").
int64_t parse_decimal_int(std::string_view text, std::string_view what);
// Unsigned: also refuses a leading '-' ("--seed must be >= 0, got '-1'").
uint64_t parse_decimal_uint(std::string_view text, std::string_view what);
double parse_decimal_number(std::string_view text, std::string_view what);

// `text` with control characters (ASCII 0-31 and 127, and U+0080-U+009F in UTF-8) and bytes
// that are not UTF-8 (a raw 0x9b is CSI to an 8-bit terminal) replaced by '?': for strings from
// files and the command line that end up on a terminal (every stderr line).
std::string printable(std::string_view text);
// The same rule for whole reports on stdout: printable() that keeps newlines and tabs. Every
// stdout writer goes through it (cli/cli_util.hpp print_stdout), so no string of outside origin
// (a device or config name, a cell's reason, a config.json's model_type) reaches a terminal raw.
std::string terminal_text(std::string_view text);

// `text` made printable and cut to `max_chars` bytes (never inside a UTF-8 character), with
// "... (N bytes)" when it was cut: for quoting values from files, flags and library messages.
std::string clip_text(std::string_view text, size_t max_chars = 200);

// Whether `text` is well-formed UTF-8 (what JSON text must be).
bool valid_utf8(std::string_view text);
// `text` as well-formed UTF-8 without losing a byte: unchanged when it is valid; otherwise each
// byte outside a UTF-8 sequence written "\xHH" and each backslash doubled, so the original can
// be told back (a file name such as "r\xff.json" from the command line, stored in a result).
std::string utf8_escaped(std::string_view text);

// Names are matched in any case (ASCII): the one lower-casing helper of the project.
std::string ascii_lower(std::string_view text);
bool iequals(std::string_view a, std::string_view b);

std::string format_thousands(int64_t v);  // 15872 -> "15,872"; INT64_MIN too

// ---- names in any case: the one helper every enum's names go through ----------------------

// ascii_lower() and iequals() (core/util/text_util.hpp) do the comparing.
// An enum's names: the first spelling of each value is how it is written (JSON, reports); the
// others are accepted aliases. Every lookup ignores case.
template <class E>
struct EnumNames {
  struct Entry {
    E value;
    std::vector<std::string> names;
  };
  std::vector<Entry> entries;
  const char* name(E v) const {
    for (const Entry& e : entries)
      if (e.value == v) return e.names.front().c_str();
    return "?";
  }
  std::optional<E> find(std::string_view text) const {
    for (const Entry& e : entries)
      for (const std::string& n : e.names)
        if (iequals(n, text)) return e.value;
    return std::nullopt;
  }
  std::vector<std::string> canonical() const {
    std::vector<std::string> out;
    for (const Entry& e : entries) out.push_back(e.names.front());
    return out;
  }
};

// "a", "a or b", "a, b or c" (quote: each name in double quotes, as JSON messages write them).
std::string names_list(const std::vector<std::string>& names, bool quote = false);

}  // namespace gs

#include "core/util/text_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/util/error.hpp"

namespace gs {

std::string trim(std::string_view text) {
  const auto space = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> items;
  while (true) {
    const size_t at = text.find(sep);
    items.push_back(trim(text.substr(0, at)));
    if (at == std::string_view::npos) return items;
    text.remove_prefix(at + 1);
  }
}

namespace {

bool digits_only(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

UsageError not_an_integer(std::string_view text, std::string_view what) {
  std::string_view t = text;
  if (!t.empty() && (t.front() == '-' || t.front() == '+')) t.remove_prefix(1);
  const bool prefixed = t.size() >= 2 && t[0] == '0' && std::string_view("xXoObB").find(t[1]) != std::string_view::npos;
  return UsageError(fmt::format("{} '{}' is not a decimal integer{}", what, printable(text),
                                prefixed ? " (hex, octal and binary prefixes are not accepted)" : ""));
}

}  // namespace

int64_t parse_decimal_int(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(fmt::format("{} is empty", what));
  const bool negative = text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (!digits_only(digits)) throw not_an_integer(text, what);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(fmt::format("{} '{}' is too {}", what, printable(text), negative ? "small" : "large"));
  if (ec != std::errc() || ptr != text.data() + text.size()) throw not_an_integer(text, what);
  return v;
}

uint64_t parse_decimal_uint(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(fmt::format("{} is empty", what));
  if (text.front() == '-') {
    if (!digits_only(text.substr(1))) throw not_an_integer(text, what);
    throw UsageError(fmt::format("{} must be >= 0, got '{}'", what, printable(text)));
  }
  if (!digits_only(text)) throw not_an_integer(text, what);
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(fmt::format("{} '{}' is too large (at most {})", what, printable(text),
                                 std::numeric_limits<uint64_t>::max()));
  if (ec != std::errc() || ptr != text.data() + text.size()) throw not_an_integer(text, what);
  return v;
}

double parse_decimal_number(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(fmt::format("{} is empty", what));
  const auto bad = [&] {
    return UsageError(fmt::format("{} '{}' is not a finite decimal number", what, printable(text)));
  };
  // [-] digits [. digits] [(e|E) [+|-] digits], at least one digit in the mantissa
  size_t i = 0, mantissa_digits = 0;
  const auto run = [&] {
    size_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i, ++n;
    return n;
  };
  if (i < text.size() && text[i] == '-') ++i;
  mantissa_digits += run();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa_digits += run();
  }
  if (mantissa_digits == 0) throw bad();
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (run() == 0) throw bad();
  }
  if (i != text.size()) throw bad();
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) throw bad();
  return v;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x20 || ch == 0x7f) {
      out += '?';
    } else if (ch == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      out += '?';  // a C1 control (U+0080-U+009F) in UTF-8
      ++i;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lo = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lo(a[i]) != lo(b[i])) return false;
  }
  return true;
}

std::string format_thousands(int64_t v) {
  // The magnitude as unsigned: -v overflows for INT64_MIN.
  std::string s = std::to_string(v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
  std::string out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out.push_back(',');
    out.push_back(*it);
    ++n;
  }
  if (v < 0) out.push_back('-');
  std::reverse(out.begin(), out.end());
  return out;
}

std::string names_list(const std::vector<std::string>& names, bool quote) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += quote ? "\"" + names[i] + "\"" : names[i];
  }
  return out;
}

}  // namespace gs

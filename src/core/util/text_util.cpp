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
  return UsageError(fmt::format("{} '{}' is not a decimal integer{}", what, clip_text(text, 40),
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
    throw UsageError(fmt::format("{} '{}' is too {}", what, clip_text(text, 40), negative ? "small" : "large"));
  if (ec != std::errc() || ptr != text.data() + text.size()) throw not_an_integer(text, what);
  return v;
}

uint64_t parse_decimal_uint(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(fmt::format("{} is empty", what));
  if (text.front() == '-') {
    if (!digits_only(text.substr(1))) throw not_an_integer(text, what);
    throw UsageError(fmt::format("{} must be >= 0, got '{}'", what, clip_text(text, 40)));
  }
  if (!digits_only(text)) throw not_an_integer(text, what);
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(fmt::format("{} '{}' is too large (at most {})", what, clip_text(text, 40),
                                 std::numeric_limits<uint64_t>::max()));
  if (ec != std::errc() || ptr != text.data() + text.size()) throw not_an_integer(text, what);
  return v;
}

double parse_decimal_number(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(fmt::format("{} is empty", what));
  const auto bad = [&] {
    return UsageError(fmt::format("{} '{}' is not a finite decimal number", what, clip_text(text, 40)));
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

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (1-4), or 0 when the byte there does
// not start one (a stray continuation byte, an overlong form, a surrogate, a truncated sequence).
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c == 0xe0) n = 3, lo = 0xa0;
  else if (c == 0xed) n = 3, hi = 0x9f;  // no UTF-16 surrogates
  else if (c >= 0xe1 && c <= 0xef) n = 3;
  else if (c == 0xf0) n = 4, lo = 0x90;
  else if (c == 0xf4) n = 4, hi = 0x8f;
  else if (c >= 0xf1 && c <= 0xf3) n = 4;
  else return 0;
  if (i + n > text.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  return n;
}

// The one terminal-safety rule, for stderr (printable) and stdout (terminal_text).
std::string terminal_safe(std::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x80) {
      const bool kept = ch >= 0x20 ? ch != 0x7f : keep_lines && (ch == '\n' || ch == '\t');
      out += kept ? static_cast<char>(ch) : '?';
      ++i;
      continue;
    }
    const size_t n = utf8_sequence(text, i);
    if (n == 0 || (n == 2 && ch == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f)) {
      out += '?';  // not UTF-8 (a raw 0x9b is CSI to an 8-bit terminal), or a C1 control U+0080-U+009F
      i += n == 0 ? 1 : n;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view text) { return terminal_safe(text, false); }

std::string terminal_text(std::string_view text) { return terminal_safe(text, true); }

std::string clip_text(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return printable(text);
  size_t cut = max_chars;
  // Do not cut a UTF-8 sequence in two: back up to the first byte of the character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", printable(text.substr(0, cut)), text.size());
}

std::string utf8_escaped(std::string_view text) {
  if (valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[i]));
      ++i;
    } else if (text[i] == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
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

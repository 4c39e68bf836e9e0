// Helpers shared by the gemmscope command and its subcommands (plot, compare) for CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/input_file.hpp"
#include "core/error.hpp"
#include "core/text_util.hpp"

namespace gs::cli {

// A value given as an empty string ("--shapes ''", "-o ''") is a usage error, never "use the
// default": UsageError "--shapes is empty". Call after app.parse().
inline void reject_empty_values(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_type_size() == 0) continue;  // not given, or a flag
    for (const std::string& v : opt->results())
      if (v.empty()) throw UsageError(fmt::format("{} is empty", opt->get_name()));
  }
}

// A CLI11 parse error on one line ("gemmscope plot: error: A is required (see --help)"), not
// CLI11's two ("...\nRun with --help for more information.").
inline void print_parse_error(const char* command, const CLI::ParseError& e) {
  // CLI11 quotes the offending argument whole: cut (and made printable) like every quoted value.
  fmt::print(stderr, "{}: error: {} (see --help)\n", command, clip_text(e.what(), 300));
}

// Edit distance with adjacent transpositions ("szie" -> "size" is one edit).
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The option of `app` a mistyped `--name` most likely meant, or "": the nearest spelling within a
// few edits (--hidden-szie -> --hidden-size), else an option whose name ends in the typed words
// (--batch-size -> --micro_batch_size). '_' and '-' count as the same character, case is ignored.
inline std::string suggest_option(const CLI::App& app, const std::string& typed) {
  auto norm = [](std::string s) {
    for (char& ch : s) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::string bare = typed.substr(0, typed.find('='));
  while (!bare.empty() && bare.front() == '-') bare.erase(0, 1);
  const std::string want = norm(bare);
  if (want.empty()) return {};
  std::string raw = bare;
  for (char& ch : raw) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string best, by_suffix;
  // Ties between spellings of one option (--hidden_size, --hidden-size) go to the one typed alike.
  size_t best_d = 2 * (std::max<size_t>(2, want.size() / 4) + 1);
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) {
      const size_t d = 2 * edit_distance(want, norm(name)) + (edit_distance(raw, name) > edit_distance(want, norm(name)));
      if (d < best_d) best_d = d, best = "--" + name;
      const std::string n = norm(name);
      if (by_suffix.empty() && n.size() > want.size() && n.compare(n.size() - want.size(), want.size(), want) == 0 &&
          n[n.size() - want.size() - 1] == '-')
        by_suffix = opt->get_name();
    }
  }
  return !best.empty() ? best : by_suffix;
}

// Arguments CLI11 left over (app.allow_extras()): a UsageError naming each unknown option in the
// order typed, with a suggestion where one is close ("unknown option --hidden-szie (did you mean
// --hidden-size?)"). Values that followed an unknown option are not named separately.
inline void reject_extras(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return;
  std::vector<std::string> items;
  for (const std::string& x : extras) {
    if (x.size() < 2 || x[0] != '-') continue;
    const std::string hint = suggest_option(app, x);
    items.push_back(hint.empty() ? printable(x) : fmt::format("{} (did you mean {}?)", printable(x), hint));
  }
  if (items.empty()) throw UsageError(fmt::format("unexpected argument '{}'", printable(extras.front())));
  std::string list;
  for (const std::string& i : items) list += (list.empty() ? "" : ", ") + i;
  throw UsageError(fmt::format("unknown option{} {}", items.size() > 1 ? "s" : "", list));
}

}  // namespace gs::cli

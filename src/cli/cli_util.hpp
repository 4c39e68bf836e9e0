// Helpers shared by the gemmscope command and its subcommands (plot, compare) for CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/io/input_file.hpp"
#include "core/run/settings.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"
#include "cli/console.hpp"

namespace gs::cli {

// --mode for a subcommand (predict, compare, plot): the run-settings registry's flag (one name,
// one set of mode names, core/run/settings.hpp mode_flag, modes_from_flag), with the subcommand's
// own help: what --mode selects there. The value is read with modes_from_flag or mode_from_string.
inline CLI::Option* add_mode_option(CLI::App& app, std::string& dst, const std::string& help) {
  return app.add_option(mode_flag(), dst, help + "; names in any case, old names (autocast-shared, autocast) too");
}

// A value given as an empty string ("--shapes ''", "-o ''") is a usage error, never "use the
// default": UsageError "--shapes is empty". Call after app.parse(). An option whose value may be
// left out (--sequence-parallel written bare) is exempt: CLI11 records the missing value as "".
inline void reject_empty_values(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_type_size() == 0) continue;  // not given, or a flag
    if (opt->get_expected_min() == 0) continue;
    for (const std::string& v : opt->results())
      if (v.empty()) throw UsageError(fmt::format("{} is empty", opt->get_name()));
  }
}

// A CLI11 parse error on one line ("gemmscope plot: error: A is required (see --help)"), not
// CLI11's two ("...\nRun with --help for more information.").
inline void print_parse_error(const char* command, const CLI::ParseError& e) {
  // CLI11 quotes the offending argument whole: cut (and made printable) like every quoted value.
  print_error(std::string(command) + ": error: ", std::string(e.what()) + " (see --help)");
}

// The option of `app` a mistyped `--name` most likely meant, or "" (core/util/suggest.hpp's rule over
// every spelling of every option): the nearest spelling (--hidden-szie -> --hidden-size), else the
// option whose words begin with the typed words (--seq-len -> --sequence_length), else one whose
// name ends in them (--batch-size -> --micro_batch_size). Several options: "--a or --b".
inline std::string suggest_option(const CLI::App& app, const std::string& typed) {
  std::string bare = typed.substr(0, typed.find('='));
  std::vector<std::string> names;
  std::vector<const CLI::Option*> owner;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& name : opt->get_lnames()) {
      names.push_back("--" + name);
      owner.push_back(opt);
    }
  const std::vector<std::string> hits = suggestions(bare, names);
  if (hits.size() == 1) return hits.front();  // one spelling: as it is
  std::vector<const CLI::Option*> opts;
  for (const std::string& h : hits) {
    const CLI::Option* o = owner[static_cast<size_t>(std::find(names.begin(), names.end(), h) - names.begin())];
    if (std::find(opts.begin(), opts.end(), o) == opts.end()) opts.push_back(o);
  }
  std::string out;
  for (size_t i = 0; i < opts.size(); ++i) out += (i == 0 ? "" : " or ") + opts[i]->get_name();
  return out;
}

// Arguments CLI11 left over (app.allow_extras()): a UsageError naming each unknown option in the
// order typed, with a suggestion where one is close ("unknown option --hidden-szie (did you mean
// --hidden-size?)"). Values that followed an unknown option are not named separately.
inline void reject_extras(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return;
  // Each name cut to 60 bytes and at most four named: the line stays one short line whatever
  // was typed (suggestions() gives none for a name over 64 characters).
  constexpr size_t kNamed = 4;
  std::vector<std::string> items;
  size_t unknown = 0;
  for (const std::string& x : extras) {
    if (x.size() < 2 || x[0] != '-') continue;
    if (++unknown > kNamed) continue;
    const std::string hint = suggest_option(app, x);
    items.push_back(hint.empty() ? clip_text(x, 60) : fmt::format("{} (did you mean {}?)", clip_text(x, 60), hint));
  }
  if (items.empty()) throw UsageError(fmt::format("unexpected argument '{}'", clip_text(extras.front(), 80)));
  std::string list;
  for (const std::string& i : items) list += (list.empty() ? "" : ", ") + i;
  if (unknown > kNamed) list += fmt::format(" and {} more", unknown - kNamed);
  throw UsageError(fmt::format("unknown option{} {}", unknown > 1 ? "s" : "", list));
}

}  // namespace gs::cli

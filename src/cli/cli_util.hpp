// Helpers shared by the gemmscope command and its subcommands (plot, compare) for CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

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
  fmt::print(stderr, "{}: error: {} (see --help)\n", command, printable(e.what()));
}

}  // namespace gs::cli

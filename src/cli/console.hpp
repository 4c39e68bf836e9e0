// The one way to stdout and the one refusal line on stderr (cli_util.hpp includes it;
// cmd_fleet.cpp and cmd_mpi.cpp use it alone).
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/util/text_util.hpp"

namespace gs::cli {

// Every report, table and line gemmscope prints on stdout goes through here: terminal_text()
// (core/util/text_util.hpp) replaces control characters other than newlines and tabs, C1
// controls and bytes that are not UTF-8, so a device name, a config's name or model_type, a
// cell's reason or a note from a result file never moves the cursor, retitles the terminal or
// clears the screen. stderr lines go through printable(), the same rule on one line.
inline void print_stdout(std::string_view text) {
  const std::string safe = terminal_text(text);
  std::fwrite(safe.data(), 1, safe.size(), stdout);
}

// A refusal is one line of at most about 400 bytes: values are clipped where they are quoted
// (clip_text, with their byte count), and the whole message is cut here as well, so no input, file
// name or library message can make it longer.
inline constexpr size_t kMaxMessageBytes = 360;

// "{prefix}{message}\n" on stderr ("gemmscope plot: error: " + the message), printable and cut.
inline void print_error(std::string_view prefix, std::string_view message) {
  const std::string line = std::string(prefix) + clip_text(message, kMaxMessageBytes) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace gs::cli

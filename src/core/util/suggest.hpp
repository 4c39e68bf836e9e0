// "Did you mean": one rule for every name a user types (flags, model presets, subcommands, enum
// values such as modes, precisions and GPUs). Case is ignored and '_' and '-' count alike.
//   1. known names within a few edits (adjacent transpositions count once): the nearest, the one
//      spelled alike ('_' or '-' as typed) before another spelling, every one as near listed;
//   2. else the names whose words begin with the typed words, in order ("mixtral" ->
//      "mixtral-8x7b", "seq-len" -> "seq_length", "micro-batch" -> "micro_batch_size");
//   3. else the names that end in the typed words ("batch-size" -> "micro_batch_size").
// At most three names come back, in the order the candidates list them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace gs {

// Names typed longer than this get no suggestion (no option, preset, mode or GPU is near that
// long): a 130 KB argument costs nothing.
constexpr size_t kMaxSuggestChars = 64;

// Edit distance with adjacent transpositions ("szie" -> "size" is one edit).
size_t edit_distance(const std::string& a, const std::string& b);
// The same, computed only within `limit` of the diagonal (O(length x limit)): the distance when it
// is at most `limit`, else limit + 1.
size_t bounded_edit_distance(const std::string& a, const std::string& b, size_t limit);

// The candidates `typed` most likely meant (rules above); empty when none is close.
std::vector<std::string> suggestions(const std::string& typed, const std::vector<std::string>& candidates);

// " (did you mean X?)", " (did you mean X or Y?)", or "" when nothing is close: appended to a
// message that names what was typed.
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates);

}  // namespace gs

// Small text helpers for the command-line parsers (--shapes, --precisions, --threshold).
#pragma once
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

}  // namespace gs

#include "core/text_util.hpp"

#include <cctype>

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

}  // namespace gs

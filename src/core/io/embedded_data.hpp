// gemmscope's data files as they were when the binary was built (cmake/embed_data.cmake generates
// the table from data/ at build time): the GPU spec database (gpus.json), the published efficiency
// priors (priors.json), the measured prediction errors (predict_errors.json) and the cluster presets
// (clusters.json). A binary copied
// alone to a GPU node still has them; a file next to the binary or named by the environment
// overrides each (cli/commands.hpp: find_data_file).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace gs {

// The built-in copy of data/`name`, or nullopt for a file not built in.
std::optional<std::string_view> embedded_data(std::string_view name);

// How messages and notes name the built-in copy of data/`name`.
inline std::string embedded_data_name(std::string_view name) {
  return "the built-in copy of data/" + std::string(name);
}

}  // namespace gs

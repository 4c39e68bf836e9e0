// Error types of the core. A UsageError is the user's mistake: the CLI prints its message on
// one line and exits with status 2.
#pragma once
#include <stdexcept>
#include <string>

namespace gs {

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace gs

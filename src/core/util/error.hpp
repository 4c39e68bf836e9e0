// Error types of the core. A UsageError is the user's mistake: the CLI prints its message on
// one line and exits with status 2.
#pragma once
#include <stdexcept>
#include <string>

namespace gs {

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

// A cell that cannot be measured here, for a reason outside gemmscope: a library refuses the recipe,
// shape or device (cuBLASLt NOT_SUPPORTED, a CUTLASS status, an NVRTC compile), an optional runtime
// is missing, the GPU is out of memory. The cell is N/A with this message. The engine also reads
// CUDA and cuBLASLt errors and std::invalid_argument (a provider's "cannot do this after all") that
// way; anything else thrown while a cell is measured is a defect in gemmscope, and the run stops
// with exit 70 and its message instead of reading as N/A.
struct Unsupported : std::runtime_error {
  explicit Unsupported(const std::string& what) : std::runtime_error(what) {}
};

// parse(text), with `where` in front of the UsageError it throws ("a.json: \"modes\": unknown mode ...");
// every other exception passes through as it is.
template <class Parse>
auto parsed_at(const std::string& where, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const UsageError& e) {
    throw UsageError(where + ": " + e.what());
  }
}

}  // namespace gs

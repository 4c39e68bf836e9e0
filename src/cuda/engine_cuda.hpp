// The CUDA implementation of gs::Engine (core/run/engine.hpp).
#pragma once
#include <memory>
#include <string>

#include "core/run/engine.hpp"

namespace gs::cuda {

// A ready engine on options.device, or nullptr with `why` set (no driver, no device, bad index).
std::unique_ptr<Engine> make_engine(const EngineOptions& options, std::string& why);

}  // namespace gs::cuda

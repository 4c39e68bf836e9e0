// A provider as the engine hands it over: made, then configured with the run's options.
#pragma once

#include <memory>

#include "core/run/engine.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/providers/provider.hpp"

namespace gs::test {

inline std::unique_ptr<cuda::GemmProvider> configured(std::unique_ptr<cuda::GemmProvider> pv, const EngineOptions& o) {
  pv->configure(o);
  return pv;
}

// The CUTLASS provider quantizing with recipe options `r` (the FP8 cells quantize as cuBLASLt's).
inline std::unique_ptr<cuda::GemmProvider> cutlass_with(const RecipeOptions& r) {
  EngineOptions o;
  o.recipe = r;
  return configured(cuda::make_cutlass_provider(), o);
}

}  // namespace gs::test

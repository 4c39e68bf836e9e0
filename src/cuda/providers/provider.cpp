#include "cuda/providers/provider.hpp"

#include "core/providers/provider.hpp"

namespace gs::cuda {

LoopBody ProviderRun::body(cudaStream_t s) {
  LoopBody b;
  b.cost = [this](int) { return ops(); };
  b.enqueue = [this, s](int) { iteration(s); };
  return b;
}

std::unique_ptr<GemmProvider> make_provider(const std::string& name, const EngineResources& res) {
  if (name == kProviderCublasLt) return make_cublaslt_provider(res);
  if (name == kProviderCutlass) return make_cutlass_provider();
  if (name == kProviderDeepGemm) return make_deepgemm_provider();
  return nullptr;
}

}  // namespace gs::cuda

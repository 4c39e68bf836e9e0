#include "cuda/providers/provider.hpp"

namespace gs::cuda {

std::vector<std::unique_ptr<GemmProvider>> make_providers() {
  std::vector<std::unique_ptr<GemmProvider>> out;
  out.push_back(make_cutlass_provider());
  out.push_back(make_deepgemm_provider());
  return out;
}

}  // namespace gs::cuda

// The DeepGEMM provider (deepgemm_provider.cpp; made by make_deepgemm_provider(), provider.hpp).
// What tests need beyond the provider interface: where a grouped (M) run writes its output.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda/providers/provider.hpp"

namespace gs::cuda {

// The output of a DeepGEMM M-grouped contiguous run (FP8 1d2d or BF16): BF16 [rows, n]; expert e's real rows start
// at row_offsets[e] (segments of 128-row multiples; the padding rows are DeepGEMM's, unused).
struct DeepGemmGroupedOutput {
  const void* d = nullptr;
  std::vector<int64_t> row_offsets;
  int64_t rows = 0;
};
// nullopt unless `run` is a DeepGEMM M-grouped run. (A K-grouped Wgrad writes the sources'
// per-expert FP32 gradients in place.)
std::optional<DeepGemmGroupedOutput> deepgemm_grouped_output(const ProviderRun& run);

}  // namespace gs::cuda

// Internal to the DeepGEMM provider (deepgemm_provider.cpp, deepgemm_bf16_runs.cpp): what its
// cell runs share (prepare bookkeeping, the contiguous expert layout) and the BF16 runs' makers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/run/engine.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/providers/deepgemm/deepgemm_provider.hpp"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/provider.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda::dgrun {

// What the provider's prepares did over the run (the run's notes).
struct PrepareTotals {
  int compiled = 0, disk_hits = 0, memory_hits = 0;
  double compile_s = 0;
  std::vector<std::string> store_notes;
  void add(const dg::PrepareInfo& i);
};

std::string prepare_text(const dg::PrepareInfo& i);

// Copies each expert's real rows of a token-major [sum(src sizes), width] BF16 buffer into a
// zeroed buffer whose segments are `padded` rows (DeepGEMM's 128-row alignment). Returns the offsets.
std::vector<int64_t> copy_segments(const GroupedSources& src, const DeviceBuffer& from, int64_t width,
                                   const std::vector<int64_t>& padded, DeviceBuffer& to, cudaStream_t s);

// BF16 cells (sm90_bf16_gemm): dense Fprop/Dgrad/Wgrad on the engine's BF16 operands as they are
// stored (K- or MN-major); grouped: the M-grouped contiguous Fprop/Dgrad, the K-grouped Wgrad.
std::unique_ptr<ProviderRun> make_bf16_dense(const Gemm& g, const Recipe& r, GemmSources& src, PrepareTotals& totals);
std::unique_ptr<ProviderRun> make_bf16_grouped(GroupedSources& src, const Recipe& r, PrepareTotals& totals);
// The BF16 M-grouped run's output (nullopt for any other run).
std::optional<DeepGemmGroupedOutput> bf16_grouped_output(const ProviderRun& run);

}  // namespace gs::cuda::dgrun

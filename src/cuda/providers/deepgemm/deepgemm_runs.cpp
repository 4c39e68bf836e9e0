#include "cuda/providers/deepgemm/deepgemm_runs.hpp"

#include <fmt/format.h>

#include <numeric>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda::dgrun {

void PrepareTotals::add(const dg::PrepareInfo& i) {
  if (i.memory_hit) ++memory_hits;
  else if (i.cache_hit) ++disk_hits;
  else { ++compiled; compile_s += i.compile_seconds; }
  if (!i.cache_note.empty() && store_notes.size() < 3) store_notes.push_back(i.cache_note);
}

std::string prepare_text(const dg::PrepareInfo& i) {
  if (i.memory_hit) return "kernel already loaded";
  if (i.cache_hit) return "cubin from the disk cache";
  return fmt::format("NVRTC compile {:.1f} s at prepare time", i.compile_seconds);
}

std::vector<int64_t> copy_segments(const GroupedSources& src, const DeviceBuffer& from, int64_t width,
                                   const std::vector<int64_t>& padded, DeviceBuffer& to, cudaStream_t s) {
  constexpr size_t kBf16 = 2;
  const int64_t total = std::accumulate(padded.begin(), padded.end(), int64_t{0});
  to = DeviceBuffer(static_cast<size_t>(total * width) * kBf16);
  if (to.bytes()) GS_CUDA(cudaMemsetAsync(to.get(), 0, to.bytes(), s));
  std::vector<int64_t> off;
  int64_t o = 0;
  for (size_t e = 0; e < padded.size(); ++e) {
    off.push_back(o);
    const int64_t rows = src.gemm.group[e];
    if (rows > 0)
      GS_CUDA(cudaMemcpyAsync(to.get<char>() + static_cast<size_t>(o * width) * kBf16,
                              from.get<char>() + static_cast<size_t>(src.offsets[e] * width) * kBf16,
                              static_cast<size_t>(rows * width) * kBf16, cudaMemcpyDeviceToDevice, s));
    o += padded[e];
  }
  return off;
}

}  // namespace gs::cuda::dgrun

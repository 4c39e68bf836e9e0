// CUTLASS grouped family Fp8Block1x128x128x128Bf16 (cutlass_grouped.hpp): one instantiation per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_w128_bf16(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedFp8Block</*kScaleN=*/128, cutlass::bfloat16_t>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Fp8Block1x128x128x128Bf16, groups, device, /*beta=*/0.0f);
}

}  // namespace gs::cuda::cutlass_kernels

// CUTLASS grouped family Fp8Block1x128x1x128F32Acc (cutlass_grouped.hpp): one instantiation per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_row_f32acc(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedFp8Block</*kScaleN=*/1, float>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc, groups, device, /*beta=*/1.0f);
}

}  // namespace gs::cuda::cutlass_kernels

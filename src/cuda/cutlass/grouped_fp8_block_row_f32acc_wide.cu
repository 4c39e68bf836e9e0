// CUTLASS grouped family Fp8Block1x128x1x128F32Acc, wide tile (128x256, cutlass_grouped.hpp CutlassTile): one instantiation
// per translation unit.
#include "cuda/cutlass/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_row_f32acc_wide(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedFp8Block</*kScaleN=*/1, float, 256>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc, groups, device, /*beta=*/1.0f);
}

}  // namespace gs::cuda::cutlass_kernels

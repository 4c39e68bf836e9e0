// CUTLASS grouped family Bf16ColRowF32Acc, wide tile (128x256, cutlass_grouped.hpp CutlassTile): one instantiation
// per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_f32acc_wide(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedBf16<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, float, 256>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Bf16ColRowF32Acc, groups, device, /*beta=*/1.0f);
}

}  // namespace gs::cuda::cutlass_kernels

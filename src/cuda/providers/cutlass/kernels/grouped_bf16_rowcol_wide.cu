// CUTLASS grouped family Bf16RowCol, wide tile (128x256, cutlass_grouped.hpp CutlassTile): one instantiation
// per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowcol_wide(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedBf16<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, cutlass::bfloat16_t, 256>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Bf16RowCol, groups, device, /*beta=*/0.0f);
}

}  // namespace gs::cuda::cutlass_kernels

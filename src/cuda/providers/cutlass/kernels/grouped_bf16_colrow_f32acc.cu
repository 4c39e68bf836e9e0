// CUTLASS grouped family Bf16ColRowF32Acc (cutlass_grouped.hpp): one instantiation per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_f32acc(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedBf16<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, float>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Bf16ColRowF32Acc, groups, device, /*beta=*/1.0f);
}

}  // namespace gs::cuda::cutlass_kernels

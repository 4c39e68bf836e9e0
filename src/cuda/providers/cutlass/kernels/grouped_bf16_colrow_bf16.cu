// CUTLASS grouped family Bf16ColRowBf16 (cutlass_grouped.hpp): one instantiation per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_bf16(const std::vector<CutlassGroup>& groups, int device) {
  using K = GroupedBf16<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, cutlass::bfloat16_t>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Bf16ColRowBf16, groups, device, /*beta=*/0.0f);
}

}  // namespace gs::cuda::cutlass_kernels

// CUTLASS grouped family Fp8E4m3E4m3Bf16Fast, wide tile (128x256, cutlass_grouped.hpp CutlassTile): one instantiation
// per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e4m3_e4m3_bf16_fast_wide(const std::vector<CutlassGroup>& groups, int device, const float* alpha) {
  using K = GroupedFp8<cutlass::float_e4m3_t, cutlass::float_e4m3_t, cutlass::bfloat16_t, /*kFastAccum=*/true, 256>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast, groups, device, /*beta=*/0.0f, alpha);
}

}  // namespace gs::cuda::cutlass_kernels

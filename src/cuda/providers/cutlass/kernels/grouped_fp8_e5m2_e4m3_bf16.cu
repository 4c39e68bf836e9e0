// CUTLASS grouped family Fp8E5m2E4m3Bf16 (cutlass_grouped.hpp): one instantiation per translation unit.
#include "cuda/providers/cutlass/kernels/grouped_kernel.cuh"

namespace gs::cuda::cutlass_kernels {

std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e5m2_e4m3_bf16(const std::vector<CutlassGroup>& groups, int device, const float* alpha) {
  using K = GroupedFp8<cutlass::float_e5m2_t, cutlass::float_e4m3_t, cutlass::bfloat16_t, /*kFastAccum=*/false>;
  return std::make_unique<Launch<K>>(CutlassGroupedFamily::Fp8E5m2E4m3Bf16, groups, device, /*beta=*/0.0f, alpha);
}

}  // namespace gs::cuda::cutlass_kernels

// Scale-factor layouts between the project's quantizers (src/cuda/quant/quantize.cuh, cuBLASLt's
// layouts) and DeepGEMM's. Run outside timed regions (pre-quantized mode prepares them once).
#pragma once
#include <cuda_runtime.h>

namespace gs::dg {

// 1x128 scales: ours s[kb * outer + o] (cuBLASLt VEC128_32F) -> DeepGEMM's column-major,
// TMA-aligned [kb][align4(outer)] (rows beyond `outer` are zero). `dst` holds
// ceil(K/128) * align4(outer) floats.
void scales_1x128_to_deepgemm(const float* src, int outer, int k, float* dst, cudaStream_t s);
inline int scales_1x128_deepgemm_count(int outer, int k) { return ((k + 127) / 128) * ((outer + 3) / 4 * 4); }

// 128x128 scales of `groups` stacked weights [groups * n, k]: ours s[ob * align4(kb) + kb]
// (cuBLASLt BLK128x128, per group when the groups were quantized one by one, see
// `src_group_stride`) -> DeepGEMM's K-major [g][ceil(n/128)][ceil(k/128)].
void scales_128x128_to_deepgemm(const float* src, int n, int k, int groups, long src_group_stride, float* dst, cudaStream_t s);
inline int scales_128x128_deepgemm_count(int n, int k, int groups) { return groups * ((n + 127) / 128) * ((k + 127) / 128); }

}  // namespace gs::dg

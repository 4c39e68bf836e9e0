#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/deepgemm/deepgemm_layouts.cuh"

namespace gs::dg {

namespace {

__global__ void k_1x128(const float* src, int outer, int kb, int outer4, float* dst) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long>(kb) * outer4) return;
  const int o = static_cast<int>(i % outer4), b = static_cast<int>(i / outer4);
  dst[i] = o < outer ? src[static_cast<long>(b) * outer + o] : 0.f;
}

__global__ void k_128x128(const float* src, int nb, int kb, int kb4, int groups, long gstride, float* dst) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  const long per_group = static_cast<long>(nb) * kb;
  if (i >= per_group * groups) return;
  const long g = i / per_group, r = i % per_group;
  const int ob = static_cast<int>(r / kb), b = static_cast<int>(r % kb);
  dst[i] = src[g * gstride + static_cast<long>(ob) * kb4 + b];
}

}  // namespace

void scales_1x128_to_deepgemm(const float* src, int outer, int k, float* dst, cudaStream_t s) {
  const int kb = (k + 127) / 128, outer4 = (outer + 3) / 4 * 4;
  const long n = static_cast<long>(kb) * outer4;
  if (n == 0) return;
  k_1x128<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(src, outer, kb, outer4, dst);
  GS_CUDA_LAUNCH();
}

void scales_128x128_to_deepgemm(const float* src, int n, int k, int groups, long src_group_stride, float* dst, cudaStream_t s) {
  const int nb = (n + 127) / 128, kb = (k + 127) / 128, kb4 = (kb + 3) / 4 * 4;
  const long total = static_cast<long>(nb) * kb * groups;
  if (total == 0) return;
  k_128x128<<<static_cast<unsigned>((total + 255) / 256), 256, 0, s>>>(src, nb, kb, kb4, groups, src_group_stride, dst);
  GS_CUDA_LAUNCH();
}

}  // namespace gs::dg

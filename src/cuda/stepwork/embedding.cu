#include "cuda/stepwork/embedding.hpp"

#include <stdexcept>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda::stepwork {
namespace {

constexpr int kThreads = 256;  // 8 token rows per block, one per warp

// One warp copies one token's row: 16-byte words where the row allows it (cols % 8 == 0).
__global__ void embedding_forward_kernel(const __nv_bfloat16* table, const int64_t* ids, int64_t rows, int64_t cols,
                                         __nv_bfloat16* out) {
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (t >= rows) return;
  const __nv_bfloat16* src = table + ids[t] * cols;
  __nv_bfloat16* dst = out + t * cols;
  if (cols % 8 == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = lane; j < cols / 8; j += 32) d[j] = s[j];
  } else {
    for (int64_t j = lane; j < cols; j += 32) dst[j] = src[j];
  }
}

// One warp adds one token's gradient row into its table row, two values per atomic.
__global__ void embedding_backward_add_kernel(const __nv_bfloat16* grad_out, const int64_t* ids, int64_t rows,
                                              int64_t cols, __nv_bfloat16* grad_table) {
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (t >= rows) return;
  const __nv_bfloat162* g = reinterpret_cast<const __nv_bfloat162*>(grad_out + t * cols);
  __nv_bfloat162* d = reinterpret_cast<__nv_bfloat162*>(grad_table + ids[t] * cols);
  for (int64_t j = lane; j < cols / 2; j += 32) atomicAdd(d + j, g[j]);
}

unsigned warp_blocks(int64_t rows) { return static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads); }

}  // namespace

void embedding_forward(const __nv_bfloat16* table, const int64_t* ids, int64_t rows, int64_t cols,
                       __nv_bfloat16* out, cudaStream_t s) {
  embedding_forward_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(table, ids, rows, cols, out);
  GS_CUDA_LAUNCH();
}

void embedding_backward_zero(__nv_bfloat16* grad_table, int64_t vocab, int64_t cols, cudaStream_t s) {
  GS_CUDA(cudaMemsetAsync(grad_table, 0, static_cast<size_t>(vocab) * static_cast<size_t>(cols) * 2, s));
}

void embedding_backward_add(const __nv_bfloat16* grad_out, const int64_t* ids, int64_t rows, int64_t cols,
                            __nv_bfloat16* grad_table, cudaStream_t s) {
  if (cols % 2 != 0) throw std::invalid_argument("embedding_backward_add: the row width must be even");
  embedding_backward_add_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(grad_out, ids, rows, cols, grad_table);
  GS_CUDA_LAUNCH();
}

}  // namespace gs::cuda::stepwork

#include "cuda/stepwork/loss.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "cuda/common/cuda_check.hpp"
#include "cuda/stepwork/values.cuh"

namespace gs::cuda::stepwork {
namespace {

constexpr int kRowThreads = 1024;  // one block per row of the vocabulary (PyTorch's softmax block size)
constexpr int kFlatThreads = 256;  // elementwise kernels: 4 values per thread

// The row's values this thread owns: f(j, w) for its positions j, w values at a time (a
// compile-time 4 where the row's length allows aligned 4-value accesses, cols % 4 == 0, else 1).
using One = std::integral_constant<int, 1>;
using Four = std::integral_constant<int, 4>;
template <class F>
__device__ __forceinline__ void for_row(int64_t cols, F&& f) {
  if (cols % 4 == 0) {
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * 4; j < cols; j += static_cast<int64_t>(blockDim.x) * 4)
      f(j, Four{});
  } else {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) f(j, One{});
  }
}
// Reads W values at x + j into r / writes them from r.
template <class T, int W>
__device__ __forceinline__ void read(const T* x, int64_t j, std::integral_constant<int, W>, float r[4]) {
  if constexpr (W == 4) load4(x + j, r);
  else r[0] = to_f32(x[j]);
}
template <class T, int W>
__device__ __forceinline__ void write(T* x, int64_t j, std::integral_constant<int, W>, const float r[4]) {
  if constexpr (W == 4) store4(x + j, r);
  else x[j] = from_f32<T>(r[0]);
}

// y = x converted, elementwise (Tensor.float() of BF16 logits; .to(bfloat16) of the FP32 gradient).
template <class In, class Out>
__global__ void convert_kernel(const In* x, Out* y, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i >= n) return;
  float r[4];
  if (i + 4 <= n) {
    load4(x + i, r);
    store4(y + i, r);
  } else {
    for (int64_t k = i; k < n; ++k) y[k] = from_f32<Out>(to_f32(x[k]));
  }
}

// Log-softmax of one FP32 row per block, in three passes as PyTorch's cunn_SoftMaxForward.
__global__ void __launch_bounds__(kRowThreads) log_softmax_kernel(const float* x, float* y, int64_t cols) {
  x += static_cast<int64_t>(blockIdx.x) * cols;
  y += static_cast<int64_t>(blockIdx.x) * cols;
  float m = -3.402823466e38f;
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(x, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) m = fmaxf(m, r[k]);
  });
  m = block_max(m);
  float s = 0.f;
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(x, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) s += expf(r[k] - m);
  });
  const float lse = m + logf(block_sum(s));
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(x, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) r[k] -= lse;
    write(y, j, w, r);
  });
}

// loss = mean over rows of -logp[row, target] (one block).
__global__ void nll_mean_kernel(const float* logp, const int64_t* target, int64_t rows, int64_t cols, float* loss) {
  float s = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s -= logp[r * cols + target[r]];
  s = block_sum(s);
  if (threadIdx.x == 0) *loss = s / static_cast<float>(rows);
}

// The NLL gradient's non-zeros: grad[row, target] = -1/rows (the rest zeroed before).
__global__ void nll_backward_kernel(float* grad, const int64_t* target, int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) grad[r * cols + target[r]] = -1.f / static_cast<float>(rows);
}

// Log-softmax gradient of one row per block: gin = gout - exp(logp) * sum(gout).
__global__ void __launch_bounds__(kRowThreads)
    log_softmax_backward_kernel(const float* gout, const float* logp, float* gin, int64_t cols) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  gout += base, logp += base, gin += base;
  float s = 0.f;
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(gout, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) s += r[k];
  });
  s = block_sum(s);
  for_row(cols, [&](int64_t j, auto w) {
    float g[4], l[4];
    read(gout, j, w, g);
    read(logp, j, w, l);
    for (int k = 0; k < decltype(w)::value; ++k) g[k] -= expf(l[k]) * s;
    write(gin, j, w, g);
  });
}

// Online max and sum of exponentials: (m, s) with s = sum exp(x - m).
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else {
    s += expf(x - m);
  }
}
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = s * expf(m - mm) + s2 * expf(m2 - mm);
  m = mm;
}

// Fused forward, one BF16 row per block read once: the row's log-sum-exp and its loss.
__global__ void __launch_bounds__(kRowThreads) cross_entropy_fused_forward_kernel(
    const __nv_bfloat16* logits, const int64_t* target, int64_t cols, float* row_loss, float* row_lse) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = logits + row * cols;
  float m = -3.402823466e38f, s = 0.f;
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(x, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) online_add(m, s, r[k]);
  });
  for (int o = 16; o > 0; o >>= 1)
    online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  __shared__ float wm[32], ws[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) wm[warp] = m, ws[warp] = s;
  __syncthreads();
  if (warp == 0) {
    const bool has = lane < static_cast<int>(blockDim.x / 32);
    m = has ? wm[lane] : -3.402823466e38f;
    s = has ? ws[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1)
      online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) {
      const float lse = m + logf(s);
      row_lse[row] = lse;
      row_loss[row] = lse - __bfloat162float(x[target[row]]);
    }
  }
}

__global__ void mean_kernel(const float* v, int64_t n, float* mean) {
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *mean = s / static_cast<float>(n);
}

// Fused backward, one row per block: grad = (softmax(x) - onehot(target)) / rows, written in BF16.
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_fused_backward_kernel(const __nv_bfloat16* logits, const int64_t* target, const float* row_lse,
                                        int64_t rows, int64_t cols, __nv_bfloat16* grad) {
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  const float lse = row_lse[row], scale = 1.f / static_cast<float>(rows);
  const int64_t t = target[row];
  for_row(cols, [&](int64_t j, auto w) {
    float r[4];
    read(logits + base, j, w, r);
    for (int k = 0; k < decltype(w)::value; ++k) r[k] = (expf(r[k] - lse) - (j + k == t ? 1.f : 0.f)) * scale;
    write(grad + base, j, w, r);
  });
}

template <class In, class Out>
void convert(const In* x, Out* y, int64_t n, cudaStream_t s) {
  const int64_t blocks = (n + 4 * kFlatThreads - 1) / (4 * kFlatThreads);
  convert_kernel<<<static_cast<unsigned>(blocks), kFlatThreads, 0, s>>>(x, y, n);
  GS_CUDA_LAUNCH();
}

}  // namespace

CrossEntropy::CrossEntropy(bool fused, int64_t rows, int64_t cols, const __nv_bfloat16* logits,
                           const int64_t* targets)
    : fused_(fused), rows_(rows), cols_(cols), logits_(logits), targets_(targets) {
  if (rows < 1 || cols < 1 || rows > (int64_t{1} << 31) - 1)
    throw std::invalid_argument(fmt::format("CrossEntropy: bad shape {} x {}", rows, cols));
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (fused) {
    row_loss_ = DeviceBuffer(static_cast<size_t>(rows) * sizeof(float));
    row_lse_ = DeviceBuffer(static_cast<size_t>(rows) * sizeof(float));
  } else {
    f32_logits_ = DeviceBuffer(n * sizeof(float));
    logp_ = DeviceBuffer(n * sizeof(float));
    f32_grad_ = DeviceBuffer(n * sizeof(float));
  }
  loss_ = DeviceBuffer(sizeof(float));
  grad_ = DeviceBuffer(n * sizeof(__nv_bfloat16));
}

size_t CrossEntropy::owned_bytes(bool fused, int64_t rows, int64_t cols) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  const size_t work = fused ? 2 * static_cast<size_t>(rows) * sizeof(float) : 3 * n * sizeof(float);
  return work + sizeof(float) + n * sizeof(__nv_bfloat16);
}

void CrossEntropy::forward(int piece, cudaStream_t s) {
  const unsigned rows = static_cast<unsigned>(rows_);
  if (fused_) {
    if (piece == 0) {
      cross_entropy_fused_forward_kernel<<<rows, kRowThreads, 0, s>>>(logits_, targets_, cols_,
                                                                        row_loss_.get<float>(), row_lse_.get<float>());
    } else {
      mean_kernel<<<1, kFlatThreads, 0, s>>>(row_loss_.get<float>(), rows_, loss_.get<float>());
    }
    GS_CUDA_LAUNCH();
    return;
  }
  switch (piece) {
    case 0: convert(logits_, f32_logits_.get<float>(), rows_ * cols_, s); break;
    case 1:
      log_softmax_kernel<<<rows, kRowThreads, 0, s>>>(f32_logits_.get<float>(), logp_.get<float>(), cols_);
      GS_CUDA_LAUNCH();
      break;
    default:
      nll_mean_kernel<<<1, kFlatThreads, 0, s>>>(logp_.get<float>(), targets_, rows_, cols_, loss_.get<float>());
      GS_CUDA_LAUNCH();
      break;
  }
}

void CrossEntropy::backward(int piece, cudaStream_t s) {
  const unsigned rows = static_cast<unsigned>(rows_);
  if (fused_) {
    cross_entropy_fused_backward_kernel<<<rows, kRowThreads, 0, s>>>(logits_, targets_, row_lse_.get<float>(), rows_,
                                                                       cols_, grad_.get<__nv_bfloat16>());
    GS_CUDA_LAUNCH();
    return;
  }
  // The NLL gradient goes to f32_grad_, the log-softmax gradient to f32_logits_ (free after the
  // forward's log-softmax; PyTorch allocates a new tensor: the same bytes).
  switch (piece) {
    case 0: GS_CUDA(cudaMemsetAsync(f32_grad_.get(), 0, f32_grad_.bytes(), s)); break;
    case 1: {
      const unsigned blocks = static_cast<unsigned>((rows_ + kFlatThreads - 1) / kFlatThreads);
      nll_backward_kernel<<<blocks, kFlatThreads, 0, s>>>(f32_grad_.get<float>(), targets_, rows_, cols_);
      GS_CUDA_LAUNCH();
      break;
    }
    case 2:
      log_softmax_backward_kernel<<<rows, kRowThreads, 0, s>>>(f32_grad_.get<float>(), logp_.get<float>(),
                                                                f32_logits_.get<float>(), cols_);
      GS_CUDA_LAUNCH();
      break;
    default: convert(f32_logits_.get<float>(), grad_.get<__nv_bfloat16>(), rows_ * cols_, s); break;
  }
}

std::string CrossEntropy::describe(bool backward) const {
  if (fused_)
    return backward ? fmt::format("fused cross-entropy backward: one pass over {} x {} BF16 logits writing the BF16 "
                                  "gradient (FP32 math in registers)", rows_, cols_)
                    : fmt::format("fused cross-entropy forward: one pass over {} x {} BF16 logits (online max and "
                                  "sum, FP32 in registers), then the mean", rows_, cols_);
  return backward ? fmt::format("unfused cross-entropy backward over {} x {} logits as eager PyTorch runs it: NLL "
                                "gradient (FP32 zeroed, targets written), log-softmax gradient (FP32), downcast to BF16",
                                rows_, cols_)
                  : fmt::format("unfused cross-entropy forward over {} x {} logits as eager PyTorch runs it: upcast to "
                                "FP32, log-softmax (max, sum and write passes per row), NLL mean",
                                rows_, cols_);
}

}  // namespace gs::cuda::stepwork

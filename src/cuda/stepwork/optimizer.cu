#include "cuda/stepwork/optimizer.hpp"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <stdexcept>

#include "cuda/common/cuda_check.hpp"
#include "cuda/stepwork/multi_tensor.cuh"
#include "cuda/stepwork/values.cuh"

namespace gs::cuda::stepwork {
namespace {

// The step's constants, computed once on the host (PyTorch computes the bias corrections per
// tensor from its step count; the values are the same).
struct AdamWArgs {
  float lr_wd;      // lr * weight_decay
  float beta1, beta2, eps;
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
};

// One value's update, in FP32 (PyTorch's ADAM_MODE::ADAMW).
__device__ __forceinline__ void adamw_update(float& p, float g, float& m, float& v, const AdamWArgs& a) {
  p -= a.lr_wd * p;
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
  p -= a.step_size * m / denom;
}

// kILP values from x + i (fewer at the chunk's end: the rest read as zero).
template <class T>
__device__ __forceinline__ void load_ilp(const T* x, int64_t i, int64_t n, float r[kILP]) {
  if (i + kILP <= n) {
    load4(x + i, r);
  } else {
#pragma unroll
    for (int k = 0; k < kILP; ++k) r[k] = i + k < n ? to_f32(x[i + k]) : 0.f;
  }
}
template <class T>
__device__ __forceinline__ void store_ilp(T* x, int64_t i, int64_t n, const float r[kILP]) {
  if (i + kILP <= n) {
    store4(x + i, r);
  } else {
#pragma unroll
    for (int k = 0; k < kILP; ++k)
      if (i + k < n) x[i + k] = from_f32<T>(r[k]);
  }
}

// One block updates one chunk: P is the type of the parameter and its gradient, S of the moments;
// Depth 5 also writes the BF16 copy of an FP32 master parameter (list 4).
template <class P, class S, int Depth>
__global__ void __launch_bounds__(kThreads) adamw_kernel(TensorBatch<Depth> b, AdamWArgs a) {
  int slot;
  int64_t first, n;
  block_chunk(b, slot, first, n);
  P* p = static_cast<P*>(b.addr[0][slot]) + first;
  const P* g = static_cast<const P*>(b.addr[1][slot]) + first;
  S* m = static_cast<S*>(b.addr[2][slot]) + first;
  S* v = static_cast<S*>(b.addr[3][slot]) + first;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kILP; i < n; i += static_cast<int64_t>(blockDim.x) * kILP) {
    float rp[kILP], rg[kILP], rm[kILP], rv[kILP];
    load_ilp(p, i, n, rp);
    load_ilp(g, i, n, rg);
    load_ilp(m, i, n, rm);
    load_ilp(v, i, n, rv);
#pragma unroll
    for (int k = 0; k < kILP; ++k) adamw_update(rp[k], rg[k], rm[k], rv[k], a);
    store_ilp(p, i, n, rp);
    store_ilp(m, i, n, rm);
    store_ilp(v, i, n, rv);
    if constexpr (Depth == 5) store_ilp(static_cast<__nv_bfloat16*>(b.addr[4][slot]) + first, i, n, rp);
  }
}

// One block sums the squares of one chunk and adds them to its block slot's partial (launches run
// one after another on the stream, so no two blocks share a slot at once).
template <class G>
__global__ void __launch_bounds__(kThreads) l2norm_kernel(TensorBatch<1> b, float* partials) {
  int slot;
  int64_t first, n;
  block_chunk(b, slot, first, n);
  const G* g = static_cast<const G*>(b.addr[0][slot]) + first;
  float s = 0.f;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kILP; i < n; i += static_cast<int64_t>(blockDim.x) * kILP) {
    float r[kILP];
    load_ilp(g, i, n, r);
#pragma unroll
    for (int k = 0; k < kILP; ++k) s += r[k] * r[k];
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] += s;
}

__global__ void l2norm_finish(const float* partials, float* norm) {
  float s = 0.f;
  for (int i = threadIdx.x; i < kBlocksPerLaunch; i += blockDim.x) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *norm = sqrtf(s);
}

const char* storage_words(ParamStorage s) {
  switch (s) {
    case ParamStorage::Bf16: return "BF16 p, g, m, v";
    case ParamStorage::Fp32: return "FP32 p, g, m, v";
    case ParamStorage::Bf16MainFp32: return "FP32 master p, g, m, v and the BF16 copy of p written";
  }
  return "?";
}

}  // namespace

struct AdamWStep::Impl {
  ParamStorage storage;
  AdamWArgs args{};
  std::vector<BatchLaunch<4>> four;  // Bf16, Fp32
  std::vector<BatchLaunch<5>> five;  // Bf16MainFp32
  size_t tensors = 0;
};

AdamWStep::AdamWStep(ParamStorage storage, const std::vector<AdamWTensor>& tensors, const AdamWHyper& h)
    : impl_(std::make_unique<Impl>()) {
  if (h.step < 1) throw std::invalid_argument("AdamWStep: the step count starts at 1");
  impl_->storage = storage;
  impl_->tensors = tensors.size();
  const double t = h.step;
  impl_->args.lr_wd = h.lr * h.weight_decay;
  impl_->args.beta1 = h.beta1;
  impl_->args.beta2 = h.beta2;
  impl_->args.eps = h.eps;
  impl_->args.step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), t)));
  impl_->args.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), t)));
  std::vector<int64_t> numel;
  for (const AdamWTensor& x : tensors) numel.push_back(x.numel);
  if (storage == ParamStorage::Bf16MainFp32) {
    std::vector<std::array<void*, 5>> lists;
    for (const AdamWTensor& x : tensors) {
      if (!x.p_copy) throw std::invalid_argument("AdamWStep: FP32 master parameters need their BF16 copy");
      lists.push_back({x.p, x.g, x.m, x.v, x.p_copy});
    }
    impl_->five = plan_batches<5>(lists, numel);
  } else {
    std::vector<std::array<void*, 4>> lists;
    for (const AdamWTensor& x : tensors) lists.push_back({x.p, x.g, x.m, x.v});
    impl_->four = plan_batches<4>(lists, numel);
  }
}

AdamWStep::~AdamWStep() = default;

int AdamWStep::pieces() const { return static_cast<int>(impl_->four.size() + impl_->five.size()); }

void AdamWStep::enqueue(int piece, cudaStream_t s) {
  const size_t i = static_cast<size_t>(piece);
  switch (impl_->storage) {
    case ParamStorage::Bf16:
      adamw_kernel<__nv_bfloat16, __nv_bfloat16, 4>
          <<<impl_->four[i].blocks, kThreads, 0, s>>>(impl_->four[i].batch, impl_->args);
      break;
    case ParamStorage::Fp32:
      adamw_kernel<float, float, 4><<<impl_->four[i].blocks, kThreads, 0, s>>>(impl_->four[i].batch, impl_->args);
      break;
    case ParamStorage::Bf16MainFp32:
      adamw_kernel<float, float, 5><<<impl_->five[i].blocks, kThreads, 0, s>>>(impl_->five[i].batch, impl_->args);
      break;
  }
  GS_CUDA_LAUNCH();
}

std::string AdamWStep::describe() const {
  return fmt::format("multi-tensor AdamW as PyTorch's fused AdamW computes it ({}): {} launches of up to {} chunks "
                     "of {} values over {} tensors",
                     storage_words(impl_->storage), pieces(), kBlocksPerLaunch, kChunk, impl_->tensors);
}

struct GradNorm::Impl {
  bool bf16 = false;
  std::vector<BatchLaunch<1>> launches;
  DeviceBuffer partials;  // kBlocksPerLaunch partial sums, then the norm
  size_t tensors = 0;
};

GradNorm::GradNorm(bool bf16, const std::vector<const void*>& grads, const std::vector<int64_t>& numel)
    : impl_(std::make_unique<Impl>()) {
  impl_->bf16 = bf16;
  impl_->tensors = grads.size();
  std::vector<std::array<void*, 1>> lists;
  for (const void* g : grads) lists.push_back({const_cast<void*>(g)});
  impl_->launches = plan_batches<1>(lists, numel);
  impl_->partials = DeviceBuffer((kBlocksPerLaunch + 1) * sizeof(float));
}

GradNorm::~GradNorm() = default;

int GradNorm::pieces() const { return static_cast<int>(impl_->launches.size()) + 2; }

void GradNorm::enqueue(int piece, cudaStream_t s) {
  float* partials = impl_->partials.get<float>();
  if (piece == 0) {
    GS_CUDA(cudaMemsetAsync(partials, 0, kBlocksPerLaunch * sizeof(float), s));
    return;
  }
  if (piece == pieces() - 1) {
    l2norm_finish<<<1, 256, 0, s>>>(partials, partials + kBlocksPerLaunch);
    GS_CUDA_LAUNCH();
    return;
  }
  const BatchLaunch<1>& l = impl_->launches[static_cast<size_t>(piece - 1)];
  if (impl_->bf16)
    l2norm_kernel<__nv_bfloat16><<<l.blocks, kThreads, 0, s>>>(l.batch, partials);
  else
    l2norm_kernel<float><<<l.blocks, kThreads, 0, s>>>(l.batch, partials);
  GS_CUDA_LAUNCH();
}

std::string GradNorm::describe() const {
  return fmt::format("multi-tensor L2 norm of {} gradients ({} launches of up to {} chunks of {} values over {} "
                     "tensors, then one reduction)",
                     impl_->bf16 ? "BF16" : "FP32", impl_->launches.size(), kBlocksPerLaunch, kChunk, impl_->tensors);
}

const float* GradNorm::norm() const { return impl_->partials.get<float>() + kBlocksPerLaunch; }

}  // namespace gs::cuda::stepwork

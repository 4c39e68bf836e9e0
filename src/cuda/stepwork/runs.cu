#include "cuda/stepwork/runs.hpp"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/stepwork/embedding.hpp"
#include "cuda/stepwork/loss.hpp"
#include "cuda/stepwork/optimizer.hpp"

namespace gs::cuda::stepwork {
namespace {

// ---- fills (outside any timed region) ----

__device__ __forceinline__ uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* x, int64_t n, uint64_t seed, float lo, float hi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = static_cast<float>(mix(seed ^ mix(static_cast<uint64_t>(i))) >> 40) * (1.f / 16777216.f);
    x[i] = static_cast<T>(lo + (hi - lo) * u);
  }
}

__global__ void fill_ids_kernel(int64_t* ids, int64_t n, uint64_t seed, int64_t range) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    ids[i] = static_cast<int64_t>(mix(seed ^ mix(static_cast<uint64_t>(i))) % static_cast<uint64_t>(range));
}

unsigned fill_blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536)); }

template <class T>
void fill_uniform(DeviceBuffer& b, uint64_t seed, float lo, float hi, cudaStream_t s) {
  const int64_t n = static_cast<int64_t>(b.bytes() / sizeof(T));
  if (n == 0) return;
  fill_uniform_kernel<T><<<fill_blocks(n), 256, 0, s>>>(b.get<T>(), n, seed, lo, hi);
  GS_CUDA_LAUNCH();
}
DeviceBuffer random_ids(int64_t n, int64_t range, uint64_t seed, cudaStream_t s) {
  DeviceBuffer b(static_cast<size_t>(n) * sizeof(int64_t));
  fill_ids_kernel<<<fill_blocks(n), 256, 0, s>>>(b.get<int64_t>(), n, seed, range);
  GS_CUDA_LAUNCH();
  return b;
}

// ---- parameter tensors: equal sizes, each starting 256-byte aligned ----

constexpr int64_t kAlignValues = 128;  // 256 bytes of BF16, 512 of FP32

struct Layout {
  std::vector<int64_t> numel, offset;  // per tensor, in values
  int64_t total = 0;                   // values including the alignment gaps
};

Layout layout(const StepKernelSpec& s) {
  Layout l;
  const int64_t base = s.elements / s.tensors, extra = s.elements % s.tensors;
  for (int64_t t = 0; t < s.tensors; ++t) {
    const int64_t n = base + (t < extra ? 1 : 0);
    l.numel.push_back(n);
    l.offset.push_back(l.total);
    l.total += (n + kAlignValues - 1) / kAlignValues * kAlignValues;
  }
  return l;
}

size_t grad_bytes(ParamStorage s) { return s == ParamStorage::Bf16 ? 2 : 4; }
size_t state_bytes(ParamStorage s) { return s == ParamStorage::Bf16 ? 2 : 4; }  // p (master), g, m, v

// Rounded up to whole alignment blocks, without building the per-tensor table.
int64_t laid_out_values(const StepKernelSpec& s) {
  const int64_t base = s.elements / s.tensors, extra = s.elements % s.tensors;
  auto up = [](int64_t n) { return (n + kAlignValues - 1) / kAlignValues * kAlignValues; };
  return (s.tensors - extra) * up(base) + extra * up(base + 1);
}

class AdamWRun final : public StepRun {
 public:
  AdamWRun(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed) {
    const Layout l = layout(s);
    const size_t n = static_cast<size_t>(l.total), vb = state_bytes(s.storage);
    p_ = DeviceBuffer(n * vb), g_ = DeviceBuffer(n * vb), m_ = DeviceBuffer(n * vb), v_ = DeviceBuffer(n * vb);
    if (s.storage == ParamStorage::Bf16MainFp32) copy_ = DeviceBuffer(n * 2);
    // Weights ~ 0.02, gradients ~ 1e-3, moments of a run under way.
    auto fill = [&](DeviceBuffer& b, uint64_t k, float lo, float hi) {
      if (vb == 2) fill_uniform<__nv_bfloat16>(b, seed + k, lo, hi, stream);
      else fill_uniform<float>(b, seed + k, lo, hi, stream);
    };
    fill(p_, 1, -0.04f, 0.04f);
    fill(g_, 2, -2e-3f, 2e-3f);
    fill(m_, 3, -2e-4f, 2e-4f);
    fill(v_, 4, 0.f, 4e-6f);
    std::vector<AdamWTensor> tensors;
    for (size_t t = 0; t < l.numel.size(); ++t) {
      const int64_t o = l.offset[t];
      AdamWTensor x;
      x.numel = l.numel[t];
      x.p = static_cast<char*>(p_.get()) + o * static_cast<int64_t>(vb);
      x.g = static_cast<char*>(g_.get()) + o * static_cast<int64_t>(vb);
      x.m = static_cast<char*>(m_.get()) + o * static_cast<int64_t>(vb);
      x.v = static_cast<char*>(v_.get()) + o * static_cast<int64_t>(vb);
      if (copy_) x.p_copy = static_cast<char*>(copy_.get()) + o * 2;
      tensors.push_back(x);
    }
    step_ = std::make_unique<AdamWStep>(s.storage, tensors, AdamWHyper{});
    GS_CUDA(cudaStreamSynchronize(stream));
  }
  static size_t bytes(const StepKernelSpec& s) {
    const size_t n = static_cast<size_t>(laid_out_values(s));
    return n * (4 * state_bytes(s.storage) + (s.storage == ParamStorage::Bf16MainFp32 ? 2 : 0));
  }
  int pieces() const override { return step_->pieces(); }
  void enqueue(int piece, cudaStream_t s) override { step_->enqueue(piece, s); }
  std::string describe() const override { return step_->describe(); }

 private:
  DeviceBuffer p_, g_, m_, v_, copy_;
  std::unique_ptr<AdamWStep> step_;
};

class GradNormRun final : public StepRun {
 public:
  GradNormRun(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed) {
    const Layout l = layout(s);
    const bool bf16 = s.storage == ParamStorage::Bf16;
    g_ = DeviceBuffer(static_cast<size_t>(l.total) * grad_bytes(s.storage));
    if (bf16) fill_uniform<__nv_bfloat16>(g_, seed, -2e-3f, 2e-3f, stream);
    else fill_uniform<float>(g_, seed, -2e-3f, 2e-3f, stream);
    std::vector<const void*> grads;
    for (int64_t o : l.offset)
      grads.push_back(static_cast<const char*>(g_.get()) + o * static_cast<int64_t>(grad_bytes(s.storage)));
    norm_ = std::make_unique<GradNorm>(bf16, grads, l.numel);
    GS_CUDA(cudaStreamSynchronize(stream));
  }
  static size_t bytes(const StepKernelSpec& s) {
    return static_cast<size_t>(laid_out_values(s)) * grad_bytes(s.storage) + 4096;
  }
  int pieces() const override { return norm_->pieces(); }
  void enqueue(int piece, cudaStream_t s) override { norm_->enqueue(piece, s); }
  std::string describe() const override { return norm_->describe(); }

 private:
  DeviceBuffer g_;
  std::unique_ptr<GradNorm> norm_;
};

class ZeroGradRun final : public StepRun {
 public:
  explicit ZeroGradRun(const StepKernelSpec& s) : g_(bytes(s)), bf16_(s.storage == ParamStorage::Bf16) {}
  static size_t bytes(const StepKernelSpec& s) { return static_cast<size_t>(s.elements) * grad_bytes(s.storage); }
  int pieces() const override { return 1; }
  void enqueue(int, cudaStream_t s) override { GS_CUDA(cudaMemsetAsync(g_.get(), 0, g_.bytes(), s)); }
  std::string describe() const override {
    return fmt::format("zero-grad: one memset over a contiguous {} gradient buffer of {:.3g} values",
                       bf16_ ? "BF16" : "FP32", static_cast<double>(g_.bytes()) / (bf16_ ? 2 : 4));
  }

 private:
  DeviceBuffer g_;
  bool bf16_;
};

class CrossEntropyRun final : public StepRun {
 public:
  CrossEntropyRun(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed)
      : backward_(s.kind == StepKernelKind::CrossEntropyBwd) {
    const size_t n = static_cast<size_t>(s.rows) * static_cast<size_t>(s.cols);
    logits_ = DeviceBuffer(n * sizeof(__nv_bfloat16));
    fill_normal_bf16(logits_.get<__nv_bfloat16>(), n, seed, 2.0f, stream);  // an LM head's logits, std ~2
    targets_ = random_ids(s.rows, s.cols, seed + 1, stream);
    ce_ = std::make_unique<CrossEntropy>(s.fused, s.rows, s.cols, logits_.get<__nv_bfloat16>(),
                                         targets_.get<int64_t>());
    if (backward_)  // the backward reads what the forward left (log-probabilities, log-sum-exp)
      for (int i = 0; i < ce_->forward_pieces(); ++i) ce_->forward(i, stream);
    GS_CUDA(cudaStreamSynchronize(stream));
  }
  static size_t bytes(const StepKernelSpec& s) {
    return static_cast<size_t>(s.rows) * static_cast<size_t>(s.cols) * 2 + static_cast<size_t>(s.rows) * 8 +
           CrossEntropy::owned_bytes(s.fused, s.rows, s.cols);
  }
  int pieces() const override { return backward_ ? ce_->backward_pieces() : ce_->forward_pieces(); }
  void enqueue(int piece, cudaStream_t s) override {
    if (backward_) ce_->backward(piece, s);
    else ce_->forward(piece, s);
  }
  std::string describe() const override { return ce_->describe(backward_); }

 private:
  bool backward_;
  DeviceBuffer logits_, targets_;
  std::unique_ptr<CrossEntropy> ce_;
};

class EmbeddingRun final : public StepRun {
 public:
  EmbeddingRun(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed)
      : backward_(s.kind == StepKernelKind::EmbeddingBwd), s_(s) {
    const size_t table = static_cast<size_t>(s.vocab) * static_cast<size_t>(s.cols);
    const size_t act = static_cast<size_t>(s.rows) * static_cast<size_t>(s.cols);
    table_ = DeviceBuffer(table * 2);  // the table (forward) or its gradient (backward)
    rows_ = DeviceBuffer(act * 2);     // the gathered rows (forward) or their gradient (backward)
    if (backward_) fill_normal_bf16(rows_.get<__nv_bfloat16>(), act, seed, 1e-3f, stream);
    else fill_normal_bf16(table_.get<__nv_bfloat16>(), table, seed, 0.02f, stream);
    ids_ = random_ids(s.rows, s.vocab, seed + 1, stream);
    GS_CUDA(cudaStreamSynchronize(stream));
  }
  static size_t bytes(const StepKernelSpec& s) {
    return (static_cast<size_t>(s.vocab) + static_cast<size_t>(s.rows)) * static_cast<size_t>(s.cols) * 2 +
           static_cast<size_t>(s.rows) * 8;
  }
  int pieces() const override { return backward_ ? 2 : 1; }
  void enqueue(int piece, cudaStream_t s) override {
    __nv_bfloat16* table = table_.get<__nv_bfloat16>();
    __nv_bfloat16* rows = rows_.get<__nv_bfloat16>();
    const int64_t* ids = ids_.get<int64_t>();
    if (!backward_) embedding_forward(table, ids, s_.rows, s_.cols, rows, s);
    else if (piece == 0) embedding_backward_zero(table, s_.vocab, s_.cols, s);
    else embedding_backward_add(rows, ids, s_.rows, s_.cols, table, s);
  }
  std::string describe() const override {
    return backward_ ? fmt::format("embedding backward: the {} x {} BF16 table gradient zeroed, then {} token rows "
                                   "added with BF16x2 atomics (sort-free)", s_.vocab, s_.cols, s_.rows)
                     : fmt::format("embedding forward: {} token rows of {} gathered from a {}-row BF16 table", s_.rows,
                                   s_.cols, s_.vocab);
  }

 private:
  bool backward_;
  StepKernelSpec s_;
  DeviceBuffer table_, rows_, ids_;
};

bool optimizer_kind(StepKernelKind k) {
  return k == StepKernelKind::AdamW || k == StepKernelKind::GradNorm || k == StepKernelKind::ZeroGrad;
}

}  // namespace

std::string cannot_run(const StepKernelSpec& s) {
  constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // one block per row (grid x)
  switch (s.kind) {
    case StepKernelKind::AdamW:
    case StepKernelKind::GradNorm:
    case StepKernelKind::ZeroGrad:
      if (s.elements < 1 || s.tensors < 1) return fmt::format("{}: no parameters to run over", to_string(s.kind));
      return {};
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::CrossEntropyBwd:
      if (s.rows < 1 || s.cols < 1) return fmt::format("{}: no logits to run over", to_string(s.kind));
      if (s.rows > kMaxRows) return fmt::format("{}: more than {} token rows", to_string(s.kind), kMaxRows);
      return {};
    case StepKernelKind::EmbeddingFwd:
    case StepKernelKind::EmbeddingBwd:
      if (s.rows < 1 || s.cols < 1 || s.vocab < 1) return fmt::format("{}: an empty table or no tokens", to_string(s.kind));
      if (s.kind == StepKernelKind::EmbeddingBwd && s.cols % 2 != 0)
        return fmt::format("embedding-bwd: the hidden width {} is odd (the BF16x2 atomic adds need an even one)",
                           s.cols);
      return {};
    case StepKernelKind::LaunchLatency: return {};
  }
  return "unknown step kernel";
}

size_t run_bytes(const StepKernelSpec& s) {
  switch (s.kind) {
    case StepKernelKind::AdamW: return AdamWRun::bytes(s);
    case StepKernelKind::GradNorm: return GradNormRun::bytes(s);
    case StepKernelKind::ZeroGrad: return ZeroGradRun::bytes(s);
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::CrossEntropyBwd: return CrossEntropyRun::bytes(s);
    case StepKernelKind::EmbeddingFwd:
    case StepKernelKind::EmbeddingBwd: return EmbeddingRun::bytes(s);
    case StepKernelKind::LaunchLatency: return 0;
  }
  return 0;
}

StepKernelSpec scaled_spec(const StepKernelSpec& s, double f) {
  StepKernelSpec out = s;
  f = std::clamp(f, 0.0, 1.0);
  if (optimizer_kind(s.kind)) {
    out.elements = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(s.elements) * f)));
    out.tensors = std::clamp<int64_t>(std::llround(static_cast<double>(s.tensors) * f), 1, out.elements);
  } else if (s.kind != StepKernelKind::LaunchLatency) {
    out.rows = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(s.rows) * f)));
  }
  return out;
}

std::unique_ptr<StepRun> make_run(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed) {
  switch (s.kind) {
    case StepKernelKind::AdamW: return std::make_unique<AdamWRun>(s, stream, seed);
    case StepKernelKind::GradNorm: return std::make_unique<GradNormRun>(s, stream, seed);
    case StepKernelKind::ZeroGrad: return std::make_unique<ZeroGradRun>(s);
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::CrossEntropyBwd: return std::make_unique<CrossEntropyRun>(s, stream, seed);
    case StepKernelKind::EmbeddingFwd:
    case StepKernelKind::EmbeddingBwd: return std::make_unique<EmbeddingRun>(s, stream, seed);
    case StepKernelKind::LaunchLatency: break;
  }
  throw std::logic_error("make_run: the launch cost has no run (launch_cost.hpp)");
}

}  // namespace gs::cuda::stepwork

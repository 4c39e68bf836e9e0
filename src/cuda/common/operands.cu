#include "cuda/common/operands.hpp"

#include <cuda_bf16.h>

#include <numeric>
#include <stdexcept>
#include <string>

#include "core/recipes/grouped.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/fill.cuh"

namespace gs::cuda {

namespace {

constexpr size_t kBf16 = 2;

size_t elems(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

int64_t total(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

GemmSources GemmSources::allocate(const Gemm& g, bool c_fp32) {
  GemmSources s;
  s.c_fp32 = c_fp32;
  s.m = g.m; s.k = g.k; s.n = g.n;
  s.l_k_major = g.a.k_major;
  s.r_k_major = g.b.k_major;
  s.l = DeviceBuffer(elems(g.m, g.k) * kBf16);
  s.r = DeviceBuffer(elems(g.k, g.n) * kBf16);
  s.c = DeviceBuffer(elems(g.m, g.n) * (c_fp32 ? sizeof(float) : kBf16));
  return s;
}

void GemmSources::fill(const Gemm& g, Dist d, uint64_t seed, cudaStream_t s) {
  auto fill_one = [&](DeviceBuffer& x, size_t n, uint64_t sd, Role role) {
    const float stddev = role == Role::Weight ? 0.02f : 1.0f;
    if (d == Dist::Outliers && role != Role::Weight) fill_outliers_bf16(x.get<__nv_bfloat16>(), n, sd, stddev, 1e-3f, 50.f, s);
    else fill_normal_bf16(x.get<__nv_bfloat16>(), n, sd, stddev, s);
  };
  fill_one(l, elems(g.m, g.k), seed * 2 + 1, g.a.role);
  fill_one(r, elems(g.k, g.n), seed * 2 + 2, g.b.role);
  GS_CUDA(cudaMemsetAsync(c.get(), 0, c.bytes(), s));
  GS_CUDA(cudaStreamSynchronize(s));
}

// grouped_layout_problem: core/recipes/grouped.hpp (the dry run predicts with the same rule).
bool GroupedSources::matches(const Gemm& g, const std::vector<int64_t>& padded, bool fp32) const {
  return fp32_out == (fp32 && g.group_dim == GroupDim::K) && gemm.m == g.m && gemm.k == g.k && gemm.n == g.n && gemm.group_dim == g.group_dim &&
         gemm.a.k_major == g.a.k_major && gemm.b.k_major == g.b.k_major && gemm.a.role == g.a.role &&
         gemm.b.role == g.b.role && sizes == padded;
}

size_t GroupedSources::bytes_needed(const Gemm& g, const std::vector<int64_t>& padded, bool fp32) {
  const int64_t sum = total(padded);
  if (g.group_dim == GroupDim::M) {
    size_t weights = 0;
    for (int64_t s : padded)
      if (s > 0) weights += elems(g.k, g.n) * kBf16;
    return elems(sum, g.k) * kBf16 + elems(sum, g.n) * kBf16 + weights;
  }
  return elems(sum, g.m) * kBf16 + elems(sum, g.n) * kBf16 + padded.size() * elems(g.m, g.n) * (fp32 ? 4 : kBf16);
}

std::unique_ptr<GroupedSources> GroupedSources::allocate(const Gemm& g, const std::vector<int64_t>& padded,
                                                         uint64_t seed, cudaStream_t s, bool fp32) {
  if (std::string why = grouped_layout_problem(g); !why.empty()) throw std::invalid_argument(why);
  auto src = std::make_unique<GroupedSources>();
  src->gemm = g;
  src->sizes = padded;
  src->offsets.assign(padded.size() + 1, 0);
  for (size_t e = 0; e < padded.size(); ++e) src->offsets[e + 1] = src->offsets[e] + padded[e];
  const int64_t sum = src->offsets.back();
  // Activations and gradients ~ N(0,1), weights ~ N(0, 0.02), as the dense path fills them.
  auto fill = [&](DeviceBuffer& b, size_t n, uint64_t sd, Role r) {
    if (n) fill_normal_bf16(b.get<__nv_bfloat16>(), n, sd, r == Role::Weight ? 0.02f : 1.0f, s);
  };
  if (g.group_dim == GroupDim::M) {
    src->tokens_l = DeviceBuffer(elems(sum, g.k) * kBf16);
    src->out = DeviceBuffer(elems(sum, g.n) * kBf16);
    fill(src->tokens_l, elems(sum, g.k), seed * 2 + 1, g.a.role);
    if (src->out) GS_CUDA(cudaMemsetAsync(src->out.get(), 0, src->out.bytes(), s));
    src->per_expert.resize(padded.size());
    for (size_t e = 0; e < padded.size(); ++e) {
      if (padded[e] == 0) continue;  // an empty expert's weight is never read
      src->per_expert[e] = DeviceBuffer(elems(g.k, g.n) * kBf16);
      fill(src->per_expert[e], elems(g.k, g.n), seed * 2 + 2 + 1000003ull * e, g.b.role);
    }
  } else {
    src->tokens_l = DeviceBuffer(elems(sum, g.m) * kBf16);
    src->tokens_r = DeviceBuffer(elems(sum, g.n) * kBf16);
    fill(src->tokens_l, elems(sum, g.m), seed * 2 + 1, g.a.role);
    fill(src->tokens_r, elems(sum, g.n), seed * 2 + 2, g.b.role);
    src->per_expert.resize(padded.size());
    src->fp32_out = fp32;
    // One allocation, expert after expert ([experts*m, n]; per_expert are views into it): DeepGEMM's
    // K-grouped Wgrad writes every expert's gradient as one tensor.
    const size_t each = elems(g.m, g.n) * (fp32 ? 4 : kBf16);
    src->out = DeviceBuffer(each * padded.size());
    // BF16 outputs: NaN until written. FP32 main gradients: zeros, accumulated into.
    if (src->out) GS_CUDA(cudaMemsetAsync(src->out.get(), fp32 ? 0 : 0xFF, src->out.bytes(), s));
    for (size_t e = 0; e < padded.size(); ++e) src->per_expert[e] = DeviceBuffer::view(src->out.get<char>() + e * each, each);
  }
  GS_CUDA(cudaStreamSynchronize(s));
  return src;
}

}  // namespace gs::cuda

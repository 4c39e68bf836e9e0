// The DeepGEMM provider's BF16 cells (deepgemm_runs.hpp): DeepGEMM's sm90_bf16_gemm on the
// engine's BF16 operands.
//
// - Dense Fprop/Dgrad/Wgrad: the operands as the engine stores them (the kernel takes K- or
//   MN-major A and B: Dgrad's weight and Wgrad's token-major operands are MN-major), nothing
//   converted. Wgrad into the FP32 main gradient (--wgrad-output fp32-accumulate, the default):
//   the kernel's FP32 output with accumulation (TMA reduce-add, D += A·Bᵀ, beta 1); else BF16 out.
// - Grouped Fprop/Dgrad: the M-grouped contiguous form (sm90_m_grouped_bf16_gemm_contiguous), one
//   launch: each expert's rows copied (once, untimed) into 128-row segments, the experts' weights
//   stacked (once, untimed: a model keeps them stacked), m_indices -1 on padding rows.
// - Grouped Wgrad: the K-grouped form (sm90_bf16_k_grouped_gemm), one launch: each expert's tokens
//   copied (once, untimed) into 128-token segments of the token-major operands, into the
//   sources' per-expert gradients (one tensor).
// - Timed: the kernel only, in every mode (BF16 has nothing to quantize).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/providers/deepgemm_cells.hpp"
#include "core/recipes/grouped.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/deepgemm/deepgemm_runs.hpp"

namespace gs::cuda::dgrun {

namespace {

const char* major_text(bool k_major) { return k_major ? "K-major" : "MN-major"; }

class Bf16DenseRun final : public ProviderRun {
 public:
  Bf16DenseRun(const Gemm& g, const Recipe& r, GemmSources& src, PrepareTotals& totals) : m_(static_cast<int>(g.m)) {
    if (r.fp32_accumulate != src.c_fp32) throw std::invalid_argument("DeepGEMM: the output type differs from the recipe's");
    dg::Problem p;
    p.kernel = r.fp32_accumulate ? dg::Kernel::BF16_FP32 : dg::Kernel::BF16;
    p.m = m_;
    p.n = static_cast<int>(g.n);
    p.k = static_cast<int>(g.k);
    p.a_k_major = src.l_k_major;
    p.b_k_major = src.r_k_major;
    kern_ = &dg::Runtime::get().prepare(p, &info_);
    totals.add(info_);
    name_ = dg::instantiation(p, info_.config).kernel_name;
    args_.a = src.l.get();
    args_.b = src.r.get();
    args_.d = src.c.get();
    fp32_ = r.fp32_accumulate;
    majors_ = fmt::format("A {}, B {}", major_text(p.a_k_major), major_text(p.b_k_major));
  }
  void iteration(cudaStream_t s) override { dg::Runtime::get().launch_bf16(*kern_, args_, m_, s); }
  int ops() const override { return 1; }
  std::string config() const override {
    return fmt::format("deepgemm {} ({}; {}{}); {}; timed: the DeepGEMM kernel only (BF16 operands as stored)", name_,
                       info_.config.describe(), majors_, fp32_ ? "; FP32 D += A·Bᵀ by TMA reduce-add" : "",
                       prepare_text(info_));
  }

 private:
  int m_;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  dg::Bf16Args args_;
  bool fp32_ = false;
  std::string name_, majors_;
};

class Bf16MGroupedRun final : public ProviderRun {
 public:
  Bf16MGroupedRun(GroupedSources& src, PrepareTotals& totals) {
    const Gemm& g = src.gemm;
    const int64_t n = g.n, k = g.k;
    const std::vector<int64_t> padded = deepgemm_padded_group(g);
    groups_ = static_cast<int>(padded.size());
    m_ = static_cast<int>(std::accumulate(padded.begin(), padded.end(), int64_t{0}));
    const cudaStream_t s = nullptr;
    GS_CUDA(cudaDeviceSynchronize());
    row_offsets_ = copy_segments(src, src.tokens_l, k, padded, a_, s);
    std::vector<int> idx(static_cast<size_t>(m_), -1);
    for (int e = 0; e < groups_; ++e)
      for (int64_t i = 0; i < g.group[static_cast<size_t>(e)]; ++i)
        idx[static_cast<size_t>(row_offsets_[static_cast<size_t>(e)] + i)] = e;
    m_indices_ = DeviceBuffer(idx.size() * sizeof(int));
    if (!idx.empty()) GS_CUDA(cudaMemcpy(m_indices_.get(), idx.data(), m_indices_.bytes(), cudaMemcpyHostToDevice));
    // Stacked weights: [experts*n, k] (K-major, Fprop) or [experts*k, n] (MN-major, Dgrad); an
    // expert without rows has no weight in the sources and is never read (its slot stays zero).
    const size_t w_bytes = static_cast<size_t>(n * k) * 2;
    b_ = DeviceBuffer(w_bytes * static_cast<size_t>(groups_));
    if (b_.bytes()) GS_CUDA(cudaMemsetAsync(b_.get(), 0, b_.bytes(), s));
    for (int e = 0; e < groups_; ++e)
      if (g.group[static_cast<size_t>(e)] > 0)
        GS_CUDA(cudaMemcpyAsync(b_.get<char>() + static_cast<size_t>(e) * w_bytes, src.per_expert[static_cast<size_t>(e)].get(),
                                w_bytes, cudaMemcpyDeviceToDevice, s));
    d_ = DeviceBuffer(static_cast<size_t>(m_) * static_cast<size_t>(n) * 2);
    if (d_.bytes()) GS_CUDA(cudaMemsetAsync(d_.get(), 0xFF, d_.bytes(), s));  // NaN until written
    GS_CUDA(cudaStreamSynchronize(s));
    dg::Problem p;
    p.kernel = dg::Kernel::BF16;
    p.layout = dg::Layout::MGroupedContiguous;
    p.m = m_;
    p.n = static_cast<int>(n);
    p.k = static_cast<int>(k);
    p.num_groups = groups_;
    p.a_k_major = true;
    p.b_k_major = g.b.k_major;
    if (m_ > 0) {
      kern_ = &dg::Runtime::get().prepare(p, &info_);
      totals.add(info_);
    }
    b_major_ = major_text(p.b_k_major);
  }
  void iteration(cudaStream_t s) override {
    if (!kern_) return;
    dg::Bf16Args a;
    a.a = a_.get(); a.b = b_.get(); a.d = d_.get(); a.m_indices = m_indices_.get<int>();
    dg::Runtime::get().launch_bf16(*kern_, a, m_, s);
  }
  int ops() const override { return 1; }
  std::string config() const override {
    if (!kern_) return "deepgemm: no expert with rows";
    return fmt::format("deepgemm sm90_m_grouped_bf16_gemm_contiguous ({}; weights {}); {} experts in one launch, {} rows as "
                       "128-row segments; {}; timed: the DeepGEMM kernel only (rows and weights laid out before the "
                       "timed loop)",
                       info_.config.describe(), b_major_, groups_, m_, prepare_text(info_));
  }
  DeepGemmGroupedOutput output() const { return {d_.get(), row_offsets_, static_cast<int64_t>(m_)}; }

 private:
  int groups_ = 0, m_ = 0;
  std::vector<int64_t> row_offsets_;
  DeviceBuffer a_, m_indices_, b_, d_;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  std::string b_major_;
};

// Wgrad of the experts: DeepGEMM's K-grouped BF16 GEMM, one launch for every expert: the experts'
// token-major operands (MN-major) one after another along K, each padded to 128 tokens (copied
// once, untimed), into the sources' per-expert gradients (one tensor [experts*m, n]): FP32 main
// gradients accumulated into, or BF16 written.
class Bf16KGroupedRun final : public ProviderRun {
 public:
  Bf16KGroupedRun(GroupedSources& src, const Recipe& r, PrepareTotals& totals) {
    const Gemm& g = src.gemm;
    const int64_t m = g.m, n = g.n;
    m_ = static_cast<int>(m);
    fp32_ = r.fp32_accumulate;
    if (fp32_ != src.fp32_out) throw std::invalid_argument("DeepGEMM: the output type differs from the recipe's");
    const size_t each = static_cast<size_t>(m * n) * (fp32_ ? 4 : 2);
    for (size_t e = 0; e + 1 < src.per_expert.size(); ++e)
      if (src.per_expert[e + 1].get<char>() != src.per_expert[e].get<char>() + each)
        throw std::invalid_argument("DeepGEMM: its K-grouped Wgrad needs the experts' gradients as one tensor");
    d_ = src.per_expert.empty() ? nullptr : src.per_expert.front().get();
    const std::vector<int64_t> padded = deepgemm_padded_group(g);
    groups_ = static_cast<int>(padded.size());
    const cudaStream_t s = nullptr;
    GS_CUDA(cudaDeviceSynchronize());
    copy_segments(src, src.tokens_l, m, padded, a_, s);
    copy_segments(src, src.tokens_r, n, padded, b_, s);
    std::vector<int> ks;
    int64_t max_k = 0;
    for (int64_t x : padded) {
      ks.push_back(static_cast<int>(x));
      sum_k_ += static_cast<int>(x);
      max_k = std::max(max_k, x);
      if (x > 0) ++with_tokens_;
    }
    ks_ = DeviceBuffer(ks.size() * sizeof(int));
    if (!ks.empty()) GS_CUDA(cudaMemcpy(ks_.get(), ks.data(), ks_.bytes(), cudaMemcpyHostToDevice));
    GS_CUDA(cudaStreamSynchronize(s));
    if (sum_k_ > 0) {
      dg::Problem p;
      p.kernel = fp32_ ? dg::Kernel::BF16_FP32 : dg::Kernel::BF16;
      p.layout = dg::Layout::KGroupedContiguous;
      p.m = static_cast<int>(m);
      p.n = static_cast<int>(n);
      p.k = static_cast<int>(max_k);  // DeepGEMM's tile choice for K-grouped: the largest expert's K
      p.num_groups = groups_;
      p.a_k_major = p.b_k_major = false;
      kern_ = &dg::Runtime::get().prepare(p, &info_);
      totals.add(info_);
      name_ = dg::instantiation(p, info_.config).kernel_name;
    }
  }
  void iteration(cudaStream_t s) override {
    if (!kern_) return;
    dg::Bf16Args a;
    a.a = a_.get(); a.b = b_.get(); a.d = d_; a.ks = ks_.get<int>(); a.sum_k = sum_k_;
    dg::Runtime::get().launch_bf16(*kern_, a, m_, s);
  }
  int ops() const override { return 1; }
  std::string config() const override {
    if (!kern_) return "deepgemm: no expert with tokens (nothing to write)";
    return fmt::format("deepgemm {} ({}; A, B MN-major{}); {} experts in one launch ({} with tokens), each expert's "
                       "tokens padded to 128; {}; timed: the DeepGEMM kernel only (tokens laid out before the timed loop)",
                       name_, info_.config.describe(), fp32_ ? "; FP32 D += A·Bᵀ by TMA reduce-add" : "", groups_,
                       with_tokens_, prepare_text(info_));
  }

 private:
  bool fp32_ = false;
  int m_ = 0, groups_ = 0, with_tokens_ = 0, sum_k_ = 0;
  void* d_ = nullptr;
  DeviceBuffer a_, b_, ks_;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ProviderRun> make_bf16_dense(const Gemm& g, const Recipe& r, GemmSources& src, PrepareTotals& totals) {
  return std::make_unique<Bf16DenseRun>(g, r, src, totals);
}

std::unique_ptr<ProviderRun> make_bf16_grouped(GroupedSources& src, const Recipe& r, PrepareTotals& totals) {
  if (r.precision != Precision::BF16) throw std::invalid_argument("DeepGEMM: not a BF16 recipe");
  if (src.gemm.group_dim == GroupDim::K) return std::make_unique<Bf16KGroupedRun>(src, r, totals);
  return std::make_unique<Bf16MGroupedRun>(src, totals);
}

std::optional<DeepGemmGroupedOutput> bf16_grouped_output(const ProviderRun& run) {
  if (const auto* m = dynamic_cast<const Bf16MGroupedRun*>(&run)) return m->output();
  return std::nullopt;
}

}  // namespace gs::cuda::dgrun

// The DeepGEMM provider (provider.hpp): DeepSeek's FP8 block recipe through DeepGEMM's sm90
// kernels (deepgemm_runtime.hpp), on the engine's operands.
//
// - Dense Fprop/Dgrad: gemm_fp8_fp8_bf16_nt (1d2d: 1x128 left, 128x128 right, BF16 out). Dense
//   Wgrad: wgrad_gemm_fp8_fp8_fp32_nt (1d1d: 1x128 on both, D += A·Bᵀ into the FP32 main gradient).
//   The operands are quantized by the engine's own FP8Block quantizer through RecipeGemm without
//   its cuBLASLt GEMM (the same work, per mode, as the cuBLASLt cell: recipe_gemm.hpp), whose
//   K-major copies are DeepGEMM's NT layout (the quantizer transposes Dgrad's weight and Wgrad's
//   token-major operands); the scales are converted to DeepGEMM's layouts (deepgemm_layouts.cuh).
// - Grouped Fprop/Dgrad: the M-grouped contiguous kernel, one launch for every expert: each
//   expert's real rows copied (once, untimed) into segments padded to 128 rows (DeepGEMM's M
//   alignment; the padding rows are zero and marked -1 in m_indices), the experts' weights stacked.
// - Grouped Wgrad: the K-grouped contiguous 1d1d kernel, one launch for every expert (each
//   expert's tokens padded to 128; the kernel rewrites its A/B tensor maps per expert in a global
//   buffer of two descriptors per CTA, Runtime::launch_k_grouped).
// - BF16 cells: sm90_bf16_gemm, dense, M-grouped and K-grouped (deepgemm_bf16_runs.cpp).
// - Timed: pre-quantized mode, the kernel(s) only (quantization and layout conversion done once
//   before the timed loop). Per-gemm / training: the operands the mode quantizes (operand_work),
//   quantized every iteration by the engine's quantizer, their scales converted to DeepGEMM's
//   layout, (grouped weights: copied into the stacked buffer), then the kernel(s).
// - NVRTC compiles at prepare time (cell setup), never in a timed loop; compile time and cache hits
//   go to the run's notes (notes()).
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "core/providers/deepgemm_cells.hpp"
#include "core/recipes/grouped.hpp"
#include "core/providers/jit_cache.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/deepgemm/deepgemm_layouts.cuh"
#include "cuda/providers/deepgemm/deepgemm_provider.hpp"
#include "cuda/providers/deepgemm/deepgemm_runs.hpp"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/provider.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

namespace {

using dgrun::copy_segments;
using dgrun::prepare_text;
using dgrun::PrepareTotals;

// DeepGEMM's scale count for a quantized operand, and the conversion into `dst`.
size_t dg_scale_floats(const QuantizedOperand& q) {
  const int outer = static_cast<int>(q.outer()), k = static_cast<int>(q.k());
  return static_cast<size_t>(q.recipe().scaling == Scaling::Block1x128 ? dg::scales_1x128_deepgemm_count(outer, k)
                                                                        : dg::scales_128x128_deepgemm_count(outer, k, 1));
}
void convert_scales(const QuantizedOperand& q, float* dst, cudaStream_t s) {
  const float* sc = static_cast<const float*>(q.lt().scale);
  const int outer = static_cast<int>(q.outer()), k = static_cast<int>(q.k());
  if (q.recipe().scaling == Scaling::Block1x128) dg::scales_1x128_to_deepgemm(sc, outer, k, dst, s);
  else dg::scales_128x128_to_deepgemm(sc, outer, k, 1, 0, dst, s);
}

std::string timed_text(Mode mode, bool any_quantized) {
  if (mode == Mode::PreQuantized || !any_quantized)
    return "timed: the DeepGEMM kernel only (operands quantized and laid out before the timed loop)";
  return "timed: the mode's FP8Block quantization (engine quantizer), the scale-layout conversion, the DeepGEMM kernel";
}

class DenseRun final : public ProviderRun {
 public:
  DenseRun(const Gemm& g, const Recipe& r, Mode mode, GemmSources& src, const RecipeOptions& opts, PrepareTotals& totals)
      : kernel_(*deepgemm_kernel(r)), m_(static_cast<int>(g.m)) {
    const OperandWork wl = operand_work(mode, g, Side::Left, r, opts);
    const OperandWork wr = operand_work(mode, g, Side::Right, r, opts);
    rg_ = std::make_unique<RecipeGemm>(nullptr, g, r, src, nullptr, opts, /*with_gemm=*/false, wl, wr);
    timed_l_ = wl.work != QuantWork::None;
    timed_r_ = wr.work != QuantWork::None;
    sfa_ = DeviceBuffer(dg_scale_floats(*rg_->l()) * sizeof(float));
    sfb_ = DeviceBuffer(dg_scale_floats(*rg_->r()) * sizeof(float));
    const cudaStream_t s = nullptr;
    GS_CUDA(cudaDeviceSynchronize());  // the engine's sources, written on its stream
    rg_->prequantize(s);               // every operand once (the timed loop redoes the mode's)
    convert_scales(*rg_->l(), sfa_.get<float>(), s);
    convert_scales(*rg_->r(), sfb_.get<float>(), s);
    GS_CUDA(cudaStreamSynchronize(s));
    dg::Problem p;
    p.kernel = kernel_;
    p.m = m_;
    p.n = static_cast<int>(g.n);
    p.k = static_cast<int>(g.k);
    kern_ = &dg::Runtime::get().prepare(p, &info_);
    totals.add(info_);
    name_ = dg::instantiation(p, info_.config).kernel_name;
    a_ = rg_->l()->lt().data;
    b_ = rg_->r()->lt().data;
    d_ = src.c.get();
    timed_ = timed_text(mode, timed_l_ || timed_r_);
  }

  void iteration(cudaStream_t s) override {
    rg_->step_quantize(s);
    if (timed_l_) convert_scales(*rg_->l(), sfa_.get<float>(), s);
    if (timed_r_) convert_scales(*rg_->r(), sfb_.get<float>(), s);
    auto& rt = dg::Runtime::get();
    if (kernel_ == dg::Kernel::FP8_1D2D) {
      dg::DenseArgs a;
      a.a = a_; a.sfa = sfa_.get<float>(); a.b = b_; a.sfb = sfb_.get<float>(); a.d = d_;
      rt.launch_dense(*kern_, a, m_, s);
    } else {
      dg::WgradArgs a;
      a.a = a_; a.sfa = sfa_.get<float>(); a.b = b_; a.sfb = sfb_.get<float>(); a.d = static_cast<float*>(d_);
      rt.launch_wgrad(*kern_, a, m_, s);
    }
    rg_->step_after(s);
  }
  int ops() const override { return rg_->step_quantize_ops() + (timed_l_ ? 1 : 0) + (timed_r_ ? 1 : 0) + 1; }
  std::string config() const override {
    return fmt::format("deepgemm {} ({}); {}; {}", name_, info_.config.describe(), prepare_text(info_), timed_);
  }

 private:
  dg::Kernel kernel_;
  int m_;
  std::unique_ptr<RecipeGemm> rg_;
  bool timed_l_ = false, timed_r_ = false;
  DeviceBuffer sfa_, sfb_;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  std::string name_, timed_;
  const void* a_ = nullptr;
  const void* b_ = nullptr;
  void* d_ = nullptr;
};

constexpr size_t kBf16 = 2;

// Fprop / Dgrad of the experts: DeepGEMM's M-grouped contiguous kernel, one launch.
class MGroupedRun final : public ProviderRun {
 public:
  MGroupedRun(GroupedSources& src, const Recipe& r, Mode mode, const RecipeOptions& opts, PrepareTotals& totals) {
    const Gemm& g = src.gemm;
    const int64_t n = g.n, k = g.k;
    const std::vector<int64_t> padded = deepgemm_padded_group(g);
    groups_ = static_cast<int>(padded.size());
    m_ = static_cast<int>(std::accumulate(padded.begin(), padded.end(), int64_t{0}));
    const cudaStream_t s = nullptr;
    GS_CUDA(cudaDeviceSynchronize());
    const std::vector<int64_t> off = copy_segments(src, src.tokens_l, k, padded, a_src_, s);
    std::vector<int> idx(static_cast<size_t>(m_), -1);
    for (int e = 0; e < groups_; ++e)
      for (int64_t i = 0; i < g.group[static_cast<size_t>(e)]; ++i) idx[static_cast<size_t>(off[static_cast<size_t>(e)] + i)] = e;
    m_indices_ = DeviceBuffer(idx.size() * sizeof(int));
    GS_CUDA(cudaMemcpy(m_indices_.get(), idx.data(), m_indices_.bytes(), cudaMemcpyHostToDevice));
    const Gemm eg = expert_gemm(g, m_);
    const OperandWork wl = operand_work(mode, eg, Side::Left, r, opts);
    const OperandWork wr = operand_work(mode, eg, Side::Right, r, opts);
    timed_a_ = wl.work != QuantWork::None;
    timed_w_ = wr.work != QuantWork::None;
    a_ = std::make_unique<QuantizedOperand>(r.a, a_src_.get<__nv_bfloat16>(), m_, k, true, opts);
    sfa_ = DeviceBuffer(dg_scale_floats(*a_) * sizeof(float));
    // An expert without rows has no weight in the sources and is never read by the kernel (no
    // row of m_indices names it): its slot of the stacked weights stays zero.
    for (int e = 0; e < groups_; ++e)
      w_.push_back(g.group[static_cast<size_t>(e)] == 0
                       ? nullptr
                       : std::make_unique<QuantizedOperand>(r.b, src.per_expert[static_cast<size_t>(e)].get<__nv_bfloat16>(),
                                                            n, k, g.b.k_major, opts));
    w_bytes_ = static_cast<size_t>(n * k);
    w_scales_ = static_cast<size_t>(dg::scales_128x128_deepgemm_count(static_cast<int>(n), static_cast<int>(k), 1));
    b_ = DeviceBuffer(w_bytes_ * static_cast<size_t>(groups_));
    sfb_ = DeviceBuffer(w_scales_ * static_cast<size_t>(groups_) * sizeof(float));
    GS_CUDA(cudaMemsetAsync(b_.get(), 0, b_.bytes(), s));
    GS_CUDA(cudaMemsetAsync(sfb_.get(), 0, sfb_.bytes(), s));
    d_ = DeviceBuffer(static_cast<size_t>(m_) * static_cast<size_t>(n) * kBf16);
    GS_CUDA(cudaMemsetAsync(d_.get(), 0xFF, d_.bytes(), s));  // NaN until written (tests read the real rows)
    row_offsets_ = off;
    quantize_a(s);
    quantize_w(s);
    GS_CUDA(cudaStreamSynchronize(s));
    dg::Problem p;
    p.layout = dg::Layout::MGroupedContiguous;
    p.m = m_;
    p.n = static_cast<int>(n);
    p.k = static_cast<int>(k);
    p.num_groups = groups_;
    kern_ = &dg::Runtime::get().prepare(p, &info_);
    totals.add(info_);
    timed_ = timed_text(mode, timed_a_ || timed_w_);
    if (mode != Mode::PreQuantized && wl.work == QuantWork::Dual) timed_ += " (a Dual operand is written in DeepGEMM's layout only)";
    if (mode != Mode::PreQuantized && timed_w_) timed_ += "; each expert's weight quantized and copied into the stacked weights";
  }

  void iteration(cudaStream_t s) override {
    if (timed_a_) quantize_a(s);
    if (timed_w_) quantize_w(s);
    dg::DenseArgs a;
    a.a = a_->lt().data; a.sfa = sfa_.get<float>(); a.b = b_.get(); a.sfb = sfb_.get<float>(); a.d = d_.get();
    a.m_indices = m_indices_.get<int>();
    dg::Runtime::get().launch_dense(*kern_, a, m_, s);
  }
  DeepGemmGroupedOutput output() const { return {d_.get(), row_offsets_, static_cast<int64_t>(m_)}; }

  int ops() const override {
    int n = 1;
    if (timed_a_) n += a_->quantize_ops() + 1;
    if (timed_w_)
      for (const auto& w : w_)
        if (w) n += w->quantize_ops() + 2;
    return n;
  }
  std::string config() const override {
    return fmt::format("deepgemm sm90_m_grouped_fp8_gemm_contiguous_1d2d ({}); {} experts in one launch, {} rows as "
                       "128-row segments; {}; {}",
                       info_.config.describe(), groups_, m_, prepare_text(info_), timed_);
  }

 private:
  void quantize_a(cudaStream_t s) {
    a_->quantize(s);
    convert_scales(*a_, sfa_.get<float>(), s);
  }
  void quantize_w(cudaStream_t s) {
    for (size_t e = 0; e < w_.size(); ++e) {
      if (!w_[e]) continue;
      w_[e]->quantize(s);
      GS_CUDA(cudaMemcpyAsync(b_.get<char>() + e * w_bytes_, w_[e]->lt().data, w_bytes_, cudaMemcpyDeviceToDevice, s));
      convert_scales(*w_[e], sfb_.get<float>() + e * w_scales_, s);
    }
  }

  int groups_ = 0, m_ = 0;
  std::vector<int64_t> row_offsets_;
  bool timed_a_ = false, timed_w_ = false;
  DeviceBuffer a_src_, m_indices_, sfa_, b_, sfb_, d_;
  std::unique_ptr<QuantizedOperand> a_;
  std::vector<std::unique_ptr<QuantizedOperand>> w_;
  size_t w_bytes_ = 0, w_scales_ = 0;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  std::string timed_;
};

// Wgrad of the experts: DeepGEMM's K-grouped contiguous 1d1d kernel, one launch for every expert,
// each expert's FP32 main gradient += its product. The experts' tokens are padded to 128 (zero
// tokens); each expert's operands are quantized by the engine's quantizer along its tokens (as the
// per-expert GEMMs would be) and laid one after another, as the kernel reads them; the outputs are
// the sources' per-expert gradients, one tensor [experts*m, n] (GroupedSources::allocate).
class KGroupedRun final : public ProviderRun {
 public:
  KGroupedRun(GroupedSources& src, const Recipe& r, Mode mode, const RecipeOptions& opts, PrepareTotals& totals) {
    const Gemm& g = src.gemm;
    const int64_t m = g.m, n = g.n;
    m_ = static_cast<int>(m);
    const std::vector<int64_t> padded = deepgemm_padded_group(g);
    groups_ = static_cast<int>(padded.size());
    for (size_t e = 0; e + 1 < src.per_expert.size(); ++e)
      if (src.per_expert[e + 1].get<char>() != src.per_expert[e].get<char>() + static_cast<size_t>(m * n) * 4)
        throw std::invalid_argument("DeepGEMM: its K-grouped Wgrad needs the experts' FP32 gradients as one tensor");
    d_ = src.per_expert.empty() ? nullptr : src.per_expert.front().get<float>();
    const cudaStream_t s = nullptr;
    GS_CUDA(cudaDeviceSynchronize());
    const std::vector<int64_t> off = copy_segments(src, src.tokens_l, m, padded, l_src_, s);
    copy_segments(src, src.tokens_r, n, padded, r_src_, s);
    const int64_t max_k = padded.empty() ? 0 : *std::max_element(padded.begin(), padded.end());
    const int64_t sum_k = std::accumulate(padded.begin(), padded.end(), int64_t{0});
    const Gemm eg = expert_gemm(g, std::max<int64_t>(max_k, 128));
    const OperandWork wl = operand_work(mode, eg, Side::Left, r, opts);
    const OperandWork wr = operand_work(mode, eg, Side::Right, r, opts);
    timed_l_ = wl.work != QuantWork::None;
    timed_r_ = wr.work != QuantWork::None;
    // The concatenated FP8 operands and their DeepGEMM-layout 1x128 scales, expert after expert.
    a_ = DeviceBuffer(static_cast<size_t>(m * sum_k));
    b_ = DeviceBuffer(static_cast<size_t>(n * sum_k));
    sfa_ = DeviceBuffer(static_cast<size_t>(sum_k / 128 * ((m + 3) / 4 * 4)) * sizeof(float));
    sfb_ = DeviceBuffer(static_cast<size_t>(sum_k / 128 * ((n + 3) / 4 * 4)) * sizeof(float));
    int64_t k_off = 0, sfa_off = 0, sfb_off = 0;
    for (size_t e = 0; e < padded.size(); ++e) {
      ks_.push_back(static_cast<int>(padded[e]));
      if (padded[e] == 0) continue;  // no tokens: the kernel skips the expert, its gradient gets nothing
      Expert x;
      x.l = std::make_unique<QuantizedOperand>(r.a, l_src_.get<__nv_bfloat16>() + off[e] * m, m, padded[e], false, opts);
      x.r = std::make_unique<QuantizedOperand>(r.b, r_src_.get<__nv_bfloat16>() + off[e] * n, n, padded[e], false, opts);
      x.a = a_.get<char>() + k_off * m;
      x.b = b_.get<char>() + k_off * n;
      x.sfa = sfa_.get<float>() + sfa_off;
      x.sfb = sfb_.get<float>() + sfb_off;
      x.a_bytes = static_cast<size_t>(m * padded[e]);
      x.b_bytes = static_cast<size_t>(n * padded[e]);
      k_off += padded[e];
      sfa_off += static_cast<int64_t>(dg_scale_floats(*x.l));
      sfb_off += static_cast<int64_t>(dg_scale_floats(*x.r));
      experts_.push_back(std::move(x));
    }
    for (Expert& x : experts_) quantize(x, true, true, s);
    ks_dev_ = DeviceBuffer(ks_.size() * sizeof(int));
    if (!ks_.empty()) GS_CUDA(cudaMemcpy(ks_dev_.get(), ks_.data(), ks_dev_.bytes(), cudaMemcpyHostToDevice));
    GS_CUDA(cudaStreamSynchronize(s));
    if (!experts_.empty()) {
      dg::Problem p;
      p.kernel = dg::Kernel::FP8_1D1D;
      p.layout = dg::Layout::KGroupedContiguous;
      p.m = m_;
      p.n = static_cast<int>(n);
      p.k = static_cast<int>(max_k);  // DeepGEMM's tile choice for K-grouped: the largest expert's K
      p.num_groups = groups_;
      kern_ = &dg::Runtime::get().prepare(p, &info_);
      totals.add(info_);
      tensor_maps_ = DeviceBuffer(dg::Runtime::tensor_map_buffer_bytes(*kern_));
    }
    timed_ = timed_text(mode, timed_l_ || timed_r_);
    if (mode != Mode::PreQuantized && (timed_l_ || timed_r_))
      timed_ += " (per expert: one quantization per operand, then a copy into the concatenated operand)";
  }

  void iteration(cudaStream_t s) override {
    if (!kern_) return;
    if (timed_l_ || timed_r_)
      for (Expert& x : experts_) quantize(x, timed_l_, timed_r_, s);
    dg::KGroupedArgs a;
    a.a = a_.get(); a.sfa = sfa_.get<float>(); a.b = b_.get(); a.sfb = sfb_.get<float>(); a.d = d_;
    a.ks = ks_dev_.get<int>();
    a.tensor_maps = tensor_maps_.get();
    dg::Runtime::get().launch_k_grouped(*kern_, a, ks_, s);
  }
  int ops() const override {
    int n = 1;
    for (const Expert& x : experts_)
      n += (timed_l_ ? x.l->quantize_ops() + 2 : 0) + (timed_r_ ? x.r->quantize_ops() + 2 : 0);
    return n;
  }
  std::string config() const override {
    if (experts_.empty()) return "deepgemm: no expert with tokens (nothing to add to the FP32 gradients)";
    return fmt::format("deepgemm sm90_k_grouped_fp8_gemm_contiguous_1d1d ({}); {} experts in one launch ({} with tokens), "
                       "each expert's tokens padded to 128; {}; {}",
                       info_.config.describe(), groups_, experts_.size(), prepare_text(info_), timed_);
  }

 private:
  struct Expert {
    std::unique_ptr<QuantizedOperand> l, r;
    char* a = nullptr;
    char* b = nullptr;
    float* sfa = nullptr;
    float* sfb = nullptr;
    size_t a_bytes = 0, b_bytes = 0;
  };
  static void quantize(Expert& x, bool l, bool r, cudaStream_t s) {
    if (l) {
      x.l->quantize(s);
      GS_CUDA(cudaMemcpyAsync(x.a, x.l->lt().data, x.a_bytes, cudaMemcpyDeviceToDevice, s));
      convert_scales(*x.l, x.sfa, s);
    }
    if (r) {
      x.r->quantize(s);
      GS_CUDA(cudaMemcpyAsync(x.b, x.r->lt().data, x.b_bytes, cudaMemcpyDeviceToDevice, s));
      convert_scales(*x.r, x.sfb, s);
    }
  }

  int m_ = 0, groups_ = 0;
  bool timed_l_ = false, timed_r_ = false;
  DeviceBuffer l_src_, r_src_, a_, b_, sfa_, sfb_, ks_dev_, tensor_maps_;
  std::vector<int> ks_;
  float* d_ = nullptr;
  std::vector<Expert> experts_;
  const dg::LoadedKernel* kern_ = nullptr;
  dg::PrepareInfo info_;
  std::string timed_;
};

class DeepGemmProvider final : public GemmProvider {
 public:
  const char* name() const override { return kProviderDeepGemm; }

  void configure(const EngineOptions& o) override {
    opts_ = o.recipe;
    requested_sms_ = o.gemm.num_sms;
    dg::Runtime::get().set_num_sms(requested_sms_);
  }

  std::string cannot_run(const Gemm& g, Precision, Mode, const Recipe& r, int cc) const override {
    if (!runtime_checked_) {
      runtime_why_ = dg::Runtime::get().unavailable_reason();
      runtime_checked_ = true;
    }
    if (!runtime_why_.empty()) return runtime_why_;
    return deepgemm_cell_problem(g, r, cc);
  }

  std::unique_ptr<ProviderRun> dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, int) override {
    if (!deepgemm_kernel(r)) throw std::invalid_argument("DeepGEMM: no kernel for this recipe");
    used_ = true;
    if (r.precision == Precision::BF16) return dgrun::make_bf16_dense(g, r, src, totals_);
    return std::make_unique<DenseRun>(g, r, m, src, opts_, totals_);
  }

  std::unique_ptr<ProviderRun> grouped(GroupedSources& src, const Recipe& r, Mode m, int) override {
    const auto k = deepgemm_kernel(r);
    if (!k) throw std::invalid_argument("DeepGEMM: no kernel for this recipe");
    used_ = true;
    if (r.precision == Precision::BF16) return dgrun::make_bf16_grouped(src, r, totals_);
    if (src.gemm.group_dim == GroupDim::M) return std::make_unique<MGroupedRun>(src, r, m, opts_, totals_);
    if (!src.fp32_out) throw std::invalid_argument("DeepGEMM: its Wgrad accumulates into FP32 main gradients only");
    return std::make_unique<KGroupedRun>(src, r, m, opts_, totals_);
  }

  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (!used_) return out;
    const auto& rt = dg::Runtime::get();
    const std::string dir = rt.cache().enabled() ? rt.cache().dir() : std::string("disabled");
    out.push_back(fmt::format(
        "deepgemm: {} kernel(s) compiled with NVRTC in {:.1f} s in all, {} loaded from the disk cache ({}), {} reused in "
        "this process; compiles happen when a cell is prepared, never inside a timed loop",
        totals_.compiled, totals_.compile_s, totals_.disk_hits, dir, totals_.memory_hits));
    const int sms = rt.num_sms();
    if (requested_sms_ > 0 && sms != requested_sms_)
      out.push_back(fmt::format("deepgemm: --num-sms {} runs DeepGEMM on {} SMs (set_num_sms needs an even count)",
                                requested_sms_, sms));
    else
      out.push_back(fmt::format("deepgemm: {} SMs (DeepGEMM's set_num_sms{})", sms,
                                requested_sms_ > 0 ? ", from --num-sms" : ": all of the device's, rounded down to even"));
    for (const std::string& n : totals_.store_notes) out.push_back("deepgemm: cache store failed: " + n);
    return out;
  }

 private:
  RecipeOptions opts_;
  int requested_sms_ = 0;
  mutable bool runtime_checked_ = false;
  mutable std::string runtime_why_;
  bool used_ = false;
  PrepareTotals totals_;
};

}  // namespace

std::unique_ptr<GemmProvider> make_deepgemm_provider() { return std::make_unique<DeepGemmProvider>(); }

std::optional<DeepGemmGroupedOutput> deepgemm_grouped_output(const ProviderRun& run) {
  if (const auto* m = dynamic_cast<const MGroupedRun*>(&run)) return m->output();
  return dgrun::bf16_grouped_output(run);
}

}  // namespace gs::cuda

// The CUTLASS provider's FP8 per-tensor cells (cutlass_fp8_run.hpp). No CUTLASS header here: the
// kernels are behind make_cutlass_grouped().
#include "cuda/providers/cutlass/cutlass_fp8_run.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

namespace {

// alpha[i] = scale_inv of A's tensor i x scale_inv of B's tensor i.
__global__ void scale_products(const float* const* sa, const float* const* sb, float* alpha, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) alpha[i] = *sa[i] * *sb[i];
}

// dst[t] = src[t] without its row padding: rows x cols of a [rows, src_ld] block-scale matrix (tensor
// t = blockIdx.y).
__global__ void compact_rows(const float* const* src, float* dst, int rows, int src_ld, int cols) {
  const int t = static_cast<int>(blockIdx.y);
  const float* in = src[t];
  float* out = dst + static_cast<size_t>(t) * rows * cols;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < rows * cols;
       i += static_cast<int>(gridDim.x * blockDim.x))
    out[i] = in[(i / cols) * src_ld + i % cols];
}

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) GS_CUDA(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The scales of a launch's groups as its family reads them. Per-tensor: an alpha array, one
// scale_inv product per group, computed by one small kernel. Block scaling: each group's own
// 1x128 / 128x128 scale buffers, except 128x128 weight scales whose rows the quantizer pads to a
// multiple of 4 blocks (cuBLASLt's layout) where ceil(k/128) is not: those are compacted into
// CUTLASS's layout by one small kernel.
class Fp8Scales {
 public:
  // a[i], b[i]: group i's quantized operands ([m, k] and [n, k]); all b share n and k.
  Fp8Scales(const Recipe& r, const std::vector<const QuantizedOperand*>& a, const std::vector<const QuantizedOperand*>& b)
      : n_(static_cast<int>(a.size())), block_(r.precision == Precision::FP8Block) {
    std::vector<const float*> sa, sb;
    for (size_t i = 0; i < a.size(); ++i) {
      sa.push_back(static_cast<const float*>(a[i]->lt().scale));
      sb.push_back(static_cast<const float*>(b[i]->lt().scale));
    }
    sa_host_ = sa;
    sb_host_ = sb;
    if (!block_) {
      sa_ = upload(sa);
      sb_ = upload(sb);
      alpha_ = DeviceBuffer(sa.size() * sizeof(float));
    } else if (!b.empty() && r.b.scaling == Scaling::Block128x128) {
      const int64_t kb = cdiv(b[0]->k(), 128), ld = cdiv(kb, 4) * 4;
      if (kb != ld) {
        rows_ = static_cast<int>(cdiv(b[0]->outer(), 128));
        cols_ = static_cast<int>(kb);
        ld_ = static_cast<int>(ld);
        sb_ = upload(sb);
        compact_ = DeviceBuffer(sb.size() * static_cast<size_t>(rows_ * cols_) * sizeof(float));
      }
    }
  }
  // Group i's scale arguments.
  void set(size_t i, CutlassGroup& g) const {
    if (!block_) return;
    g.sfa = sa_host_[i];
    g.sfb = compact_ ? compact_.get<float>() + i * static_cast<size_t>(rows_ * cols_) : sb_host_[i];
  }
  const float* alpha() const { return block_ ? nullptr : alpha_.get<float>(); }
  // Recomputes what derives from the quantizer's scales (after each quantization).
  void refresh(cudaStream_t s) const {
    if (n_ == 0) return;
    if (!block_) {
      scale_products<<<(n_ + 127) / 128, 128, 0, s>>>(sa_.get<const float* const>(), sb_.get<const float* const>(),
                                                     alpha_.get<float>(), n_);
      GS_CUDA_LAUNCH();
    } else if (compact_) {
      compact_rows<<<dim3(static_cast<unsigned>(cdiv(rows_ * cols_, 256)), static_cast<unsigned>(n_)), 256, 0, s>>>(
          sb_.get<const float* const>(), compact_.get<float>(), rows_, ld_, cols_);
      GS_CUDA_LAUNCH();
    }
  }
  int refresh_ops() const { return n_ > 0 && (!block_ || compact_) ? 1 : 0; }
  std::string describe() const {
    if (!block_) return "alpha = scale_a x scale_b per group";
    return compact_ ? "block scales in the mainloop; 128x128 scale rows compacted to CUTLASS's layout"
                    : "block scales in the mainloop, read in place";
  }

 private:
  int n_;
  bool block_;
  std::vector<const float*> sa_host_, sb_host_;
  DeviceBuffer sa_, sb_, alpha_, compact_;
  int rows_ = 0, cols_ = 0, ld_ = 0;
};

bool quantizes(const RecipeGemm& rg) {
  return rg.work(Side::Left).work != QuantWork::None || rg.work(Side::Right).work != QuantWork::None;
}

// Whether the scales Fp8Scales derives change within an iteration: per-tensor alphas when either
// operand is quantized in it, compacted 128x128 scales when the right operand (the weight) is.
bool scales_change(const Recipe& r, const RecipeGemm& rg) {
  if (r.precision != Precision::FP8Block) return quantizes(rg);
  return rg.work(Side::Right).work != QuantWork::None;
}

class DenseRun final : public ProviderRun {
 public:
  DenseRun(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, const RecipeOptions& opts,
           CutlassGroupedFamily f, int device)
      : rg_(nullptr, g, r, src, nullptr, opts, /*with_gemm=*/false, operand_work(m, g, Side::Left, r, opts),
            operand_work(m, g, Side::Right, r, opts)),
        scales_(r, {rg_.l()}, {rg_.r()}),
        in_loop_(scales_change(r, rg_)) {
    // The quantized copies are [m, k] and [n, k], K-contiguous: CUTLASS's A RowMajor, B ColumnMajor.
    CutlassGroup group{static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k),
                       rg_.l()->lt().data, rg_.r()->lt().data, src.c.get()};
    scales_.set(0, group);
    launch_ = make_cutlass_grouped(f, {group}, device, scales_.alpha());
    rg_.use_kernel(
        [this](cudaStream_t s) {
          if (in_loop_) scales_.refresh(s);
          launch_->run(s);
        },
        (in_loop_ ? scales_.refresh_ops() : 0) + 1);
    if (rg_.needs_prequantize()) rg_.prequantize(nullptr);
    if (!in_loop_) scales_.refresh(nullptr);
    GS_CUDA(cudaStreamSynchronize(nullptr));
  }
  void iteration(cudaStream_t s) override { rg_.step(s); }
  int ops() const override { return rg_.step_ops(); }
  std::string config() const override {
    return fmt::format("{}; a dense GEMM as one group; {}{}", launch_->config(), scales_.describe(),
                       scales_.refresh_ops() == 0 ? ""
                       : in_loop_               ? " (one kernel per iteration)"
                                                : " (before the timed loop)");
  }

 private:
  RecipeGemm rg_;
  Fp8Scales scales_;
  bool in_loop_;  // the scales' derived values change every iteration
  std::unique_ptr<CutlassGroupedLaunch> launch_;
};

class GroupedRun final : public ProviderRun {
 public:
  GroupedRun(GroupedSources& src, const Recipe& r, Mode m, const RecipeOptions& opts, CutlassGroupedFamily f,
             int device)
      : gg_(nullptr, src, r.precision, m, opts, /*streams=*/0, /*main=*/nullptr, nullptr, nullptr,
            /*with_gemm=*/false),
        family_(f) {
    const Gemm& g = src.gemm;
    std::vector<CutlassGroup> groups;
    std::vector<const QuantizedOperand*> qa, qb;
    auto* out = src.out.get<char>();
    for (int e = 0; e < gg_.experts(); ++e) {
      const RecipeGemm* rg = gg_.expert(e);
      const DeviceBuffer& c = gg_.expert_sources(e).c;
      if (!rg) {
        // No rows or tokens: nothing to compute. A BF16 Wgrad gradient is zeroed (as Transformer
        // Engine and the cuBLASLt path do); an FP32 main gradient gets nothing added.
        if (g.group_dim == GroupDim::K && !src.fp32_out) zero_.push_back(&c);
        continue;
      }
      quantizes_ = quantizes_ || quantizes(*rg);
      in_loop_ = in_loop_ || scales_change(r, *rg);
      const Gemm eg = gg_.expert_gemm_of(e);
      void* d = g.group_dim == GroupDim::M ? static_cast<void*>(out + src.offsets[static_cast<size_t>(e)] * g.n * 2)
                                           : c.get();
      groups.push_back({static_cast<int>(eg.m), static_cast<int>(eg.n), static_cast<int>(eg.k), rg->l()->lt().data,
                        rg->r()->lt().data, d});
      qa.push_back(rg->l());
      qb.push_back(rg->r());
    }
    quant_ = gg_.quantizer();
    if (quantizes_ && !(quant_ && quant_->has_quantize()))
      throw std::invalid_argument(
          "CUTLASS: a grouped FP8 launch quantizes its experts with the multi-tensor kernels only "
          "(--grouped-quant fused, the default)");
    groups_ = groups.size();
    scales_ = std::make_unique<Fp8Scales>(r, qa, qb);
    for (size_t i = 0; i < groups.size(); ++i) scales_->set(i, groups[i]);
    if (!groups.empty()) launch_ = make_cutlass_grouped(f, groups, device, scales_->alpha());
    gg_.prepare();
    if (!in_loop_) scales_->refresh(nullptr);
    GS_CUDA(cudaStreamSynchronize(nullptr));
  }

  void iteration(cudaStream_t s) override {
    for (const DeviceBuffer* z : zero_) GS_CUDA(cudaMemsetAsync(z->get(), 0, z->bytes(), s));
    if (!launch_) return;
    if (quantizes_) quant_->quantize(s);
    if (in_loop_) scales_->refresh(s);
    launch_->run(s);
    if (quantizes_ && quant_->has_after()) quant_->after_gemms(s);
  }
  int ops() const override {
    int n = static_cast<int>(zero_.size());
    if (!launch_) return n;
    if (quantizes_) n += quant_->quantize_ops() + quant_->after_ops();
    if (in_loop_) n += scales_->refresh_ops();
    return n + 1;
  }
  std::string config() const override {
    if (!launch_) return fmt::format("cutlass {}: no group with work", to_string(family_));
    return fmt::format("{}; {} groups in one launch; {}{}", launch_->config(), groups_, scales_->describe(),
                       scales_->refresh_ops() == 0 ? ""
                       : in_loop_                 ? " (one kernel per iteration, after the multi-tensor quantization)"
                                                  : " (before the timed loop)");
  }

 private:
  GroupedGemm gg_;
  CutlassGroupedFamily family_;
  const GroupedQuantizer* quant_ = nullptr;
  bool quantizes_ = false;  // the iteration quantizes (multi-tensor launches)
  bool in_loop_ = false;    // the scales' derived values change every iteration
  size_t groups_ = 0;
  std::unique_ptr<Fp8Scales> scales_;
  std::unique_ptr<CutlassGroupedLaunch> launch_;
  std::vector<const DeviceBuffer*> zero_;
};

}  // namespace

std::unique_ptr<ProviderRun> make_cutlass_fp8_dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src,
                                                    const RecipeOptions& opts, CutlassGroupedFamily f, int device) {
  return std::make_unique<DenseRun>(g, r, m, src, opts, f, device);
}

std::unique_ptr<ProviderRun> make_cutlass_fp8_grouped(GroupedSources& src, const Recipe& r, Mode m,
                                                      const RecipeOptions& opts, CutlassGroupedFamily f, int device) {
  return std::make_unique<GroupedRun>(src, r, m, opts, f, device);
}

}  // namespace gs::cuda

// The CUTLASS provider's FP8 per-tensor cells (cutlass_fp8_run.hpp). No CUTLASS header here: the
// kernels are behind make_cutlass_grouped().
#include "cuda/cutlass_fp8_run.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/recipe_gemm.hpp"

namespace gs::cuda {

namespace {

// alpha[i] = scale_inv of A's tensor i x scale_inv of B's tensor i.
__global__ void scale_products(const float* const* sa, const float* const* sb, float* alpha, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) alpha[i] = *sa[i] * *sb[i];
}

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) GS_CUDA(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

// The per-group alpha array of a launch and the kernel that fills it.
class GroupAlphas {
 public:
  GroupAlphas(const std::vector<const float*>& sa, const std::vector<const float*>& sb)
      : n_(static_cast<int>(sa.size())), sa_(upload(sa)), sb_(upload(sb)), alpha_(sa.size() * sizeof(float)) {}
  void compute(cudaStream_t s) const {
    if (n_ == 0) return;
    scale_products<<<(n_ + 127) / 128, 128, 0, s>>>(sa_.get<const float* const>(), sb_.get<const float* const>(),
                                                   alpha_.get<float>(), n_);
    GS_CUDA_LAUNCH();
  }
  const float* get() const { return alpha_.get<float>(); }

 private:
  int n_;
  DeviceBuffer sa_, sb_, alpha_;
};

bool quantizes(const RecipeGemm& rg) {
  return rg.work(Side::Left).work != QuantWork::None || rg.work(Side::Right).work != QuantWork::None;
}

const char* kAlphaNote = "alpha = scale_a x scale_b per group";

class DenseRun final : public ProviderRun {
 public:
  DenseRun(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, const RecipeOptions& opts,
           CutlassGroupedFamily f, int device)
      : rg_(nullptr, g, r, src, nullptr, opts, /*with_gemm=*/false, operand_work(m, g, Side::Left, r, opts),
            operand_work(m, g, Side::Right, r, opts)),
        alphas_({static_cast<const float*>(rg_.l()->lt().scale)}, {static_cast<const float*>(rg_.r()->lt().scale)}),
        quantizes_(quantizes(rg_)) {
    // The quantized copies are [m, k] and [n, k], K-contiguous: CUTLASS's A RowMajor, B ColumnMajor.
    launch_ = make_cutlass_grouped(f, {{static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k),
                                        rg_.l()->lt().data, rg_.r()->lt().data, src.c.get()}},
                                   device, alphas_.get());
    rg_.use_kernel(
        [this](cudaStream_t s) {
          if (quantizes_) alphas_.compute(s);
          launch_->run(s);
        },
        quantizes_ ? 2 : 1);
    if (rg_.needs_prequantize()) rg_.prequantize(nullptr);
    if (!quantizes_) alphas_.compute(nullptr);
    GS_CUDA(cudaStreamSynchronize(nullptr));
  }
  void iteration(cudaStream_t s) override { rg_.step(s); }
  int ops() const override { return rg_.step_ops(); }
  std::string config() const override {
    return fmt::format("{}; a dense GEMM as one group; {} ({})", launch_->config(), kAlphaNote,
                       quantizes_ ? "one kernel per iteration" : "computed before the timed loop");
  }

 private:
  RecipeGemm rg_;
  GroupAlphas alphas_;
  bool quantizes_;
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
    std::vector<const float*> sa, sb;
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
      const Gemm eg = gg_.expert_gemm_of(e);
      void* d = g.group_dim == GroupDim::M ? static_cast<void*>(out + src.offsets[static_cast<size_t>(e)] * g.n * 2)
                                           : c.get();
      groups.push_back({static_cast<int>(eg.m), static_cast<int>(eg.n), static_cast<int>(eg.k), rg->l()->lt().data,
                        rg->r()->lt().data, d});
      sa.push_back(static_cast<const float*>(rg->l()->lt().scale));
      sb.push_back(static_cast<const float*>(rg->r()->lt().scale));
    }
    quant_ = gg_.quantizer();
    if (quantizes_ && !(quant_ && quant_->has_quantize()))
      throw std::invalid_argument(
          "CUTLASS: a grouped FP8 launch quantizes its experts with the multi-tensor kernels only "
          "(--grouped-quant fused, the default)");
    groups_ = groups.size();
    alphas_ = std::make_unique<GroupAlphas>(sa, sb);
    if (!groups.empty()) launch_ = make_cutlass_grouped(f, groups, device, alphas_->get());
    gg_.prepare();
    if (!quantizes_) alphas_->compute(nullptr);
    GS_CUDA(cudaStreamSynchronize(nullptr));
  }

  void iteration(cudaStream_t s) override {
    for (const DeviceBuffer* z : zero_) GS_CUDA(cudaMemsetAsync(z->get(), 0, z->bytes(), s));
    if (!launch_) return;
    if (quantizes_) {
      quant_->quantize(s);
      alphas_->compute(s);
    }
    launch_->run(s);
    if (quantizes_ && quant_->has_after()) quant_->after_gemms(s);
  }
  int ops() const override {
    int n = static_cast<int>(zero_.size());
    if (!launch_) return n;
    if (quantizes_) n += quant_->quantize_ops() + 1 + quant_->after_ops();
    return n + 1;
  }
  std::string config() const override {
    if (!launch_) return fmt::format("cutlass {}: no group with work", to_string(family_));
    return fmt::format("{}; {} groups in one launch; {} ({})", launch_->config(), groups_, kAlphaNote,
                       quantizes_ ? "one kernel per iteration, after the multi-tensor quantization"
                                  : "computed before the timed loop");
  }

 private:
  GroupedGemm gg_;
  CutlassGroupedFamily family_;
  const GroupedQuantizer* quant_ = nullptr;
  bool quantizes_ = false;
  size_t groups_ = 0;
  std::unique_ptr<GroupAlphas> alphas_;
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

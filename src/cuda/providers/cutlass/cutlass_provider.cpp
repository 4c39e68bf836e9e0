// The CUTLASS provider (provider.hpp): sm90 grouped BF16 and FP8 per-tensor GEMMs as a single
// ptr-array launch (cutlass_grouped.hpp). Fprop and Dgrad are grouped along M (each expert's rows of
// one token-major buffer, its own weight); Wgrad along K, as a ptr-array GEMM whose groups differ in
// K (each expert's tokens), writing each expert's FP32 main gradient with beta = 1 (the default
// training semantics) or a BF16 gradient. CUTLASS has no K-grouped kernel as such on sm90: the
// ptr-array grouped kernel takes every group's (m, n, k) from device memory, which serves the same
// purpose in one launch. A dense GEMM runs as the same kernel with one group (no further
// instantiation; its configuration says so). FP8 per-tensor (FP8Current, FP8Delayed) and FP8 block
// scaling (FP8Block, CUTLASS's blockwise ptr-array kernel) quantize as the cuBLASLt cell does and run
// the same single launch on the K-major copies (cutlass_fp8_run.hpp).
#include <fmt/format.h>

#include <climits>
#include <optional>
#include <stdexcept>

#include "core/gpu/arch_policy.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/cutlass/cutlass_fp8_run.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/provider.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

namespace {

constexpr size_t kBf16 = 2;

class CutlassGroupedRun final : public ProviderRun {
 public:
  CutlassGroupedRun(GroupedSources& src, int device) {
    const Gemm& g = src.gemm;
    std::vector<CutlassGroup> groups;
    auto* tl = src.tokens_l.get<char>();
    auto* tr = src.tokens_r.get<char>();
    auto* out = src.out.get<char>();
    CutlassGroupedFamily family;
    if (g.group_dim == GroupDim::M) {
      family = g.b.k_major ? CutlassGroupedFamily::Bf16RowCol : CutlassGroupedFamily::Bf16RowRow;
      for (size_t e = 0; e < src.sizes.size(); ++e) {
        const int64_t rows = src.sizes[e], off = src.offsets[e];
        if (rows == 0) continue;  // no rows: no work
        groups.push_back({static_cast<int>(rows), static_cast<int>(g.n), static_cast<int>(g.k),
                          tl + static_cast<size_t>(off * g.k) * kBf16, src.per_expert[e].get(),
                          out + static_cast<size_t>(off * g.n) * kBf16});
      }
    } else {
      family = src.fp32_out ? CutlassGroupedFamily::Bf16ColRowF32Acc : CutlassGroupedFamily::Bf16ColRowBf16;
      for (size_t e = 0; e < src.sizes.size(); ++e) {
        const int64_t tokens = src.sizes[e], off = src.offsets[e];
        if (tokens == 0) {
          // No tokens: an FP32 main gradient gets nothing added; a BF16 gradient is zeroed, as
          // Transformer Engine does (and the cuBLASLt path, grouped_gemm.hpp).
          if (!src.fp32_out) zero_.push_back(&src.per_expert[e]);
          continue;
        }
        groups.push_back({static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(tokens),
                          tl + static_cast<size_t>(off * g.m) * kBf16, tr + static_cast<size_t>(off * g.n) * kBf16,
                          src.per_expert[e].get()});
      }
    }
    family_ = family;
    if (!groups.empty()) launch_ = make_cutlass_grouped(family, groups, device);
    groups_ = groups.size();
  }

  void iteration(cudaStream_t s) override {
    for (const DeviceBuffer* z : zero_) GS_CUDA(cudaMemsetAsync(z->get(), 0, z->bytes(), s));
    if (launch_) launch_->run(s);
  }
  int ops() const override { return static_cast<int>(zero_.size()) + (launch_ ? 1 : 0); }
  std::string config() const override {
    return launch_ ? fmt::format("{}; {} groups in one launch", launch_->config(), groups_)
                   : fmt::format("cutlass {}: no group with work", to_string(family_));
  }

 private:
  CutlassGroupedFamily family_{};
  size_t groups_ = 0;
  std::unique_ptr<CutlassGroupedLaunch> launch_;
  std::vector<const DeviceBuffer*> zero_;
};

// The family of a dense GEMM's operand layouts (l K-major, r K-major, FP32 output), or none.
std::optional<CutlassGroupedFamily> dense_family(bool l_k_major, bool r_k_major, bool fp32_out) {
  if (l_k_major && !fp32_out) return r_k_major ? CutlassGroupedFamily::Bf16RowCol : CutlassGroupedFamily::Bf16RowRow;
  if (!l_k_major && !r_k_major) return fp32_out ? CutlassGroupedFamily::Bf16ColRowF32Acc : CutlassGroupedFamily::Bf16ColRowBf16;
  return std::nullopt;
}

// A dense GEMM as a ptr-array launch of one group.
class CutlassDenseRun final : public ProviderRun {
 public:
  CutlassDenseRun(GemmSources& src, CutlassGroupedFamily family, int device)
      : launch_(make_cutlass_grouped(family, {{static_cast<int>(src.m), static_cast<int>(src.n), static_cast<int>(src.k),
                                                src.l.get(), src.r.get(), src.c.get()}},
                                     device)) {}
  void iteration(cudaStream_t s) override { launch_->run(s); }
  int ops() const override { return 1; }
  std::string config() const override { return launch_->config() + "; a dense GEMM as one group"; }

 private:
  std::unique_ptr<CutlassGroupedLaunch> launch_;
};

class CutlassProvider final : public GemmProvider {
  static CutlassGroupedFamily fp8_family(const Recipe& r) {
    const auto f = cutlass_fp8_family(r);
    if (!f) throw std::invalid_argument("CUTLASS: no FP8 kernel instantiated for this recipe");
    return *f;
  }
  // FP8 per-tensor: an instantiated family for the operand formats, output and accumulation;
  // TMA's 16-byte rows are FP8's 16 elements, which the FP8 shape rule already requires
  // (core/recipes/recipe.hpp shape_constraint, per expert for grouped GEMMs).
  static std::string cannot_run_fp8(const Gemm& g, const Recipe& r) {
    if (!cutlass_fp8_family(r))
      return fmt::format("CUTLASS: no FP8 kernel instantiated for {} {} x {} {}, {} accumulation, {} output (built: {})",
                         to_string(r.a.format), to_string(r.a.scaling), to_string(r.b.format), to_string(r.b.scaling),
                         r.fast_accum ? "fast" : "split", r.fp32_accumulate ? "FP32 accumulated" : "BF16",
                         cutlass_fp8_families_built());
    if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX) return "CUTLASS: a dimension above 2^31";
    return {};
  }

 public:
  const char* name() const override { return "cutlass"; }

  std::string cannot_run(const Gemm& g, Precision, Mode, const Recipe& r, int cc) const override {
    if (!cutlass_built()) return "CUTLASS: not in this build (GEMMSCOPE_CUTLASS_DIR was not found when it was built)";
    if (!ArchPolicy(cc).kernel_target()) {
      const KernelTarget& t = ArchPolicy::arch_kernels_target();
      return fmt::format("CUTLASS: the kernels are built for {} ({}) only; this device is sm_{}", t.arch, t.family, cc);
    }
    if (r.precision != Precision::BF16 && r.precision != Precision::FP8Current && r.precision != Precision::FP8Delayed &&
        r.precision != Precision::FP8Block)
      return fmt::format("CUTLASS: no {} kernel on sm_90 (Blackwell block-scaled formats)", to_string(r.precision));
    if (r.precision != Precision::BF16) return cannot_run_fp8(g, r);
    if (!g.grouped()) {
      if (!dense_family(g.a.k_major, g.b.k_major, r.fp32_accumulate))
        return fmt::format("CUTLASS: no kernel for this operand layout (left {}, right {}{})",
                           g.a.k_major ? "K-major" : "M-major", g.b.k_major ? "K-major" : "N-major",
                           r.fp32_accumulate ? ", FP32 output" : "");
      // TMA: every operand's contiguous rows start on 16 bytes (8 BF16 elements).
      const int64_t l = g.a.k_major ? g.k : g.m, rr = g.b.k_major ? g.k : g.n;
      if (l % 8 != 0 || rr % 8 != 0 || g.n % 8 != 0)
        return fmt::format("CUTLASS: BF16 needs every operand's contiguous dimension a multiple of 8 ({})", g.shape());
      if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX) return "CUTLASS: a dimension above 2^31";
      return {};
    }
    // TMA: every row of every operand starts on 16 bytes (8 BF16 elements; FP32 outputs 4).
    const int64_t a = g.group_dim == GroupDim::M ? g.k : g.m;
    if (a % 8 != 0 || g.n % 8 != 0)
      return fmt::format("CUTLASS: grouped BF16 needs {} and n multiples of 8 (16-byte rows), got {} and {}",
                         g.group_dim == GroupDim::M ? "k" : "m", a, g.n);
    return {};
  }

  void configure(const EngineOptions& o) override { recipe_opts_ = o.recipe; }

  std::unique_ptr<ProviderRun> dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, int device) override {
    if (r.precision != Precision::BF16) return make_cutlass_fp8_dense(g, r, m, src, recipe_opts_, fp8_family(r), device);
    const auto family = dense_family(g.a.k_major, g.b.k_major, r.fp32_accumulate);
    if (!family) throw std::invalid_argument("CUTLASS: no kernel for this operand layout");
    return std::make_unique<CutlassDenseRun>(src, *family, device);
  }

  std::unique_ptr<ProviderRun> grouped(GroupedSources& src, const Recipe& r, Mode m, int device) override {
    if (r.precision != Precision::BF16) return make_cutlass_fp8_grouped(src, r, m, recipe_opts_, fp8_family(r), device);
    return std::make_unique<CutlassGroupedRun>(src, device);
  }

 private:
  RecipeOptions recipe_opts_;  // configure(): what the FP8 cells quantize with, as the cuBLASLt cell
};

}  // namespace

std::unique_ptr<GemmProvider> make_cutlass_provider() { return std::make_unique<CutlassProvider>(); }

}  // namespace gs::cuda

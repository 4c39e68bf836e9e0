#include "core/gpu/arch_policy.hpp"
#include "core/providers/deepgemm_cells.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <numeric>

#include "core/recipes/grouped.hpp"
#include "core/results/results.hpp"

namespace gs {

std::optional<dg::Kernel> deepgemm_kernel(const Recipe& r) {
  if (r.precision == Precision::BF16) return r.fp32_accumulate ? dg::Kernel::BF16_FP32 : dg::Kernel::BF16;
  if (r.precision != Precision::FP8Block) return std::nullopt;
  if (r.a.format != ElemFormat::E4M3 || r.b.format != ElemFormat::E4M3) return std::nullopt;
  if (r.a.scaling != Scaling::Block1x128) return std::nullopt;
  if (r.b.scaling == Scaling::Block128x128 && !r.fp32_accumulate) return dg::Kernel::FP8_1D2D;
  if (r.b.scaling == Scaling::Block1x128 && r.fp32_accumulate) return dg::Kernel::FP8_1D1D;
  return std::nullopt;
}

namespace {

std::string scaling_text(Scaling s) {
  switch (s) {
    case Scaling::Block1x128: return "1x128";
    case Scaling::Block128x128: return "128x128";
    default: return to_string(s);
  }
}

// sm90_bf16_gemm: dense (any operand majors), M-grouped contiguous (K-major A, BF16 out),
// K-grouped (MN-major operands: the grouped Wgrad, each expert's tokens padded to 128); the Wgrad
// into the FP32 main gradient with its accumulating (TMA reduce-add) FP32 output.
std::string bf16_cell_problem(const Gemm& g, const Recipe& r) {
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
    return fmt::format("DeepGEMM: a dimension above 2^31 ({})", g.shape());
  if (g.grouped() && g.group_dim == GroupDim::M && !g.a.k_major)
    return "DeepGEMM: its M-grouped contiguous BF16 GEMM needs a K-major left operand";
  if (g.grouped() && g.group_dim == GroupDim::K && (g.a.k_major || g.b.k_major))
    return "DeepGEMM: its K-grouped BF16 GEMM takes token-major (MN-major) operands only";
  // (A K-grouped Wgrad's K is each expert's tokens, padded to 128.)
  if (!(g.grouped() && g.group_dim == GroupDim::K) && g.k % 64 != 0)
    return fmt::format("DeepGEMM: its BF16 GEMM is run with K % 64 == 0 only (K = {})", g.k);
  if (r.fp32_accumulate) {
    if (g.n % 4 != 0) return fmt::format("DeepGEMM: its FP32 output needs N % 4 == 0 (N = {})", g.n);
  } else if (g.n % 64 != 0) {
    return fmt::format("DeepGEMM: its BF16-output TMA store needs N % 64 == 0 (N = {})", g.n);
  }
  if (!g.a.k_major && g.m % 8 != 0)
    return fmt::format("DeepGEMM: an M-major BF16 left operand needs M % 8 == 0 (16-byte TMA strides; M = {})", g.m);
  if (!g.b.k_major && g.n % 8 != 0)
    return fmt::format("DeepGEMM: an N-major BF16 right operand needs N % 8 == 0 (16-byte TMA strides; N = {})", g.n);
  return {};
}

}  // namespace

std::string deepgemm_cell_problem(const Gemm& g, const Recipe& r, int cc) {
  if (!ArchPolicy(cc).kernel_target()) {
    const KernelTarget& t = ArchPolicy::arch_kernels_target();
    return fmt::format("DeepGEMM: the provider builds DeepGEMM's sm90 kernels, which run on {} (sm_{}) only; this "
                       "device is sm_{}",
                       t.family, t.cc, cc);
  }
  if (r.precision == Precision::BF16) return bf16_cell_problem(g, r);
  if (r.precision != Precision::FP8Block)
    return fmt::format("DeepGEMM: runs DeepSeek's FP8 block recipe only (FP8Block: 1x128 activations and gradients, "
                       "128x128 weights); it has no {} kernel",
                       to_string(r.precision));
  if (r.a.format != ElemFormat::E4M3 || r.b.format != ElemFormat::E4M3)
    return fmt::format("DeepGEMM: E4M3 operands only; this recipe gives {} x {} (--block-fp8-format e4m3, the default, runs it)",
                       to_string(r.a.format), to_string(r.b.format));
  const auto kernel = deepgemm_kernel(r);
  if (!kernel) {
    if (g.pass == Pass::Wgrad && r.a.scaling == Scaling::Block1x128 && r.b.scaling == Scaling::Block1x128 &&
        !r.fp32_accumulate)
      return "DeepGEMM: its Wgrad kernel (wgrad_gemm_fp8_fp8_fp32_nt) accumulates into an FP32 main gradient; no "
             "DeepGEMM kernel writes a BF16 Wgrad with 1x128 scales on both operands (--wgrad-output fp32-accumulate "
             "runs it)";
    return fmt::format("DeepGEMM: no kernel for {} x {} scaling{}", scaling_text(r.a.scaling), scaling_text(r.b.scaling),
                       r.fp32_accumulate ? " with an FP32 accumulating output" : "");
  }
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
    return fmt::format("DeepGEMM: a dimension above 2^31 ({})", g.shape());
  if (*kernel == dg::Kernel::FP8_1D2D) {
    if (g.grouped() && g.group_dim != GroupDim::M)
      return "DeepGEMM: a BF16-output grouped GEMM must be grouped along M (the M-grouped contiguous kernel)";
    if (g.k % 128 != 0) return fmt::format("DeepGEMM: its FP8 kernels need K % 128 == 0 (K = {})", g.k);
    if (g.n % 64 != 0) return fmt::format("DeepGEMM: its BF16-output TMA store needs N % 64 == 0 (N = {})", g.n);
    return {};
  }
  // FP8_1D1D: Wgrad, K = tokens. Grouped (along K): every expert's tokens are padded to 128.
  if (g.grouped() && g.group_dim != GroupDim::K)
    return "DeepGEMM: its FP32-accumulating Wgrad is grouped along K (each expert's tokens), not M";
  if (!g.grouped() && g.k % 128 != 0)
    return fmt::format("DeepGEMM: its FP8 kernels need K % 128 == 0 (Wgrad's K = tokens = {})", g.k);
  if (g.n % 4 != 0) return fmt::format("DeepGEMM: its FP32 Wgrad output needs N % 4 == 0 (N = {})", g.n);
  return {};
}

std::vector<int64_t> deepgemm_padded_group(const Gemm& g) {
  std::vector<int64_t> out;
  if (!g.grouped()) return out;
  const int64_t a = dg::kMGroupedAlignment;
  out.reserve(g.group.size());
  for (int64_t x : g.group) out.push_back((x + a - 1) / a * a);
  return out;
}

std::vector<PaddingWaste> padding_waste(const RunResult& r) {
  std::vector<PaddingWaste> out;
  const Gemm* up = nullptr;
  for (const Gemm& g : r.plan.gemms)
    if (g.grouped() && g.pass == Pass::Fprop && g.op == Op::ExpertUp) up = &g;
  if (!up) return out;
  const int64_t rows = std::accumulate(up->group.begin(), up->group.end(), int64_t{0});
  auto listed = [&](Precision p) {
    return r.precisions.empty() || std::find(r.precisions.begin(), r.precisions.end(), p) != r.precisions.end();
  };
  for (Precision p : kAllPrecisions) {
    if (!listed(p) || group_alignment(p) == 1) continue;
    out.push_back({kProviderCublasLt, p, group_alignment(p), rows, padded_waste(*up, p)});
  }
  const bool dg = std::find(r.providers.begin(), r.providers.end(), kProviderDeepGemm) != r.providers.end();
  if (dg && listed(Precision::FP8Block)) {
    const std::vector<int64_t> padded = deepgemm_padded_group(*up);
    const int64_t sum = std::accumulate(padded.begin(), padded.end(), int64_t{0});
    out.push_back({kProviderDeepGemm, Precision::FP8Block, dg::kMGroupedAlignment, rows, sum - rows});
  }
  return out;
}

}  // namespace gs

// The DeepGEMM provider's kernel choice for sm90, in pure C++ (no CUDA): which tile, pipeline
// depth, TMA multicast and thread counts a GEMM gets. A re-implementation of the selection that
// DeepGEMM's csrc/jit_kernels/heuristics/sm90.hpp makes (commit 54e22612), for the kernels this
// provider runs; differences are listed in docs/architecture.md ("DeepGEMM provider").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs::dg {

// FP8_1D2D: gemm_fp8_fp8_bf16_nt (BF16 out); FP8_1D1D: wgrad_gemm_fp8_fp8_fp32_nt (FP32 D += A·Bᵀ);
// BF16: sm90_bf16_gemm with BF16 out; BF16_FP32: the same kernel into FP32 with accumulation
// (D += A·Bᵀ, its TMA reduce-add store: the Wgrad into the FP32 main gradient).
enum class Kernel { FP8_1D2D, FP8_1D1D, BF16, BF16_FP32 };
inline bool is_bf16(Kernel k) { return k == Kernel::BF16 || k == Kernel::BF16_FP32; }
enum class Layout { Normal, MGroupedContiguous, KGroupedContiguous };

// DeepGEMM's M alignment of contiguous expert segments on sm90 (its legacy 128).
inline constexpr int kMGroupedAlignment = 128;
// Usable shared memory per block on sm90 (bytes), as DeepGEMM assumes.
inline constexpr int kSm90SmemCapacity = 232448;

struct Problem {
  Kernel kernel = Kernel::FP8_1D2D;
  Layout layout = Layout::Normal;
  int m = 0, n = 0, k = 0, num_groups = 1;
  int num_sms = 132;  // DeepGEMM requires an even count (set_num_sms)
  // K a run-time argument (template SHAPE_K = 0) instead of compiled in: one kernel serves every
  // K, as the per-expert Wgrad launches of a grouped Wgrad need (k is then the tile choice's K).
  bool runtime_k = false;
  // Operand majors (BF16 kernels only: the FP8 kernels take K-major operands): A [m, k] is
  // K-major when k is contiguous, else MN-major ([k, m], m contiguous); B likewise with n.
  bool a_k_major = true, b_k_major = true;
};

struct Config {
  int block_m = 0, block_n = 0, block_k = 128;
  int cluster_m = 1, cluster_n = 1;  // TMA multicast: cluster of 2 on A (cluster_n) or on B (cluster_m)
  int swizzle_a = 0, swizzle_b = 0, swizzle_cd = 0;
  int num_stages = 0, smem_bytes = 0;
  int num_tma_threads = 128, num_math_threads = 0;
  int num_sms = 0;
  int cluster_size() const { return cluster_m * cluster_n; }
  bool multicast_on_a() const { return cluster_n > 1; }
  int threads() const { return num_tma_threads + num_math_threads; }
  std::string describe() const;
};

// Empty string if the problem is one this provider runs, else why not (one line).
std::string unsupported_reason(const Problem& p);
// The best config by DeepGEMM's modelled L1/L2 cycles. Call only when unsupported_reason is empty.
Config best_config(const Problem& p);

}  // namespace gs::dg

namespace gs::dg {

// The NVRTC translation unit for one (problem, config): it includes DeepGEMM's kernel header and
// names one instantiation; `name_expression` is what NVRTC lowers to the kernel's symbol.
struct Instantiation {
  std::string kernel_name;      // short name for logs and the cache file
  std::string source;
  std::string name_expression;
};
Instantiation instantiation(const Problem& p, const Config& c);

}  // namespace gs::dg

namespace gs::dg {

// DeepGEMM's M-grouped contiguous layout: each expert's rows padded to kMGroupedAlignment.
// The padding rows are computed for no token: the waste the report shows beside FP8's padding.
struct GroupedPadding {
  int64_t useful_rows = 0, padded_rows = 0;
  double waste() const { return padded_rows ? static_cast<double>(padded_rows - useful_rows) / static_cast<double>(padded_rows) : 0.0; }
};
GroupedPadding grouped_padding(const std::vector<int64_t>& tokens_per_expert, int alignment = kMGroupedAlignment);

}  // namespace gs::dg

#include "core/providers/deepgemm_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace gs::dg {

namespace {

int div_up(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
int round_up(int a, int b) { return (a + b - 1) / b * b; }

// Largest of 128/64/32/16 bytes dividing the inner extent: the TMA swizzle (16 = none).
int swizzle_for(int inner_elems, int elem_bytes) {
  const int bytes = inner_elems * elem_bytes;
  for (int mode : {128, 64, 32, 16})
    if (bytes % mode == 0) return mode;
  return 0;
}

bool bf16_out(const Problem& p) { return p.kernel == Kernel::FP8_1D2D || p.kernel == Kernel::BF16; }
int cd_bytes(const Problem& p) { return bf16_out(p) ? 2 : 4; }
int ab_bytes(const Problem& p) { return is_bf16(p.kernel) ? 2 : 1; }
bool accumulates(const Problem& p) { return p.kernel == Kernel::FP8_1D1D || p.kernel == Kernel::BF16_FP32; }
// DeepGEMM's block K: 128 bytes of the operand type (128 FP8, 64 BF16).
int block_k_for(const Problem& p) { return 128 / ab_bytes(p); }

// Storage (swizzles) and pipeline (stages, smem) for one tile choice.
void fill_storage_and_pipeline(const Problem& p, Config& c) {
  const int store_block_m = p.kernel == Kernel::FP8_1D1D ? 64 : c.block_m;  // 1d1d stores per warp group
  // The swizzle follows each operand's contiguous dimension (K, or M/N for an MN-major BF16 operand).
  c.swizzle_a = swizzle_for(p.a_k_major ? c.block_k : c.block_m, ab_bytes(p));
  c.swizzle_b = swizzle_for(p.b_k_major ? c.block_k : c.block_n, ab_bytes(p));
  c.swizzle_cd = bf16_out(p) ? swizzle_for(c.block_n, 2) : 0;  // FP32 output is not swizzled
  (void)store_block_m;
  const int max_stages = 16;
  const int smem_cd = round_up(c.block_m * c.block_n * cd_bytes(p), 1024);
  const int smem_barriers = max_stages * 8 * 2;
  const int per_stage_ab = (c.block_m * c.block_k + c.block_n * c.block_k) * ab_bytes(p);
  const int per_stage_sfa = is_bf16(p.kernel) ? 0 : round_up(c.block_m * 4, 128);
  const int per_stage_sfb = p.kernel == Kernel::FP8_1D1D ? round_up(c.block_n * 4, 128) : 0;
  // 1d2d keeps every B scale of its N block in shared memory (two rows when 128 % block_n != 0).
  const int sfb_rows = (c.block_k % c.block_n == 0) ? 1 : 2;
  const int smem_sfb_1d2d = p.kernel == Kernel::FP8_1D2D ? round_up(div_up(p.k, c.block_k) * 4 * sfb_rows, 8) : 0;
  const int smem_tensormaps = p.layout == Layout::KGroupedContiguous ? 4 * 128 : 0;
  const int extra = smem_cd + smem_barriers + smem_sfb_1d2d + smem_tensormaps;
  const int per_stage = per_stage_ab + per_stage_sfa + per_stage_sfb;
  c.num_stages = std::min((kSm90SmemCapacity - extra) / per_stage, max_stages);
  c.smem_bytes = extra + c.num_stages * per_stage;
}

std::vector<Config> candidates(const Problem& p) {
  std::vector<int> bms;
  if (p.layout == Layout::MGroupedContiguous) {
    bms = {kMGroupedAlignment};
  } else {
    bms = {64, 128};
    if (p.m <= 16) bms.push_back(16);
    if (p.m <= 32) bms.push_back(32);
    if (bf16_out(p)) bms.push_back(256);
  }
  std::vector<int> bns;
  int start = 16;
  const int end = p.kernel == Kernel::FP8_1D2D ? 192 : p.kernel == Kernel::FP8_1D1D ? 160 : 256;  // register pressure
  if (p.kernel == Kernel::FP8_1D1D) { start = 24; bns.push_back(16); }  // FP32 out: bank conflicts
  for (int b = start; b <= end; b += 16) bns.push_back(b);

  const bool no_multicast = p.layout == Layout::KGroupedContiguous && p.num_groups > 4;
  const int max_c = no_multicast ? 1 : 2;
  std::vector<Config> out;
  for (int cm = 1; cm <= max_c; ++cm)
    for (int cn = 1; cn <= max_c; ++cn) {
      if (cm * cn > 2 || p.num_sms % (cm * cn) != 0) continue;
      for (int bm : bms)
        for (int bn : bns) {
          const int bk = block_k_for(p);
          if (p.kernel == Kernel::FP8_1D2D && bn > bk && bn % (bn - bk) != 0 && bk % (bn - bk) != 0) continue;
          if (bm > 128 && bn > 128) continue;
          // The 1d1d kernel's math warp groups need whole WGMMA rows (its static assertion).
          if (p.kernel == Kernel::FP8_1D1D && bm % 64 != 0) continue;
          Config c;
          c.block_m = bm; c.block_n = bn; c.block_k = bk; c.cluster_m = cm; c.cluster_n = cn;
          fill_storage_and_pipeline(p, c);
          if (c.swizzle_a % 64 != 0 || c.swizzle_b % 64 != 0) continue;
          if (c.num_stages < 3 || (bm * bn < 128 * 192 && c.num_stages < 4)) continue;
          out.push_back(c);
        }
    }
  return out;
}

// DeepGEMM's cost model: L1/L2 byte traffic over bandwidth, divided by wave efficiency; multicast
// is ruled out when there is a single wave.
int64_t modelled_cycles(const Problem& p, const Config& c) {
  const int64_t groups = p.layout == Layout::MGroupedContiguous ? 1 : p.num_groups;
  const int64_t blocks = static_cast<int64_t>(div_up(p.m, c.block_m)) * div_up(p.n, c.block_n) * groups;
  const int64_t waves = (blocks + p.num_sms - 1) / p.num_sms;
  const int64_t l2_bw = std::min<int64_t>(64 * p.num_sms, static_cast<int64_t>(8e6 / 1.3e3));
  const int64_t l1_bw = 128 * p.num_sms;
  const int64_t k = p.k, cd = cd_bytes(p), ab = ab_bytes(p);
  const bool accumulate = accumulates(p);
  const int64_t l2_ab = k * (c.block_m / c.cluster_n + c.block_n / c.cluster_m) * ab;
  const int64_t l1_ab = k * (c.block_m + c.block_n) * ab;
  const int64_t l1_tc = k * (std::max(64, c.block_m) + c.block_n) * ab + static_cast<int64_t>(c.block_m) * c.block_n * cd;
  const int64_t l1l2_cd = static_cast<int64_t>(c.block_m) * c.block_n * cd * (accumulate ? 2 : 1);
  const int64_t l2_cycles = (l2_ab + l1l2_cd) * blocks / l2_bw;
  const int64_t l1_cycles = (l1_ab + l1_tc + l1l2_cd) * blocks / l1_bw;
  const double eff = static_cast<double>(blocks) / static_cast<double>(waves * p.num_sms);
  if (c.cluster_size() > 1 && waves <= 1) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(static_cast<double>(std::max(l1_cycles, l2_cycles)) / eff);
}

std::string unsupported_bf16(const Problem& p) {
  // K % 64: whole BF16 K blocks (DeepGEMM asserts it for its grouped BF16 GEMMs; required here for
  // every BF16 cell). N % 64 for the BF16 output's swizzled TMA store, as for the FP8 kernels.
  if (p.k % 64 != 0) return fmt::format("DeepGEMM's BF16 GEMM is run here with K % 64 == 0 only (K = {})", p.k);
  if (p.kernel == Kernel::BF16 && p.n % 64 != 0)
    return fmt::format("DeepGEMM's BF16-output TMA store needs N % 64 == 0 here (N = {})", p.n);
  if (p.kernel == Kernel::BF16_FP32 && p.n % 4 != 0) return fmt::format("DeepGEMM's FP32 output needs N % 4 == 0 (N = {})", p.n);
  // An MN-major operand's rows are strided by M (or N) elements: TMA needs 16-byte strides.
  if (!p.a_k_major && p.m % 8 != 0) return fmt::format("DeepGEMM: an MN-major BF16 A needs M % 8 == 0 (M = {})", p.m);
  if (!p.b_k_major && p.n % 8 != 0) return fmt::format("DeepGEMM: an MN-major BF16 B needs N % 8 == 0 (N = {})", p.n);
  if (p.layout == Layout::MGroupedContiguous) {
    if (p.kernel != Kernel::BF16) return "DeepGEMM's M-grouped contiguous BF16 GEMM writes BF16 only";
    if (!p.a_k_major) return "DeepGEMM's M-grouped contiguous BF16 GEMM needs a K-major A";
    if (p.m % kMGroupedAlignment != 0)
      return fmt::format("M-grouped contiguous: M a multiple of {} (M = {})", kMGroupedAlignment, p.m);
  }
  if (p.layout == Layout::KGroupedContiguous) {
    // DeepGEMM's sm90_bf16_k_grouped_gemm: MN-major operands (token-major, as a Wgrad has them),
    // each expert's K a multiple of 128 (k here: the largest expert's).
    if (p.a_k_major || p.b_k_major) return "DeepGEMM's K-grouped BF16 GEMM takes MN-major operands only";
    if (p.k % 128 != 0) return fmt::format("DeepGEMM's K-grouped BF16 GEMM needs each K % 128 == 0 (K = {})", p.k);
  }
  if (p.runtime_k) return "a run-time K is for the FP8 Wgrad kernel only";
  if (candidates(p).empty()) return "DeepGEMM: no tile fits shared memory for this shape";
  return {};
}

}  // namespace

std::string Config::describe() const {
  return fmt::format("block {}x{}x{}, cluster {}x{}, {} stages, {} SMs, {} threads, smem {} B", block_m, block_n, block_k,
                     cluster_m, cluster_n, num_stages, num_sms, threads(), smem_bytes);
}

std::string unsupported_reason(const Problem& p) {
  if (p.m < 0 || p.n <= 0 || p.k <= 0) return fmt::format("DeepGEMM: empty or negative shape {}x{}x{}", p.m, p.n, p.k);
  if (p.num_sms <= 0 || p.num_sms % 2 != 0) return fmt::format("DeepGEMM needs an even SM count (set_num_sms), got {}", p.num_sms);
  if (is_bf16(p.kernel)) return unsupported_bf16(p);
  if (!p.a_k_major || !p.b_k_major) return "DeepGEMM's FP8 kernels take K-major operands only";
  if (p.k % 128 != 0) return fmt::format("DeepGEMM's FP8 kernels need K % 128 == 0 (K = {})", p.k);
  if (p.kernel == Kernel::FP8_1D2D && p.n % 64 != 0)
    return fmt::format("DeepGEMM's BF16-output TMA store needs N % 64 == 0 here (N = {})", p.n);
  if (p.kernel == Kernel::FP8_1D1D && p.n % 4 != 0) return fmt::format("DeepGEMM's FP32 output needs N % 4 == 0 (N = {})", p.n);
  if (p.layout == Layout::MGroupedContiguous && (p.kernel != Kernel::FP8_1D2D || p.m % kMGroupedAlignment != 0))
    return fmt::format("M-grouped contiguous: the 1d2d kernel with M a multiple of {} (M = {})", kMGroupedAlignment, p.m);
  if (p.layout == Layout::KGroupedContiguous && p.kernel != Kernel::FP8_1D1D)
    return "K-grouped contiguous is the 1d1d (FP32 Wgrad) kernel only";
  if (p.kernel == Kernel::FP8_1D1D && p.layout == Layout::MGroupedContiguous)
    return "the 1d1d kernel has no M-grouped layout";
  if (candidates(p).empty()) return "DeepGEMM: no tile fits shared memory for this shape";
  return {};
}

Config best_config(const Problem& p) {
  const auto cs = candidates(p);
  Config best = cs.front();
  int64_t best_cycles = modelled_cycles(p, best);
  for (size_t i = 1; i < cs.size(); ++i) {
    const int64_t cy = modelled_cycles(p, cs[i]);
    if (cy < best_cycles) { best = cs[i]; best_cycles = cy; }
  }
  best.num_sms = p.num_sms;
  best.num_math_threads = best.block_m <= 64 ? 128 : 256;
  return best;
}

}  // namespace gs::dg

namespace gs::dg {

Instantiation instantiation(const Problem& p, const Config& c) {
  Instantiation in;
  // N and K are compiled in (DeepGEMM's default compiled_dims "nk"); M stays a run-time argument.
  const char* type = p.layout == Layout::Normal ? "Normal"
                     : p.layout == Layout::MGroupedContiguous ? "MGroupedContiguous" : "KGroupedContiguous";
  const int groups = p.layout == Layout::Normal ? 1 : p.num_groups;
  const int k_compiled = p.layout == Layout::KGroupedContiguous || p.runtime_k ? 0 : p.k;
  if (is_bf16(p.kernel)) {
    const bool fp32 = p.kernel == Kernel::BF16_FP32;
    in.kernel_name = p.layout == Layout::Normal               ? (fp32 ? "sm90_bf16_gemm_fp32_acc" : "sm90_bf16_gemm")
                     : p.layout == Layout::MGroupedContiguous ? "sm90_m_grouped_bf16_gemm_contiguous"
                                                              : (fp32 ? "sm90_bf16_k_grouped_gemm_fp32_acc" : "sm90_bf16_k_grouped_gemm");
    auto major = [](bool k_major) { return k_major ? "cute::UMMA::Major::K" : "cute::UMMA::Major::MN"; };
    in.name_expression = fmt::format(
        "&deep_gemm::sm90_bf16_gemm_impl<{}, {}, 0, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
        "deep_gemm::GemmType::{}, {}, {}>",
        major(p.a_k_major), major(p.b_k_major), p.n, k_compiled, groups, c.block_m, c.block_n, c.block_k, c.swizzle_a,
        c.swizzle_b, c.swizzle_cd, c.num_stages, c.num_tma_threads, c.num_math_threads, c.cluster_size(),
        c.multicast_on_a() ? "true" : "false", c.num_sms, type, fp32 ? "true" : "false",
        fp32 ? "float" : "cutlass::bfloat16_t");
    in.source = "#include <deep_gemm/impls/sm90_bf16_gemm.cuh>\n";
  } else if (p.kernel == Kernel::FP8_1D2D) {
    in.kernel_name = p.layout == Layout::Normal ? "sm90_fp8_gemm_1d2d" : "sm90_m_grouped_fp8_gemm_contiguous_1d2d";
    in.name_expression = fmt::format(
        "&deep_gemm::sm90_fp8_gemm_1d2d_impl<cute::UMMA::Major::K, 0, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
        "{}, deep_gemm::GemmType::{}, cutlass::bfloat16_t, deep_gemm::epilogue::transform::EpilogueIdentity>",
        p.n, k_compiled, groups, c.block_m, c.block_n, c.block_k, c.swizzle_a, c.swizzle_b, c.swizzle_cd, c.num_stages,
        c.num_tma_threads, c.num_math_threads, c.cluster_size(), c.multicast_on_a() ? "true" : "false", c.num_sms, type);
    in.source = "#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>\n";
  } else {
    in.kernel_name = p.layout == Layout::Normal ? "sm90_fp8_gemm_1d1d" : "sm90_k_grouped_fp8_gemm_contiguous_1d1d";
    in.name_expression = fmt::format(
        "&deep_gemm::sm90_fp8_gemm_1d1d_impl<0, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
        "deep_gemm::GemmType::{}, float>",
        p.n, k_compiled, groups, c.block_m, c.block_n, c.block_k, c.swizzle_a, c.swizzle_b, c.num_stages, c.num_tma_threads,
        c.num_math_threads, c.cluster_size(), c.multicast_on_a() ? "true" : "false", c.num_sms, type);
    in.source = "#include <deep_gemm/impls/sm90_fp8_gemm_1d1d.cuh>\n";
  }
  // The name expression instantiates the template; the line below keeps the source self-describing.
  in.source += "// instantiation: " + in.name_expression + "\n";
  return in;
}

}  // namespace gs::dg

namespace gs::dg {

GroupedPadding grouped_padding(const std::vector<int64_t>& tokens_per_expert, int alignment) {
  GroupedPadding g;
  for (int64_t t : tokens_per_expert) {
    g.useful_rows += t;
    g.padded_rows += (t + alignment - 1) / alignment * alignment;
  }
  return g;
}

}  // namespace gs::dg

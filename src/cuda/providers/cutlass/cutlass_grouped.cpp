// The CUTLASS grouped families' dispatch (cutlass_grouped.hpp). Without CUTLASS in the build the
// same functions say so; the kernels themselves are in src/cuda/providers/cutlass/kernels/.
#include "cuda/providers/cutlass/cutlass_grouped.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "cuda/providers/cutlass/cutlass_fp8_run.hpp"

namespace gs::cuda {

const char* to_string(CutlassGroupedFamily f) {
  switch (f) {
    case CutlassGroupedFamily::Bf16RowCol: return "bf16 A[m,k] B[n,k]";
    case CutlassGroupedFamily::Bf16RowRow: return "bf16 A[m,k] B[k,n]";
    case CutlassGroupedFamily::Bf16ColRowF32Acc: return "bf16 A[k,m] B[k,n] D fp32 beta=1";
    case CutlassGroupedFamily::Bf16ColRowBf16: return "bf16 A[k,m] B[k,n] D bf16";
    case CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast: return "fp8 e4m3 A[m,k] x e4m3 B[n,k] D bf16";
    case CutlassGroupedFamily::Fp8E5m2E4m3Bf16: return "fp8 e5m2 A[m,k] x e4m3 B[n,k] D bf16";
    case CutlassGroupedFamily::Fp8E5m2E4m3F32Acc: return "fp8 e5m2 A[m,k] x e4m3 B[n,k] D fp32 beta=1";
    case CutlassGroupedFamily::Fp8Block1x128x128x128Bf16: return "fp8 block e4m3 A[m,k] 1x128 x e4m3 B[n,k] 128x128 D bf16";
    case CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc: return "fp8 block e4m3 A[m,k] 1x128 x e4m3 B[n,k] 1x128 D fp32 beta=1";
    case CutlassGroupedFamily::Fp8Block1x128x1x128Bf16: return "fp8 block e4m3 A[m,k] 1x128 x e4m3 B[n,k] 1x128 D bf16";
  }
  return "?";
}

std::optional<CutlassGroupedFamily> cutlass_fp8_family(const Recipe& r) {
  if (r.precision == Precision::FP8Block) {
    if (r.a.format != ElemFormat::E4M3 || r.b.format != ElemFormat::E4M3 || r.a.scaling != Scaling::Block1x128)
      return std::nullopt;
    if (r.b.scaling == Scaling::Block128x128 && !r.fp32_accumulate) return CutlassGroupedFamily::Fp8Block1x128x128x128Bf16;
    if (r.b.scaling == Scaling::Block1x128)
      return r.fp32_accumulate ? CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc : CutlassGroupedFamily::Fp8Block1x128x1x128Bf16;
    return std::nullopt;
  }
  if (r.precision != Precision::FP8Current && r.precision != Precision::FP8Delayed) return std::nullopt;
  const ElemFormat a = r.a.format, b = r.b.format;
  if (a == ElemFormat::E4M3 && b == ElemFormat::E4M3 && r.fast_accum && !r.fp32_accumulate)
    return CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast;
  if (a == ElemFormat::E5M2 && b == ElemFormat::E4M3 && !r.fast_accum)
    return r.fp32_accumulate ? CutlassGroupedFamily::Fp8E5m2E4m3F32Acc : CutlassGroupedFamily::Fp8E5m2E4m3Bf16;
  return std::nullopt;
}

std::string cutlass_fp8_families_built() {
  return "e4m3 x e4m3 fast-accum bf16 out (Fprop), e5m2 x e4m3 split bf16 (Dgrad), e5m2 x e4m3 split fp32+=/bf16 "
         "(Wgrad): TE's hybrid recipe with --fp8-accum auto; FP8Block e4m3 1x128 x 128x128 bf16 out (Fprop, Dgrad), "
         "1x128 x 1x128 fp32+=/bf16 (Wgrad)";
}

const char* to_string(CutlassTile t) { return t == CutlassTile::Wide ? "128x256" : "128x128"; }

bool cutlass_has_wide_tile(CutlassGroupedFamily f) {
#ifdef GEMMSCOPE_CUTLASS_NO_WIDE
  (void)f;
  return false;  // built with GEMMSCOPE_CUTLASS_WIDE_TILES=OFF
#endif
  switch (f) {
    case CutlassGroupedFamily::Bf16RowCol:
    case CutlassGroupedFamily::Bf16RowRow:
    case CutlassGroupedFamily::Bf16ColRowF32Acc:
    case CutlassGroupedFamily::Bf16ColRowBf16:
    case CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast: return true;
    default: return false;
  }
}

CutlassTile cutlass_pick_tile(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups) {
  return cutlass_has_wide_tile(f) && !groups.empty() ? CutlassTile::Wide : CutlassTile::Square;
}

#ifdef GEMMSCOPE_HAVE_CUTLASS
namespace cutlass_kernels {
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowcol(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowrow(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_f32acc(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_bf16(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e4m3_e4m3_bf16_fast(const std::vector<CutlassGroup>&, int, const float*);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e5m2_e4m3_bf16(const std::vector<CutlassGroup>&, int, const float*);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e5m2_e4m3_f32acc(const std::vector<CutlassGroup>&, int, const float*);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_w128_bf16(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_row_f32acc(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_block_row_bf16(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowcol_wide(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowrow_wide(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_f32acc_wide(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_bf16_wide(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_fp8_e4m3_e4m3_bf16_fast_wide(const std::vector<CutlassGroup>&, int, const float*);
}  // namespace cutlass_kernels

bool cutlass_built() { return true; }

std::unique_ptr<CutlassGroupedLaunch> make_cutlass_grouped(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups,
                                                           int device, const float* alpha, std::optional<CutlassTile> tile) {
  using namespace cutlass_kernels;
  const CutlassTile t = tile ? *tile : cutlass_pick_tile(f, groups);
  if (t == CutlassTile::Wide && !cutlass_has_wide_tile(f))
    throw std::invalid_argument(fmt::format("CUTLASS family {} has no 128x256 tile", to_string(f)));
  const bool per_tensor = f == CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast || f == CutlassGroupedFamily::Fp8E5m2E4m3Bf16 ||
                          f == CutlassGroupedFamily::Fp8E5m2E4m3F32Acc;
  if (alpha && !per_tensor) throw std::invalid_argument("only the CUTLASS FP8 per-tensor families take an alpha array");
#ifndef GEMMSCOPE_CUTLASS_NO_WIDE
  if (t == CutlassTile::Wide) {
    switch (f) {
      case CutlassGroupedFamily::Bf16RowCol: return make_grouped_bf16_rowcol_wide(groups, device);
      case CutlassGroupedFamily::Bf16RowRow: return make_grouped_bf16_rowrow_wide(groups, device);
      case CutlassGroupedFamily::Bf16ColRowF32Acc: return make_grouped_bf16_colrow_f32acc_wide(groups, device);
      case CutlassGroupedFamily::Bf16ColRowBf16: return make_grouped_bf16_colrow_bf16_wide(groups, device);
      case CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast: return make_grouped_fp8_e4m3_e4m3_bf16_fast_wide(groups, device, alpha);
      default: break;
    }
  }
#endif
  switch (f) {
    case CutlassGroupedFamily::Bf16RowCol: return make_grouped_bf16_rowcol(groups, device);
    case CutlassGroupedFamily::Bf16RowRow: return make_grouped_bf16_rowrow(groups, device);
    case CutlassGroupedFamily::Bf16ColRowF32Acc: return make_grouped_bf16_colrow_f32acc(groups, device);
    case CutlassGroupedFamily::Bf16ColRowBf16: return make_grouped_bf16_colrow_bf16(groups, device);
    case CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast: return make_grouped_fp8_e4m3_e4m3_bf16_fast(groups, device, alpha);
    case CutlassGroupedFamily::Fp8E5m2E4m3Bf16: return make_grouped_fp8_e5m2_e4m3_bf16(groups, device, alpha);
    case CutlassGroupedFamily::Fp8E5m2E4m3F32Acc: return make_grouped_fp8_e5m2_e4m3_f32acc(groups, device, alpha);
    case CutlassGroupedFamily::Fp8Block1x128x128x128Bf16: return make_grouped_fp8_block_w128_bf16(groups, device);
    case CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc: return make_grouped_fp8_block_row_f32acc(groups, device);
    case CutlassGroupedFamily::Fp8Block1x128x1x128Bf16: return make_grouped_fp8_block_row_bf16(groups, device);
  }
  throw std::invalid_argument("unknown CUTLASS grouped family");
}
#else
bool cutlass_built() { return false; }

std::unique_ptr<CutlassGroupedLaunch> make_cutlass_grouped(CutlassGroupedFamily, const std::vector<CutlassGroup>&, int,
                                                           const float*, std::optional<CutlassTile>) {
  throw std::invalid_argument("this build has no CUTLASS kernels (GEMMSCOPE_CUTLASS_DIR not found at build time)");
}
#endif

}  // namespace gs::cuda

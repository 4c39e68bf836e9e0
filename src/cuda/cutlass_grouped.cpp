// The CUTLASS grouped families' dispatch (cutlass_grouped.hpp). Without CUTLASS in the build the
// same functions say so; the kernels themselves are in src/cuda/cutlass/.
#include "cuda/cutlass_grouped.hpp"

#include <stdexcept>

namespace gs::cuda {

const char* to_string(CutlassGroupedFamily f) {
  switch (f) {
    case CutlassGroupedFamily::Bf16RowCol: return "bf16 A[m,k] B[n,k]";
    case CutlassGroupedFamily::Bf16RowRow: return "bf16 A[m,k] B[k,n]";
    case CutlassGroupedFamily::Bf16ColRowF32Acc: return "bf16 A[k,m] B[k,n] D fp32 beta=1";
    case CutlassGroupedFamily::Bf16ColRowBf16: return "bf16 A[k,m] B[k,n] D bf16";
  }
  return "?";
}

#ifdef GEMMSCOPE_HAVE_CUTLASS
namespace cutlass_kernels {
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowcol(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_rowrow(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_f32acc(const std::vector<CutlassGroup>&, int);
std::unique_ptr<CutlassGroupedLaunch> make_grouped_bf16_colrow_bf16(const std::vector<CutlassGroup>&, int);
}  // namespace cutlass_kernels

bool cutlass_built() { return true; }

std::unique_ptr<CutlassGroupedLaunch> make_cutlass_grouped(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups,
                                                           int device) {
  using namespace cutlass_kernels;
  switch (f) {
    case CutlassGroupedFamily::Bf16RowCol: return make_grouped_bf16_rowcol(groups, device);
    case CutlassGroupedFamily::Bf16RowRow: return make_grouped_bf16_rowrow(groups, device);
    case CutlassGroupedFamily::Bf16ColRowF32Acc: return make_grouped_bf16_colrow_f32acc(groups, device);
    case CutlassGroupedFamily::Bf16ColRowBf16: return make_grouped_bf16_colrow_bf16(groups, device);
  }
  throw std::invalid_argument("unknown CUTLASS grouped family");
}
#else
bool cutlass_built() { return false; }

std::unique_ptr<CutlassGroupedLaunch> make_cutlass_grouped(CutlassGroupedFamily, const std::vector<CutlassGroup>&, int) {
  throw std::invalid_argument("this build has no CUTLASS kernels (GEMMSCOPE_CUTLASS_DIR not found at build time)");
}
#endif

}  // namespace gs::cuda

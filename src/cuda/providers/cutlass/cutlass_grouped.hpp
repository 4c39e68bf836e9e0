// CUTLASS sm90 grouped GEMMs as one launch (ptr-array grouped, TMA warp-specialized cooperative):
// the interface the CUTLASS provider (cutlass_provider.cpp) uses. No CUTLASS header and no core
// header is included here (the kernel translation units include this file, so a change in core
// never recompiles them; the recipe -> family rule is in cutlass_fp8_run.hpp). The kernels live in
// src/cuda/providers/cutlass/kernels/*.cu, one translation unit per kernel family and tile, built for sm_90a only
// and only when the build found CUTLASS (GEMMSCOPE_HAVE_CUTLASS).
//
// A group is one expert's GEMM in gemmscope's terms: D[m,n] (row-major) = A[m,k] . B[k,n], with
// each operand's storage order fixed by the family. Families (CUTLASS layouts in brackets):
//   Bf16RowCol  A token-major [m,k], B K-major (stored [n,k])   [A RowMajor, B ColumnMajor]: Fprop
//   Bf16RowRow  A token-major [m,k], B N-major (stored [k,n])   [A RowMajor, B RowMajor]:    Dgrad
//   Bf16ColRowF32Acc  A stored [k,m], B stored [k,n], D FP32 accumulated (beta = 1)           : Wgrad
//               into FP32 main gradients (per-group K: each expert's token count)
//   Bf16ColRowBf16    the same with a BF16 D written (beta = 0)                                : Wgrad
// FP8 per-tensor families: both operands quantized K-major, A [m,k], B stored [n,k] (CUTLASS A
// RowMajor, B ColumnMajor: the one FP8 layout wgmma reads), so every pass is this layout; alpha per
// group = the product of the two operands' scale_inv (a device array, computed by the caller):
//   Fp8E4m3E4m3Bf16Fast  E4M3 x E4M3, BF16 D, fast accumulation            : Fprop (TE's default)
//   Fp8E5m2E4m3Bf16      E5M2 (dY) x E4M3, BF16 D, split accumulation      : Dgrad (x W) and, with
//                        --wgrad-output bf16, Wgrad (x X) in the hybrid format
//   Fp8E5m2E4m3F32Acc    E5M2 (dY^T) x E4M3 (X), FP32 D accumulated (beta 1): Wgrad (hybrid format)
// Other FP8 combinations (--fp8-format e4m3, --fp8-accum overrides) are not instantiated (build
// time): the provider says so.
// FP8 block scaling (E4M3 x E4M3, TE's Float8BlockScaling default; scales in the mainloop, each
// group's CutlassGroup::sfa / sfb, no alpha):
//   Fp8Block1x128x128x128Bf16   A 1x128 scales [ceil(k/128), m], B 128x128 scales [ceil(n/128),
//                               ceil(k/128)] (compact rows), BF16 D                  : Fprop, Dgrad
//   Fp8Block1x128x1x128F32Acc   A and B 1x128 scales ([ceil(k/128), m], [ceil(k/128), n]), FP32 D
//                               accumulated (beta 1)                                 : Wgrad
//   Fp8Block1x128x1x128Bf16     the same with a BF16 D                               : Wgrad, bf16
// Every group is given with its own m, n, k (ptr-array: CUTLASS reads the shapes from device
// memory), so uneven experts cost nothing extra; an empty group (a zero size) must not be passed.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>


namespace gs::cuda {

enum class CutlassGroupedFamily {
  Bf16RowCol, Bf16RowRow, Bf16ColRowF32Acc, Bf16ColRowBf16,
  Fp8E4m3E4m3Bf16Fast, Fp8E5m2E4m3Bf16, Fp8E5m2E4m3F32Acc,
  Fp8Block1x128x128x128Bf16, Fp8Block1x128x1x128F32Acc, Fp8Block1x128x1x128Bf16,
};
const char* to_string(CutlassGroupedFamily f);

struct CutlassGroup {
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;  // FP32 accumulate: also C (read, beta = 1)
  // FP8 block scaling: the FP32 block scales of a and b in the layouts the Fp8Block families read.
  const float* sfa = nullptr;
  const float* sfb = nullptr;
};

// One grouped problem, set up once (shapes, pointer and stride arrays on the device, workspace),
// then launched any number of times: each run() is a single kernel launch.
class CutlassGroupedLaunch {
 public:
  virtual ~CutlassGroupedLaunch() = default;
  virtual void run(cudaStream_t s) = 0;
  // The kernel configuration, as the cell's kernel record names it
  // ("cutlass sm90 ptr-array grouped bf16 128x128x64 cluster 1x1 cooperative").
  virtual std::string config() const = 0;
};

// Whether this build holds the CUTLASS kernels (false: built without CUTLASS, say so).
bool cutlass_built();

// Tile configurations: every family has the 128-wide one (BF16 128x128x64, FP8 128x128x128); the
// BF16 families (Bf16RowCol, Bf16RowRow, Bf16ColRowF32Acc, Bf16ColRowBf16) and the FP8 Fprop family
// (Fp8E4m3E4m3Bf16Fast) also a 256-wide one (128x256). The rule (cutlass_pick_tile): the wide tile
// wherever the family has it. Measured on an H100 (bench/cutlass_tiles.cu, both tiles of every
// family on dense 2048^3 to 16384x16384x4096 GEMMs and Qwen3-30B-A3B- and DeepSeek-V3-like experts):
// 128x256 was faster, or within 2%, in 54 of 55 cases (the exception 3% slower), 1.1-2.1x. The FP8
// families with split accumulation (Dgrad E5M2 x E4M3, Wgrad E4M3 x E5M2) ran 1.1-3.6x slower in
// 128x256 on every shape, so they have no wide variant; FP8Block has none either: CUTLASS 4.2.1's
// blockwise mainloop rejects 128x128 B scales in a 256-wide tile (static assertion "Accumulator
// and scaleB must have same shape").
enum class CutlassTile { Square, Wide };
const char* to_string(CutlassTile t);  // "128x128", "128x256"
bool cutlass_has_wide_tile(CutlassGroupedFamily f);
CutlassTile cutlass_pick_tile(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups);

// Builds family `f` for `groups` (all non-empty) on device `device`. `alpha`: null (alpha = 1) or a
// device array of one FP32 alpha per group, read by every launch (the FP8 families' scales).
// `tile`: the configuration (default: cutlass_pick_tile's); Wide for a family without it is an
// std::invalid_argument. Throws std::invalid_argument for what CUTLASS cannot implement (its
// can_implement status: alignment, sizes), CudaError for CUDA failures. Only callable where
// cutlass_built().
std::unique_ptr<CutlassGroupedLaunch> make_cutlass_grouped(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups,
                                                           int device, const float* alpha = nullptr,
                                                           std::optional<CutlassTile> tile = std::nullopt);

}  // namespace gs::cuda

// The CUTLASS provider's FP8 cells (FP8Current, FP8Delayed, FP8Block): the recipe's quantization
// exactly as the cuBLASLt cell runs it (RecipeGemm / GroupedGemm built without their cuBLASLt GEMMs,
// so the same kernels, copies and scales), then one CUTLASS ptr-array launch (cutlass_grouped.hpp)
// on the quantized K-major copies. Per-tensor scales reach CUTLASS as alpha: one small kernel
// multiplies each group's two scale_inv values into a device alpha array. Block scales are read
// in place by the blockwise mainloop, except 128x128 weight scales whose padded rows (cuBLASLt's
// layout) differ from CUTLASS's: one small kernel compacts them. That kernel runs in the timed
// iteration when the iteration quantizes (the scales change), once before the timed loop in
// pre-quantized mode. Grouped cells need the multi-tensor quantization (--grouped-quant fused, the
// default) when the timed iteration quantizes: the single launch has no per-expert quantization.
#pragma once
#include <memory>

#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/providers/provider.hpp"

namespace gs::cuda {

struct GemmSources;
struct GroupedSources;

// The FP8 family that runs recipe `r` (FP8Current / FP8Delayed: operand formats, output,
// accumulation; FP8Block: scalings, formats, output), or nullopt when none is instantiated. Defined
// whether or not CUTLASS is built.
std::optional<CutlassGroupedFamily> cutlass_fp8_family(const Recipe& r);
// The instantiated FP8 combinations, for an N/A reason.
std::string cutlass_fp8_families_built();


// A dense GEMM as one group of family `f` (a FP8 family: cutlass_fp8_family()).
std::unique_ptr<ProviderRun> make_cutlass_fp8_dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src,
                                                    const RecipeOptions& opts, CutlassGroupedFamily f, int device);
// A grouped GEMM (M-grouped Fprop/Dgrad, K-grouped Wgrad) as one launch of family `f`.
std::unique_ptr<ProviderRun> make_cutlass_fp8_grouped(GroupedSources& src, const Recipe& r, Mode m,
                                                      const RecipeOptions& opts, CutlassGroupedFamily f, int device);

}  // namespace gs::cuda

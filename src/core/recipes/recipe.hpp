// Precisions and recipes as data: for each GEMM, which number format and which scaling each
// operand gets, and how the GEMM accumulates. The CUDA backend reads these; it never decides
// formats on its own, so there is one place per recipe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"

namespace gs {

enum class Precision { BF16, FP8Current, FP8Delayed, FP8Block, MXFP8, NVFP4 };
inline constexpr Precision kAllPrecisions[] = {Precision::BF16,    Precision::FP8Current,
                                               Precision::FP8Delayed, Precision::FP8Block,
                                               Precision::MXFP8,   Precision::NVFP4};
const char* to_string(Precision p);           // "BF16", "FP8Current", ... (report column names)
Precision precision_from_string(const std::string& s);  // accepts those names, case-insensitive

enum class ElemFormat { BF16, E4M3, E5M2, E2M1 };
const char* to_string(ElemFormat f);
double bits(ElemFormat f);

enum class Scaling {
  None,           // BF16
  TensorCurrent,  // one FP32 scale per tensor from this call's amax
  TensorDelayed,  // one FP32 scale per tensor from an amax history
  Block1x128,     // one FP32 scale per 128 contiguous K elements
  Block128x128,   // one FP32 scale per 128x128 tile
  Mx32,           // MXFP8: one UE8M0 scale per 32 K elements
  Nv16,           // NVFP4: one UE4M3 scale per 16 K elements + an FP32 tensor scale
  Nv16x16,        // NVFP4 2D: one UE4M3 scale per 16x16 tile + an FP32 tensor scale
};
const char* to_string(Scaling s);

enum class Fp8Format { E4M3, Hybrid };  // Hybrid: E4M3 forward, E5M2 for output gradients (TE default)
enum class Accumulation { Auto, Fast, Split };
const char* to_string(Fp8Format f);     // "hybrid", "e4m3" (the --fp8-format and JSON spelling)
const char* to_string(Accumulation a);  // "auto", "fast", "split" (--fp8-accum, JSON)

struct RecipeOptions {
  Fp8Format fp8_format = Fp8Format::Hybrid;
  Accumulation fp8_accum = Accumulation::Auto;  // Auto: fast on Fprop, split on Dgrad/Wgrad (TE)
  int amax_history_len = 1024;
  bool nvfp4_2d_weights = true;   // TE NVFP4 recipe: 16x16 scales for weights
  bool nvfp4_rht = true;          // random Hadamard transform on Wgrad inputs
  bool nvfp4_stochastic_rounding = true;  // on gradients
  // Set by the engine from the device (compute capability >= 10.0): cuBLASLt on sm_100 has no
  // 1x128/128x128 block-scaled FP8 GEMM, so FP8Block runs through the MXFP8 path (1x32 UE8M0
  // scales, the same GEMM kernel Transformer Engine's emulation uses) and is labelled emulated.
  bool fp8_block_via_mxfp8 = false;
  // training mode, FP8 current scaling: the amax of a norm output (QKV and MLP-up X), an
  // activation output (MLP-down X) and an activation-backward output (MLP-up dY) comes from the
  // kernel that produced the tensor, as Transformer Engine's LayerNormLinear / LayerNormMLP fuse
  // it (fused norm/activation + amax, then the cast with that amax). false: every tensor gets its
  // own amax pass, as plain te.Linear modules do.
  bool producer_amax = true;
  // The LM head (output layer) runs in BF16 whatever the column's precision, as Megatron and
  // Transformer Engine keep it out of FP8 (--lm-head-precision bf16, the default). false: it runs
  // in the column's precision like every other GEMM ("same"; results written before the option
  // existed were measured that way).
  bool lm_head_bf16 = true;
  // FP8 block scaling and MXFP8: Transformer Engine's Float8BlockScaling and MXFP8BlockScaling
  // default to E4M3 for every operand (gradients too); Hybrid gives gradients E5M2.
  Fp8Format block_fp8_format = Fp8Format::E4M3;
  // FP8 block scaling: scales rounded down to powers of two (TE's default; fp32 = exact
  // fmax/amax, TE's NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1).
  bool fp8_block_pow2_scales = true;
  // Grouped (MoE expert) GEMMs: the operands of all experts are quantized in a few multi-tensor
  // launches (per operand: amax, one cast, one delayed-scaling update), as Transformer Engine's
  // GroupedLinear and DeepSeek-V3's training quantize them (--grouped-quant fused, the default).
  // false: one amax and cast launch per expert tensor (--grouped-quant per-expert; what results
  // written before the option existed measured). MXFP8 and NVFP4 are always per expert.
  bool grouped_quant_fused = true;
  // Wgrad accumulates into an FP32 main gradient: FP32 C and D, beta = 1, as Megatron-LM's
  // gradient-accumulation fusion (Transformer Engine's fuse_wgrad_accumulation) and DeepGEMM's
  // wgrad kernels run it (--wgrad-output fp32-accumulate, the default). false: a BF16 gradient
  // written with beta = 0 (--wgrad-output bf16; what results written before the option existed
  // measured).
  bool wgrad_fp32_accumulate = true;
};

struct OperandRecipe {
  ElemFormat format = ElemFormat::BF16;
  Scaling scaling = Scaling::None;
  bool hadamard = false;            // NVFP4: 16x16 RHT applied before quantization
  bool stochastic_rounding = false; // NVFP4: gradients
  bool pow2_scales = false;         // FP8 block scaling: scales rounded down to powers of two
  // Bytes of this operand's scale factors for an [outer, K] operand (cuBLASLt layouts, padded).
  double scale_bytes(int64_t outer, int64_t k) const;
};

struct Recipe {
  Precision precision;
  OperandRecipe a, b;      // left [m,k] and right [k,n] operands of the Gemm
  bool fast_accum = false; // CUBLASLT_MATMUL_DESC_FAST_ACCUM
  // The output is an FP32 main gradient accumulated in place (FP32 C and D, beta = 1): Wgrad
  // under RecipeOptions::wgrad_fp32_accumulate, except the router's (a plain torch linear whose
  // BF16 gradient is added to main_grad separately). false: BF16 output, beta = 0.
  bool fp32_accumulate = false;
};

// The recipe of GEMM `g` in column precision `p`. Recipe::precision is the precision the GEMM
// really runs in: BF16 for the MoE router always and for the LM head when RecipeOptions::lm_head_bf16 is set.
Recipe make_recipe(Precision p, const Gemm& g, const RecipeOptions& o);
// Whether `g` runs in BF16 instead of column precision `p` (the router; the LM head under lm_head_bf16).
bool runs_in_bf16_instead(Precision p, const Gemm& g, const RecipeOptions& o);

// Alignment/shape rules of the GEMM for this recipe; empty when fine, else the reason
// (becomes an N/A cell, e.g. "FP8 needs K and N multiples of 16").
std::string shape_constraint(const Recipe& r, const Gemm& g);

// Memory traffic model (bytes). `gemm`: what the GEMM kernel reads (both operands in their
// format plus scales) and writes (BF16 output), each once. `quantize`: what the timed
// quantization passes of the two operands read and write, given each operand's QuantWork (Own:
// BF16 source read, an extra read for a per-tensor amax pass, quantized data and scales written;
// Dual: the same with both copies written, in one fused pass for the FP8 recipes and two passes
// for MXFP8/NVFP4; None: nothing). Used for --dry-run and roofline estimates.
struct ByteCount {
  double gemm = 0, quantize = 0;
};
// How one operand is quantized inside a GEMM's timed region.
struct OperandWork {
  QuantWork work = QuantWork::Own;
  // The per-tensor amax is given (see RecipeOptions::producer_amax): the timed region runs the
  // cast only; the amax is computed once before the timed loop.
  bool producer_amax = false;
  OperandWork(QuantWork w = QuantWork::Own, bool producer = false) : work(w), producer_amax(producer) {}  // NOLINT
};
// quant_work(m, g, side), plus producer_amax for the tensors TE's fused norm/activation kernels
// produce with their amax: training mode, a TensorCurrent operand, option on, and operand `side`
// of `g` is X of QKV / MLP-up / MLP-down Fprop or dY of MLP-up Dgrad (model plans; not the LM head).
OperandWork operand_work(Mode m, const Gemm& g, Side side, const Recipe& r, const RecipeOptions& o);
ByteCount byte_count(const Recipe& r, const Gemm& g, OperandWork a = {}, OperandWork b = {});
// The output's share of ByteCount::gemm: BF16 written, or an FP32 main gradient read and written
// (Recipe::fp32_accumulate); grouped Wgrad, one gradient per expert (FP32: experts with rows only).
double output_bytes(const Recipe& r, const Gemm& g);
// Whether a Dual quantization of this operand recipe runs as one fused pass writing both copies
// (the FP8 per-tensor and block recipes) or as two independent passes (MXFP8, NVFP4).
bool dual_is_fused(const OperandRecipe& o);

}  // namespace gs

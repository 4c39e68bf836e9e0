#include "core/recipes/recipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"

namespace gs {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::BF16: return "BF16";
    case Precision::FP8Current: return "FP8Current";
    case Precision::FP8Delayed: return "FP8Delayed";
    case Precision::FP8Block: return "FP8Block";
    case Precision::MXFP8: return "MXFP8";
    case Precision::NVFP4: return "NVFP4";
  }
  return "?";
}

Precision precision_from_string(const std::string& s) {
  auto lower = [](std::string x) {
    std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return x;
  };
  for (Precision p : kAllPrecisions)
    if (lower(s) == lower(to_string(p))) return p;
  std::vector<std::string> names;
  for (Precision p : kAllPrecisions) names.push_back(to_string(p));
  throw UsageError(fmt::format(
      "unknown precision '{}'{} (known: BF16, FP8Current, FP8Delayed, FP8Block, MXFP8, NVFP4)", clip_text(s, 80),
      did_you_mean(s, names)));
}

const char* to_string(ElemFormat f) {
  switch (f) {
    case ElemFormat::BF16: return "bf16";
    case ElemFormat::E4M3: return "e4m3";
    case ElemFormat::E5M2: return "e5m2";
    case ElemFormat::E2M1: return "e2m1";
  }
  return "?";
}

double bits(ElemFormat f) {
  switch (f) {
    case ElemFormat::BF16: return 16;
    case ElemFormat::E4M3:
    case ElemFormat::E5M2: return 8;
    case ElemFormat::E2M1: return 4;
  }
  return 0;
}

const char* to_string(Fp8Format f) { return f == Fp8Format::Hybrid ? "hybrid" : "e4m3"; }

const char* to_string(Accumulation a) {
  return a == Accumulation::Auto ? "auto" : a == Accumulation::Fast ? "fast" : "split";
}

const char* to_string(Scaling s) {
  switch (s) {
    case Scaling::None: return "none";
    case Scaling::TensorCurrent: return "tensor-current";
    case Scaling::TensorDelayed: return "tensor-delayed";
    case Scaling::Block1x128: return "block-1x128";
    case Scaling::Block128x128: return "block-128x128";
    case Scaling::Mx32: return "mx-1x32-ue8m0";
    case Scaling::Nv16: return "nv-1x16-ue4m3";
    case Scaling::Nv16x16: return "nv-16x16-ue4m3";
  }
  return "?";
}

namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundup(int64_t a, int64_t b) { return cdiv(a, b) * b; }
}  // namespace

double OperandRecipe::scale_bytes(int64_t outer, int64_t k) const {
  switch (scaling) {
    case Scaling::None: return 0;
    case Scaling::TensorCurrent:
    case Scaling::TensorDelayed: return 4;
    case Scaling::Block1x128: return 4.0 * static_cast<double>(cdiv(k, 128) * outer);
    case Scaling::Block128x128: return 4.0 * static_cast<double>(cdiv(outer, 128) * roundup(cdiv(k, 128), 4));
    // Swizzled 128x4 tiles, one byte per scale.
    case Scaling::Mx32: return static_cast<double>(roundup(outer, 128) * roundup(cdiv(k, 32), 4));
    case Scaling::Nv16:
    case Scaling::Nv16x16: return static_cast<double>(roundup(outer, 128) * roundup(cdiv(k, 16), 4)) + 4;
  }
  return 0;
}

bool runs_in_bf16_instead(Precision p, const Gemm& g, const RecipeOptions& o) {
  if (p == Precision::BF16) return false;
  // The MoE router stays in BF16 in every recipe (Megatron and TE keep it out of FP8: its logits
  // pick the experts); the LM head does by default (--lm-head-precision).
  return g.op == Op::Router || (g.op == Op::LmHead && o.lm_head_bf16);
}

Recipe make_recipe(Precision p, const Gemm& g, const RecipeOptions& o) {
  if (runs_in_bf16_instead(p, g, o)) p = Precision::BF16;  // the recipe layer decides, the backend follows
  Recipe r;
  r.precision = p;
  const bool hybrid = o.fp8_format == Fp8Format::Hybrid;
  auto fp8_fmt = [&](Role role) { return hybrid && role == Role::Grad ? ElemFormat::E5M2 : ElemFormat::E4M3; };
  const bool block_hybrid = o.block_fp8_format == Fp8Format::Hybrid;
  auto block_fmt = [&](Role role) { return block_hybrid && role == Role::Grad ? ElemFormat::E5M2 : ElemFormat::E4M3; };
  auto make_op = [&](const Operand& op) {
    OperandRecipe x;
    switch (p) {
      case Precision::BF16: x.format = ElemFormat::BF16; x.scaling = Scaling::None; break;
      case Precision::FP8Current: x.format = fp8_fmt(op.role); x.scaling = Scaling::TensorCurrent; break;
      case Precision::FP8Delayed: x.format = fp8_fmt(op.role); x.scaling = Scaling::TensorDelayed; break;
      case Precision::FP8Block:
        // 128x128 for weights, 1x128 for activations and gradients. Wgrad's operands are an
        // activation and a gradient, so it is 1x128 x 1x128 (sm_90 cuBLASLt has no 2D x 2D).
        x.format = block_fmt(op.role);
        if (o.fp8_block_via_mxfp8) x.scaling = Scaling::Mx32;
        else x.scaling = op.role == Role::Weight ? Scaling::Block128x128 : Scaling::Block1x128;
        x.pow2_scales = o.fp8_block_pow2_scales && !o.fp8_block_via_mxfp8;  // MX scales are powers of two anyway
        break;
      case Precision::MXFP8: x.format = block_fmt(op.role); x.scaling = Scaling::Mx32; break;
      case Precision::NVFP4:
        x.format = ElemFormat::E2M1;
        x.scaling = (op.role == Role::Weight && o.nvfp4_2d_weights) ? Scaling::Nv16x16 : Scaling::Nv16;
        x.hadamard = o.nvfp4_rht && g.pass == Pass::Wgrad;
        x.stochastic_rounding = o.nvfp4_stochastic_rounding && op.role == Role::Grad;
        break;
    }
    return x;
  };
  r.a = make_op(g.a);
  r.b = make_op(g.b);
  const bool per_tensor = p == Precision::FP8Current || p == Precision::FP8Delayed;
  if (per_tensor) {
    if (o.fp8_accum == Accumulation::Fast) r.fast_accum = true;
    else if (o.fp8_accum == Accumulation::Split) r.fast_accum = false;
    else r.fast_accum = g.pass == Pass::Fprop || g.pass == Pass::Shape;
  }
  r.fp32_accumulate = o.wgrad_fp32_accumulate && g.pass == Pass::Wgrad && g.op != Op::Router;
  return r;
}

std::string shape_constraint(const Recipe& r, const Gemm& g) {
  switch (r.precision) {
    case Precision::BF16: return {};
    case Precision::FP8Current:
    case Precision::FP8Delayed:
    case Precision::FP8Block:
    case Precision::MXFP8:
      if (r.a.format == ElemFormat::E5M2 && r.b.format == ElemFormat::E5M2)
        return "cuBLASLt has no E5M2 x E5M2 GEMM";
      if (g.k % 16 || g.m % 16 || g.n % 16)
        return fmt::format("FP8 GEMMs need M, K and N multiples of 16 (got {})", g.shape());
      if ((r.a.scaling == Scaling::Mx32 || r.b.scaling == Scaling::Mx32) && g.k % 32)
        return fmt::format("MXFP8 needs K a multiple of 32 (got K={})", g.k);
      return {};
    case Precision::NVFP4:
      if (g.k % 32 || g.m % 32 || g.n % 32)
        return fmt::format("NVFP4 GEMMs need M, K and N multiples of 32 (got {})", g.shape());
      return {};
  }
  return {};
}

bool dual_is_fused(const OperandRecipe& o) {
  switch (o.scaling) {
    case Scaling::TensorCurrent:
    case Scaling::TensorDelayed:
    case Scaling::Block1x128:
    case Scaling::Block128x128: return true;
    default: return false;
  }
}

OperandWork operand_work(Mode m, const Gemm& g, Side side, const Recipe& r, const RecipeOptions& o) {
  OperandWork w(quant_work(m, g, side));
  const OperandRecipe& op = side == Side::Left ? r.a : r.b;
  if (m != Mode::Training || !o.producer_amax || op.scaling != Scaling::TensorCurrent || side != Side::Left)
    return w;
  // Norm outputs feed QKV and MLP-up, the activation output feeds MLP-down (Fprop X); the
  // activation backward writes MLP-up's output gradient (Dgrad dY).
  if (g.pass == Pass::Fprop) w.producer_amax = g.op == Op::Qkv || g.op == Op::MlpUp || g.op == Op::MlpDown;
  if (g.pass == Pass::Dgrad) w.producer_amax = g.op == Op::MlpUp;
  return w;
}

ByteCount byte_count(const Recipe& r, const Gemm& g, OperandWork wa, OperandWork wb) {
  auto operand = [&](const OperandRecipe& o, int64_t outer, double elems, OperandWork ow, ByteCount& bc) {
    const QuantWork w = ow.work;
    const double data = elems * bits(o.format) / 8.0;
    const double scales = o.scale_bytes(outer, g.k);
    bc.gemm += data + scales;
    if (o.format == ElemFormat::BF16 || w == QuantWork::None) return;
    // One pass: read the BF16 source, write quantized data + scales (the transposed copy's scale
    // count is taken as equal: the model's scale bytes are small next to the data).
    double pass = elems * 2.0 + data + scales;
    const bool amax_pass = o.scaling == Scaling::TensorCurrent || o.scaling == Scaling::Nv16 || o.scaling == Scaling::Nv16x16;
    if (amax_pass && !ow.producer_amax) pass += elems * 2.0;  // separate amax pass over the BF16 source
    if (w == QuantWork::Own) bc.quantize += pass;
    else bc.quantize += dual_is_fused(o) ? pass + data + scales : 2.0 * pass;
  };
  ByteCount bc;
  const double mk = static_cast<double>(g.m) * static_cast<double>(g.k);
  double kn = static_cast<double>(g.k) * static_cast<double>(g.n);
  // Grouped (expert) GEMMs: Fprop/Dgrad read one weight per expert with rows (empty experts run nothing).
  if (g.group_dim == GroupDim::M) kn *= static_cast<double>(g.groups_with_rows());
  operand(r.a, g.m, mk, wa, bc);
  operand(r.b, g.n, kn, wb, bc);
  bc.gemm += output_bytes(r, g);
  return bc;
}

double output_bytes(const Recipe& r, const Gemm& g) {
  double mn = static_cast<double>(g.m) * static_cast<double>(g.n);
  // Grouped Wgrad: one gradient per expert (BF16: empty ones zeroed; an FP32 main gradient gets
  // nothing from an empty expert).
  if (g.group_dim == GroupDim::K)
    mn *= static_cast<double>(r.fp32_accumulate ? g.groups_with_rows() : static_cast<int64_t>(g.group.size()));
  return mn * (r.fp32_accumulate ? 8.0 : 2.0);  // FP32 main gradient read and written, or BF16 written
}

}  // namespace gs

#include "core/recipes/grouped.hpp"

#include <numeric>

namespace gs {

int64_t group_alignment(Precision p) {
  switch (p) {
    case Precision::BF16: return 1;
    case Precision::FP8Current:
    case Precision::FP8Delayed:
    case Precision::FP8Block: return 16;
    case Precision::MXFP8:
    case Precision::NVFP4: return 32;
  }
  return 1;
}

std::vector<int64_t> padded_group(const Gemm& g, Precision p) {
  const int64_t a = group_alignment(p);
  std::vector<int64_t> out;
  out.reserve(g.group.size());
  for (int64_t s : g.group) out.push_back((s + a - 1) / a * a);
  return out;
}

Gemm expert_gemm(const Gemm& g, int64_t size) {
  Gemm e = g;
  e.group_dim = GroupDim::None;
  e.group.clear();
  if (g.group_dim == GroupDim::M) e.m = size;
  if (g.group_dim == GroupDim::K) e.k = size;
  return e;
}

std::string grouped_layout_problem(const Gemm& g) {
  if (g.group.empty()) return "grouped GEMM with no experts";
  for (int64_t s : g.group)
    if (s < 0) return "grouped GEMM with a negative expert size";
  if (g.group_dim == GroupDim::M && !g.a.k_major)
    return "grouped along M needs a token-major left operand [rows, k]";
  if (g.group_dim == GroupDim::K && (g.a.k_major || g.b.k_major))
    return "grouped along K needs token-major operands [tokens, m] and [tokens, n]";
  if (g.group_dim == GroupDim::None) return "not a grouped GEMM";
  return {};
}

std::string cell_shape_problem(const Gemm& g, Precision p, const RecipeOptions& o) {
  if (!g.grouped()) return shape_constraint(make_recipe(p, g, o), g);
  if (std::string why = grouped_layout_problem(g); !why.empty()) return why;
  const Gemm one = expert_gemm(g, group_alignment(p));
  return shape_constraint(make_recipe(p, one, o), one);
}

int64_t padded_waste(const Gemm& g, Precision p) {
  const std::vector<int64_t> pad = padded_group(g, p);
  return std::accumulate(pad.begin(), pad.end(), int64_t{0}) -
         std::accumulate(g.group.begin(), g.group.end(), int64_t{0});
}

namespace {

bool fp8_scaling(Scaling s) {
  return s == Scaling::TensorCurrent || s == Scaling::TensorDelayed || s == Scaling::Block1x128 ||
         s == Scaling::Block128x128;
}

int64_t operand_launches(const OperandRecipe& o, const OperandWork& w) {
  if (o.format == ElemFormat::BF16 || w.work == QuantWork::None) return 0;
  int64_t n = 0;
  if (o.scaling == Scaling::TensorCurrent && !w.producer_amax) n += 2;
  n += w.work == QuantWork::Dual && !dual_is_fused(o) ? 2 : 1;
  if (o.scaling == Scaling::TensorDelayed) n += 1;
  return n;
}

}  // namespace

bool grouped_quant_fusable(const Recipe& r) {
  return r.precision != Precision::BF16 && fp8_scaling(r.a.scaling) && fp8_scaling(r.b.scaling);
}

int64_t grouped_quant_launches(const Recipe& r, const Gemm& g, const OperandWork& a, const OperandWork& b, bool fused) {
  const int64_t per = operand_launches(r.a, a) + operand_launches(r.b, b);
  if (fused && grouped_quant_fusable(r)) return per;
  return per * (g.grouped() ? g.groups_with_rows() : 1);
}

}  // namespace gs

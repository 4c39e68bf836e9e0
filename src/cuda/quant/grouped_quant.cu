#include "cuda/quant/grouped_quant.hpp"

#include <stdexcept>

#include "core/recipes/grouped.hpp"
#include "core/recipes/modes.hpp"

namespace gs::cuda {

namespace {

MultiQuantOp cast_op(Scaling s) {
  switch (s) {
    case Scaling::TensorCurrent: return MultiQuantOp::CastCurrent;
    case Scaling::TensorDelayed: return MultiQuantOp::CastDelayed;
    case Scaling::Block1x128: return MultiQuantOp::Block1x128;
    case Scaling::Block128x128: return MultiQuantOp::Block128x128;
    default: throw std::invalid_argument("grouped quantization: not an FP8 scaling");
  }
}

}  // namespace

bool GroupedQuantizer::supports(const Recipe& r) { return grouped_quant_fusable(r); }

GroupedQuantizer::GroupedQuantizer(const std::vector<RecipeGemm*>& experts) {
  for (Side side : {Side::Left, Side::Right}) {
    // One list per launch: amax, own casts, dual casts, delayed updates; one recipe per side.
    std::vector<QuantTensor> amax, own, dual, update;
    const OperandRecipe* recipe = nullptr;
    for (RecipeGemm* g : experts) {
      if (!g) continue;
      const QuantizedOperand* q = side == Side::Left ? g->l() : g->r();
      const QuantizedOperand* sib = side == Side::Left ? g->l_sibling() : g->r_sibling();
      const OperandWork& w = g->work(side);
      if (!q || w.work == QuantWork::None) continue;
      const OperandRecipe& r = q->recipe();
      if (recipe && (recipe->scaling != r.scaling || recipe->format != r.format || recipe->pow2_scales != r.pow2_scales))
        throw std::invalid_argument("grouped quantization: experts with different operand recipes");
      recipe = &r;
      QuantTensor t;
      if (w.work == QuantWork::Dual) {
        if (!sib || !dual_is_fused(r) || sib->recipe().scaling != r.scaling || sib->recipe().format != r.format)
          throw std::invalid_argument("grouped quantization: a dual operand without a fused dual cast");
        t = q->dual_tensor(*sib);
        dual.push_back(t);
      } else {
        t = q->tensor();
        own.push_back(t);
      }
      if (r.scaling == Scaling::TensorCurrent && !w.producer_amax) amax.push_back(t);
      if (r.scaling == Scaling::TensorDelayed) update.push_back(t);
    }
    if (!recipe) continue;
    const Fp8Kind kind = fp8_kind(recipe->format);
    const bool pow2 = recipe->pow2_scales;
    auto add = [&](std::vector<std::unique_ptr<MultiQuant>>& to, MultiQuantOp op, bool is_dual,
                   std::vector<QuantTensor>& list) {
      if (list.empty()) return;
      auto m = std::make_unique<MultiQuant>(op, kind, is_dual, pow2, std::move(list));
      if (m->tensors() > 0) to.push_back(std::move(m));
    };
    add(before_, MultiQuantOp::Amax, false, amax);
    add(before_, cast_op(recipe->scaling), false, own);
    add(before_, cast_op(recipe->scaling), true, dual);
    add(after_, MultiQuantOp::DelayedUpdate, false, update);
  }
  for (RecipeGemm* g : experts)
    if (g) g->quantize_externally();
}

void GroupedQuantizer::quantize(cudaStream_t s) const {
  for (const auto& m : before_) m->launch(s);
}

void GroupedQuantizer::after_gemms(cudaStream_t s) const {
  for (const auto& m : after_) m->launch(s);
}

int GroupedQuantizer::quantize_ops() const {
  int n = 0;
  for (const auto& m : before_) n += m->launches();
  return n;
}

int GroupedQuantizer::after_ops() const {
  int n = 0;
  for (const auto& m : after_) n += m->launches();
  return n;
}

int GroupedQuantizer::tensors() const {
  int n = 0;
  for (const auto& m : before_)
    if (m->op() != MultiQuantOp::Amax) n += m->tensors();
  return n;
}

}  // namespace gs::cuda

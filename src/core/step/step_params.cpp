#include "core/step/step_params.hpp"

#include <algorithm>

#include "core/model/layout_rules.hpp"
#include "core/util/error.hpp"

namespace gs {

ParamCount count_params(const Plan& plan) {
  if (!plan.model_mode || !plan.config)
    throw UsageError("the whole-step plan needs a model plan: --shapes/--sweep GEMMs have no model around them");
  const ModelConfig& c = *plan.config;
  const double layers = static_cast<double>(plan.layers());
  const double moe = static_cast<double>(plan.moe_layers());
  ParamCount p;
  for (const Gemm& g : plan.gemms) {
    if (g.pass != Pass::Fprop) continue;  // one weight per linear: its Fprop's k x n
    const double weights = g.grouped() ? static_cast<double>(g.group.size()) : 1.0;  // one per local expert
    const double times = g.scope == Scope::Model      ? 1.0
                         : g.scope == Scope::MoeLayer ? moe
                         : g.scope == Scope::DenseLayer ? layers - moe
                                                        : layers;
    const double n = static_cast<double>(g.k) * static_cast<double>(g.n) * weights * times;
    p.linear += n;
    if (g.op == Op::Router) p.router += n;
    if (g.scope == Scope::Model) p.head += n;
    p.tensors += static_cast<int64_t>(weights * times);
  }
  const double h = static_cast<double>(c.hidden_size);
  if (c.vocab_size > 0) {
    p.embedding = static_cast<double>(vocab_per_rank(c)) * h;  // vocab-parallel embedding
    ++p.tensors;
  }
  // Two norms per layer (replicated under tensor parallelism), MLA's q (when it has a low rank) and
  // kv norms, the final norm.
  double per_layer = 2 * h;
  int64_t norm_tensors = 2;
  if (c.mla.enabled()) {
    per_layer += static_cast<double>(c.mla.kv_lora_rank);
    ++norm_tensors;
    if (c.mla.q_lora_rank > 0) {
      per_layer += static_cast<double>(c.mla.q_lora_rank);
      ++norm_tensors;
    }
  }
  p.norms = per_layer * layers + h;
  p.tensors += norm_tensors * plan.layers() + 1;
  return p;
}

}  // namespace gs

// The parameters one GPU holds for a model plan, counted from the plan itself (every linear
// weight as its Fprop GEMM runs it: per tensor-parallel rank, the busiest expert-parallel rank's
// experts) plus what has no GEMM: the token embedding and the norms' weights. The optimizer's
// sizes (core/step/step_plan.hpp) and the memory model (core/step/step_memory.hpp) read it. Pure.
#pragma once
#include <cstdint>

#include "core/plan/plan.hpp"

namespace gs {

struct ParamCount {
  double linear = 0;     // linear weights of every layer and the LM head (FP8 recipes cast these)
  double embedding = 0;  // the token embedding table on this rank ([padded vocab / TP, hidden]; untied)
  double norms = 0;      // norm weights (two per layer, MLA's q and kv norms, the final norm)
  double router = 0;     // MoE routers (kept in BF16 by every recipe; part of `linear` too)
  double head = 0;       // the LM head (part of `linear` too)
  int64_t tensors = 0;   // parameter tensors (the optimizer's multi-tensor lists)
  double total() const { return linear + embedding + norms; }
};

// UsageError for a plan without a model (--shapes/--sweep: no parameters to speak of).
ParamCount count_params(const Plan& plan);

}  // namespace gs

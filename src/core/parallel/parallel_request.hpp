// From the command line's parallel-step settings (ParallelRequest, filled by the run-settings
// registry) to a checked layout: the --layout string, the size flags (--pipeline-parallel, ...;
// a size given both ways must agree), the model's --tensor-parallel, --expert-parallel and
// --micro_batch_size, and data parallelism from --gpus when the string does not give it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/model/model_config.hpp"
#include "core/step/step_options.hpp"
#include "core/step/parallel_layout.hpp"

namespace gs {

// What the model flags gave explicitly (nullopt: not given).
struct ModelGiven {
  std::optional<int64_t> tensor_parallel, expert_parallel, micro_batch;
};

// The layout, checked against `c` (layout_check.hpp); UsageError naming the conflicting flags or the
// framework rule. `c` is the full model with the flags applied (its tensor_parallel and micro-batch
// are the defaults of the layout's tp and mb). `recompute`: the whole step's --recompute.
ParallelLayout resolve_layout(const ParallelRequest& r, const ModelConfig& c, const ModelGiven& given,
                              Recompute recompute = Recompute::None);

// The cluster a request names (--cluster), or the default preset.
std::string cluster_name(const ParallelRequest& r);
constexpr const char* kDefaultCluster = "dgx-h100";

}  // namespace gs

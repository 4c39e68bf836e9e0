// The parallel step and the layout search in a run's result document: what the job is (model, GPU,
// cluster, framework), its layout, and the search's counts; the quantities themselves (the step per
// precision, each pipeline stage's time split and memory, each collective of the step, each ranked
// layout) are records of the run (core/parallel/parallel_records.hpp). Written and read as the
// document's declared section "parallel" (core/report/parallel_record.hpp).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/plan/step_model.hpp"
#include "core/recipes/recipe.hpp"
#include "core/step/parallel_layout.hpp"

namespace gs {

// What the job is, for the headers of the parallel step's and the layout search's reports.
struct ParallelJobInfo {
  std::string model;        // "llama-3-70b"
  std::string gpu_key, gpu_name;
  std::string cluster_key, cluster_name;
  int64_t gpus_per_node = 8;
  StepContextKind framework = StepContextKind::TransformerEngine;
  std::string cluster_note;  // calibration, or "modelled from the cluster spec"
  // --fp8-param-gather (Megatron-LM): under the FP8 recipes the parameter all-gathers send the FP8
  // linears in FP8 and the rank keeps them in FP8 (core/parallel/memory.hpp fp8_params_kept).
  bool fp8_param_gather = false;
};

// One precision's step: what its records do not hold (how the compute was obtained, its notes).
struct ParallelStepInfo {
  Precision precision = Precision::BF16;
  std::string basis;
  std::vector<std::string> notes;
};

// `gemmscope layouts`: the search's counts (each evaluated layout is a record of kind layout).
struct LayoutSearchInfo {
  int64_t gpus = 0, global_batch = 0;
  Precision precision = Precision::BF16;
  int64_t candidates = 0;
  int64_t top = 10;                         // how many the report lists
  std::string basis;                        // how the compute was obtained
  std::map<std::string, int64_t> refused;   // framework rule -> candidates it refused
};

struct ParallelRun {
  ParallelJobInfo job;
  ParallelLayout layout;                 // the step's layout; the search's base (sharding, recompute, overlaps)
  std::vector<ParallelStepInfo> steps;   // the step, BF16 first (empty for a layout search)
  std::optional<LayoutSearchInfo> search;
  std::vector<std::string> notes;
};

}  // namespace gs

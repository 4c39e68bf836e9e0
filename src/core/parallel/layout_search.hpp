// The layout search behind `gemmscope layouts`: every layout of a model on N GPUs of a type in a
// cluster at a global batch (TP within the NVLink domain, CP, PP with virtual stages, EP and ETP
// for models with experts, the micro-batch), refused with the framework's rule where invalid,
// its memory per rank checked against the GPU, its step simulated (parallel_step.hpp) from the
// predicted (or given) compute; the fitting layouts ranked by step time, and for every other one
// why it loses or does not fit.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/parallel/parallel_step.hpp"

namespace gs {

struct SearchSpace {
  ModelConfig model;     // the full model and its sequence length
  int64_t gpus = 0;
  int64_t global_batch = 0;  // sequences per step
  ParallelLayout base;   // sharding, recompute, overlaps: every candidate starts from it
  std::vector<int64_t> micro_batches{1, 2, 4, 8};
  int64_t max_vpp = 16;
  bool try_full_recompute = true;  // a layout that does not fit with base.recompute is tried with full recompute
};

struct SearchCandidate {
  ParallelLayout layout;
  std::string refused;      // the rule it breaks ("" when valid)
  bool evaluated = false;
  ParallelStepResult result;
  std::string why;          // why it loses (slower than the best: its largest extra cost) or does not fit
};

struct SearchResult {
  std::vector<SearchCandidate> ranked;     // fitting, fastest first
  std::vector<SearchCandidate> not_fitting;  // evaluated, over the GPU's memory (least memory first)
  std::map<std::string, int64_t> refused;  // rule -> how many candidates broke it
  int64_t candidates = 0;
  std::string basis;  // how the compute was obtained (the first candidate's)
};

// Costs for a candidate's rank (cached by the search over the layout fields they depend on).
using CostsFn = std::function<StepCosts(const ParallelLayout&)>;

// Enumerates and evaluates. `job` holds the framework, gradient type and contention (its model and
// layout are replaced per candidate).
SearchResult search_layouts(const SearchSpace& space, const ParallelJob& job, const CollectiveModel& net,
                            const GpuSpec& gpu, const CostsFn& costs);

// Every layout the search enumerates (valid or not), in enumeration order.
std::vector<ParallelLayout> enumerate_layouts(const SearchSpace& space, int64_t domain_gpus);

}  // namespace gs

// The collectives' settings of a run (--comm, --comm-only and the layout flags): declared in the
// run-settings registry (core/run/settings.cpp, section "comm"), held by the RunRequest, read by
// the front end's collectives section (src/cli/cmd_comm.cpp) over core/node/collectives.hpp.
#pragma once
#include <cstdint>
#include <string>

namespace gs {

struct CommOptions {
  bool comm = false;  // --comm: the layout's collectives beside the GEMMs
  bool only = false;  // --comm-only: the collectives alone, no GEMM timed
  int64_t data_parallel = 0;  // 0: the smallest that holds the expert parallelism
  bool sequence_parallel = true;
  int64_t zero_stage = 1;
  std::string grad_reduce_type = "fp32";  // the gradients' type in DP reductions: fp32 | bf16
  bool fp8_param_gather = false;          // ZeRO / FSDP weight all-gathers in FP8 under FP8 recipes
  int64_t iters = 20;                     // timed iterations per collective
  static constexpr int kWarmup = 5;       // warm-up iterations per collective
  bool enabled() const { return comm || only; }
};

}  // namespace gs

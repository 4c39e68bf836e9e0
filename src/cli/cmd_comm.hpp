// The communication of the layout on the gemmscope command line (cmd_comm.cpp): --comm,
// --comm-only and the layout flags, over core/node/collectives.hpp and, in a CUDA build, the NCCL
// engine (cuda/nccl_comm.hpp).
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "core/node/collectives.hpp"
#include "core/plan/plan.hpp"

namespace gs::cli {

struct CommFlags {
  bool comm = false, only = false;
  int64_t data_parallel = 0;  // 0: the smallest that holds the expert parallelism
  std::string sequence_parallel = "on";
  int64_t zero_stage = 1;
  std::string grad_type = "fp32";
  int64_t warmup = 5, iters = 20;
  std::string json;
  bool enabled() const { return comm || only; }
};

// Declares the flags (group "Node").
void add_comm_options(CLI::App& app, CommFlags& f);

// After parsing: refuses layout flags given without --comm / --comm-only, and bad values.
// `parallel_step`: the parallel step is asked for (--layout, ...), which reads --grad-reduce-type too.
void check_comm_flags(const CLI::App& app, const CommFlags& f, bool parallel_step = false);

// The layout's collectives for `plan`: measured with NCCL when `measure` (a CUDA build; GPUs too
// few for a communicator: UsageError; NCCL absent: the sizes and a line saying why), else sizes
// only. Writes --comm-json. Returns the report section; `out` (when given) gets the result, for the
// per-layer summary beside the GEMMs (core/node/comm_step.hpp).
std::string comm_section(const Plan& plan, const CommFlags& f, bool measure, CommResult* out = nullptr);

}  // namespace gs::cli

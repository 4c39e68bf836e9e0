// The communication of the layout on the gemmscope command line (cmd_comm.cpp): --comm,
// --comm-only and the layout flags, declared in the run-settings registry (core/run/settings.cpp,
// section "comm"; the request's CommOptions), and --comm-json, over core/node/collectives.hpp and,
// in a CUDA build, the NCCL engine (cuda/comm/nccl_comm.hpp).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "core/node/collectives.hpp"
#include "core/plan/plan.hpp"
#include "core/run/comm_options.hpp"
#include "core/run/settings.hpp"

namespace gs::cli {

// Binds the registry's collectives flags into `given` and --comm-json into `json` (group "Node").
void add_comm_options(CLI::App& app, GivenSettings& given, std::string& json);

// After parsing: --comm-json is an output of the collectives (refused without --comm /
// --comm-only) and is checked as every output is. The layout flags' own rules are the registry's.
void check_comm_json(const CommOptions& c, const std::string& json);

// The layout's collectives for `plan`: measured with NCCL when `measure` (a CUDA build; GPUs too
// few for a communicator: UsageError; NCCL absent: the sizes and a line saying why), else sizes
// only. Writes `json` (--comm-json) when given. Returns the report section; `out` (when given) gets
// the result, for the per-layer summary beside the GEMMs (core/node/comm_step.hpp).
std::string comm_section(const Plan& plan, const CommOptions& c, const std::string& json, bool measure,
                         CommResult* out = nullptr);

}  // namespace gs::cli

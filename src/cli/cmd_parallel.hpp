// The parallel step on the gemmscope command line (cmd_parallel.cpp, docs/parallel.md): with
// --layout, --cluster or --gpus, the run's plan becomes one rank's plan (its TP slice, micro-batch
// and share of the sequence), the GEMMs are measured where a GPU is at hand, and the step of the
// whole job is simulated per rank on the cluster (core/parallel/). Without a GPU the rank's
// compute is predicted from the GPU spec database and every number says so.
#pragma once
#include <optional>
#include <string>

#include "core/analysis/priors.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/step/parallel_layout.hpp"
#include "core/node/collectives.hpp"
#include "core/parallel/parallel_report.hpp"
#include "core/parallel/parallel_request.hpp"
#include "core/results/results.hpp"
#include "core/run/runner.hpp"

namespace gs::cli {

struct ParallelSetup {
  ModelConfig full;  // the whole model, the job's micro-batch and sequence
  ParallelLayout layout;
};

// When req.parallel asks for the step: resolves and checks the layout, and makes req.plan the rank's
// plan. nullopt otherwise. UsageError for a --shapes plan or a refused layout.
std::optional<ParallelSetup> prepare_parallel(RunRequest& req, const ModelGiven& given);

// The parallel step's report: BF16 and the request's FP8 recipe, from the measured run where there
// is one (and its measured collectives, which calibrate the cluster model), else predicted; writes
// --parallel-json and --parallel-trace. `out`: the step, for the result document's records
// (core/parallel/parallel_records.hpp).
// Gradients are reduced in --grad-reduce-type (req.comm).
std::string parallel_section(const ParallelSetup& ps, const RunRequest& req, const RunResult* measured,
                             const CommResult* comm, ParallelReport* out = nullptr);

// The GPU spec database for the parallel step and the layout search (UsageError when there is none).
const GpuDb& parallel_gpu_db();
// The published GEMM priors (data/priors.json) against that database: the predicted compute of a
// GPU not at hand takes its GEMMs' efficiencies from them, as `gemmscope predict` does.
const PriorDb& parallel_priors();

}  // namespace gs::cli

// The parallel step on the command line (cmd_parallel.hpp, docs/parallel.md).
#include "cli/cmd_parallel.hpp"

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/parallel/cluster.hpp"
#include "core/parallel/collective_model.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/parallel_report.hpp"
#include "core/parallel/parallel_step.hpp"
#include "core/parallel/step_costs.hpp"
#include "core/util/error.hpp"

namespace gs::cli {

std::optional<ParallelSetup> prepare_parallel(RunRequest& req, const ModelGiven& given) {
  if (!req.parallel.requested()) return std::nullopt;
  if (!req.plan.model_mode || !req.plan.config)
    throw UsageError("--layout, --cluster and --gpus need a model (--model or --config), not --shapes/--sweep");
  ParallelSetup ps;
  ps.full = *req.plan.config;
  ps.layout = resolve_layout(req.parallel, ps.full, given, req.step.recompute);
  ps.full.micro_batch_size = ps.layout.micro_batch;
  // The run measures (or plans) one rank's GEMMs.
  req.plan = build_model_plan(rank_config(ps.full, ps.layout));
  return ps;
}

const GpuDb& parallel_gpu_db() {
  static std::optional<GpuDb> db;
  if (!db) {
    const std::optional<std::string> path = find_gpu_spec_file();
    if (!path)
      throw UsageError("the parallel step needs the GPU spec database gpus.json (next to the gemmscope binary, data/gpus.json "
                       "in the source tree, or $GEMMSCOPE_GPU_SPECS)");
    db = read_gpu_db_file(*path);
  }
  return *db;
}

const PriorDb& parallel_priors() {
  static std::optional<PriorDb> priors;
  if (!priors) priors = load_priors(parallel_gpu_db());
  return *priors;
}

namespace {

// The FP8 recipe the step is compared in: the first non-BF16 precision of the request the GPU runs.
std::optional<Precision> fp8_recipe(const RunRequest& req, const GpuSpec& gpu) {
  for (Precision p : req.precisions)
    if (p != Precision::BF16 && cannot_run(gpu, p).empty()) return p;
  return std::nullopt;
}

}  // namespace

std::string parallel_section(const ParallelSetup& ps, const RunRequest& req, const RunResult* measured, const CommResult* comm,
                             ParallelReport* out) {
  const ParallelRequest& r = req.parallel;
  const ClusterSpec cluster = resolve_cluster(cluster_name(r));
  const GpuDb& db = parallel_gpu_db();
  const GpuSpec* gpu = nullptr;
  if (measured && measured->device) gpu = db.match_device(measured->device->name);
  if (!gpu) gpu = &db.find(r.gpu.empty() ? cluster.gpu : r.gpu);
  CollectiveModel net(cluster);
  if (measured && comm) net.calibrate(*comm, comm->engine);

  ParallelJob job;
  job.model = ps.full;
  job.layout = ps.layout;
  job.framework = req.options.timing.step_context_kind;
  job.step = req.step;
  job.grad_type = comm_type_from_string(req.comm.grad_reduce_type);
  job.fp8_param_gather = req.comm.fp8_param_gather;  // the one --fp8-param-gather setting (--comm's too)
  if (measured && comm) job.contention = contention_from(*comm);
  if (r.compute_efficiency > 0) job.compute_efficiency = r.compute_efficiency;

  std::vector<Precision> precisions{Precision::BF16};
  if (const std::optional<Precision> f = fp8_recipe(req, *gpu)) precisions.push_back(*f);
  ParallelReport report;
  report.job.model = ps.full.name;
  report.job.gpu_key = gpu->key;
  report.job.gpu_name = gpu->name;
  report.job.cluster_key = cluster.key;
  report.job.cluster_name = cluster.name;
  report.job.gpus_per_node = cluster.node_gpus();
  report.job.framework = job.framework;
  report.job.fp8_param_gather = job.fp8_param_gather;
  report.job.cluster_note = net.calibration_note().empty()
                                ? "bandwidths, latencies and NCCL's efficiencies from the cluster spec, uncalibrated"
                                : net.calibration_note();
  for (Precision p : precisions) {
    const StepCosts costs = measured ? measured_step_costs(*measured, ps.full, ps.layout, gpu, p, job.framework, req.options.recipe, req.step)
                                     : predicted_step_costs(ps.full, ps.layout, *gpu, p, job.framework, req.options.recipe, req.step,
                                                            PredictData{&parallel_priors(), nullptr});
    report.results.push_back(simulate_parallel_step(job, costs, net, *gpu, !r.trace.empty()));
  }
  if (!measured)
    report.notes.push_back(fmt::format("no GPU measurement (a CPU build, --dry-run, or no GPU): every number is predicted or "
                                       "modelled for {} GPUs",
                                       gpu->key));
  if (gpu->key != cluster.gpu)
    report.notes.push_back(fmt::format("the GPUs ({}) differ from {}'s ({}): its network is kept", gpu->key, cluster.key, cluster.gpu));
  if (!r.json.empty()) write_file_atomic(r.json, json_text(parallel_json(report), 2) + "\n");
  if (!r.trace.empty()) write_file_atomic(r.trace, parallel_trace_text(report));
  std::string text = render_parallel_text(report);
  if (out) *out = std::move(report);
  return text;
}

}  // namespace gs::cli

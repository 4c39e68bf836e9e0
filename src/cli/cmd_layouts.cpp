// `gemmscope layouts`: the fastest layouts of a model on N GPUs of a type in a cluster at a global
// batch, predicted in seconds (core/parallel/layout_search.hpp, docs/parallel.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <tuple>

#include "cli/cli.hpp"
#include "cli/cli_util.hpp"
#include "cli/cmd_parallel.hpp"
#include "cli/commands.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/parallel/cluster.hpp"
#include "core/parallel/layout_search.hpp"
#include "core/parallel/parallel_records.hpp"
#include "core/parallel/parallel_report.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"

namespace gs::cli {

int run_layouts(int argc, char** argv) {
  CLI::App app{"gemmscope layouts: the fastest parallel layouts of a model on N GPUs, predicted (docs/parallel.md)"};
  PlanFlags f;
  int64_t top = 10;
  bool markdown = false;
  std::string precision_text = "BF16";
  std::string out_json;
  add_plan_shape_flags(app, f);
  add_setting_options(app, f.settings, "Parallel step");
  add_setting_flag(app, f.settings, "--step-context");
  add_setting_flag(app, f.settings, "--recompute");
  add_setting_flag(app, f.settings, "--grad-reduce-type");
  add_setting_flag(app, f.settings, "--fp8-param-gather");
  app.add_option_function<std::string>(
         "--top", [&top](const std::string& v) { top = parse_decimal_int(v, "--top"); },
         "How many of the fastest fitting layouts to list (default 10)")
      ->type_name("N");
  app.add_option("--precision", precision_text, "The recipe the layouts are ranked in: BF16 (default), FP8Current, ...")
      ->type_name("NAME");
  app.add_flag("--markdown", markdown, "Print markdown instead of text");
  app.add_option("--json", out_json,
                 "Write the ranking as a result document (every evaluated layout a record; docs/json-schema.md)")
      ->type_name("FILE");
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_parse_error("gemmscope layouts", e);
    return 2;
  }
  reject_extras(app);
  reject_empty_values(app);
  if (top < 1 || top > 1000) throw UsageError(fmt::format("--top must be from 1 to 1000, got {}", top));
  const Precision precision = precision_from_string(precision_text);

  if (!f.shapes.empty() || f.sweep) throw UsageError("gemmscope layouts needs a model (--model or --config), not --shapes");
  const RunRequest req = build_plan_request(f);
  const ParallelRequest& r = req.parallel;
  if (r.gpus <= 0) throw UsageError("gemmscope layouts needs --gpus N (the job's GPU count)");
  const ModelConfig model = *req.plan.config;
  // The base every candidate starts from: the layout string's (or flags') non-size choices.
  ParallelLayout base;
  LayoutTokens t;
  if (!r.layout.empty()) t = parse_layout(r.layout, base, "--layout");
  if (t.tp || t.pp || t.vpp || t.cp || t.ep || t.etp || t.dp || t.mb)
    throw UsageError("gemmscope layouts searches the sizes: give --layout only the sharding and the global batch (e.g. zero1.gb512)");
  const int64_t global_batch = t.gb ? base.global_batch : r.global_batch;
  if (t.gb && r.global_batch > 0 && r.global_batch != base.global_batch)
    throw UsageError(fmt::format("--global-batch {} and --layout's gb{} disagree", r.global_batch, base.global_batch));
  if (global_batch <= 0) throw UsageError("gemmscope layouts needs --global-batch N (sequences per step)");
  if (!r.sharding.empty()) base.sharding = *dp_sharding_names().find(r.sharding);
  base.recompute = req.step.recompute;
  if (!r.cp_comm.empty()) base.cp_comm = *cp_comm_names().find(r.cp_comm);
  if (!r.tp_comm_overlap.empty()) base.tp_comm_overlap = r.tp_comm_overlap == "on";
  if (!r.grad_overlap.empty()) base.overlap_grad_reduce = base.overlap_param_gather = r.grad_overlap == "on";
  if (!r.ep_comm_overlap.empty()) base.ep_comm_overlap = r.ep_comm_overlap == "on";
  if (!r.json.empty()) check_output_path(r.json, "--parallel-json");
  if (!out_json.empty()) check_output_path(out_json, "--json");
  if (!out_json.empty() && out_json == r.json) throw UsageError("--json and --parallel-json name the same file");

  const ClusterSpec cluster = resolve_cluster(cluster_name(r));
  const GpuSpec& gpu = parallel_gpu_db().find(r.gpu.empty() ? cluster.gpu : r.gpu);
  if (const std::string why = cannot_run(gpu, precision); !why.empty()) throw UsageError(why);
  const CollectiveModel net(cluster);
  SearchSpace space;
  space.model = model;
  space.gpus = r.gpus;
  space.global_batch = global_batch;
  space.base = base;
  ParallelJob job;
  job.framework = req.options.timing.step_context_kind;
  job.step = req.step;
  job.grad_type = comm_type_from_string(req.comm.grad_reduce_type);
  job.fp8_param_gather = req.comm.fp8_param_gather;  // the one --fp8-param-gather setting (--comm's too)
  if (r.compute_efficiency > 0) job.compute_efficiency = r.compute_efficiency;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>, StepCosts> cache;
  const CostsFn costs = [&](const ParallelLayout& l) {
    const auto key = std::make_tuple(l.tp, l.cp, l.micro_batch, l.ep, l.expert_tp(), is_fsdp(l.sharding));
    auto it = cache.find(key);
    if (it == cache.end())
      it = cache.emplace(key, predicted_step_costs(model, l, gpu, precision, job.framework, req.options.recipe, req.step,
                                                   PredictData{&parallel_priors(), nullptr}))
               .first;
    return it->second;
  };
  const SearchResult s = search_layouts(space, job, net, gpu, costs);
  ParallelJobInfo info;
  info.model = model.name;
  info.gpu_key = gpu.key;
  info.gpu_name = gpu.name;
  info.cluster_key = cluster.key;
  info.cluster_name = cluster.name;
  info.gpus_per_node = cluster.node_gpus();
  info.framework = job.framework;
  info.fp8_param_gather = job.fp8_param_gather;
  if (!r.json.empty())
    write_file_atomic(r.json,
                      json_text(layouts_json(s, info, r.gpus, global_batch, precision, static_cast<int>(top)), 2) + "\n");
  if (!out_json.empty()) {
    LayoutSearchInfo search;
    search.gpus = r.gpus;
    search.global_batch = global_batch;
    search.precision = precision;
    search.top = top;
    const RunResult doc = layouts_result(build_model_plan(model), s, info, base, search);
    write_file_atomic(out_json, json_text(to_json(doc), 2) + "\n");
  }
  std::cout << print::render(layouts_document(s, info, r.gpus, global_batch, precision, static_cast<int>(top)),
                             markdown ? print::Format::Markdown : print::Format::Text)
            << std::flush;
  return 0;
}

}  // namespace gs::cli

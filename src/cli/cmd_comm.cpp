// --comm / --comm-only (cmd_comm.hpp, docs/node.md).
#include "cli/cmd_comm.hpp"

#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/mpi_plugin.hpp"
#include "core/node/collectives.hpp"
#include "core/util/error.hpp"
#include "core/io/output_paths.hpp"
#include "core/util/text_util.hpp"
#ifdef GEMMSCOPE_WITH_CUDA
#include "cuda/nccl_comm.hpp"
#endif

namespace gs::cli {

namespace {

std::string lower(std::string_view s) { return ascii_lower(s); }

const char* const kLayoutFlags[] = {"--data-parallel", "--sequence-parallel", "--zero-stage", "--grad-reduce-type",
                                    "--comm-iters", "--comm-json"};

}  // namespace

void add_comm_options(CLI::App& app, CommFlags& f) {
  const char* g = "Node";
  app.add_flag("--comm", f.comm,
               "Also the layout's collectives (TP/SP, EP, DP) at the plan's sizes; measured with NCCL on this node's "
               "GPUs")
      ->group(g);
  app.add_flag("--comm-only", f.only, "Only the collectives: no GEMM is timed")->group(g);
  app.add_option_function<std::string>(
         "--data-parallel,--dp", [&f](const std::string& v) { f.data_parallel = parse_decimal_int(v, "--data-parallel"); },
         "Data-parallel replicas for --comm (default: the expert parallelism, or 1)")
      ->type_name("INT")
      ->group(g);
  app.add_option("--sequence-parallel", f.sequence_parallel, "on (default) | off: TP all-gathers/reduce-scatters, or all-reduces")
      ->group(g);
  app.add_option_function<std::string>(
         "--zero-stage", [&f](const std::string& v) { f.zero_stage = parse_decimal_int(v, "--zero-stage"); },
         "0: gradients all-reduced; 1, 2: reduce-scattered, weights all-gathered once per step (default 1); 3: FSDP")
      ->type_name("INT")
      ->group(g);
  app.add_option("--grad-reduce-type", f.grad_type, "fp32 (default) | bf16: the gradients' type in DP reductions")->group(g);
  app.add_option_function<std::string>(
         "--comm-iters", [&f](const std::string& v) { f.iters = parse_decimal_int(v, "--comm-iters"); },
         "Timed iterations per collective (default 20, after 5 warm-up)")
      ->type_name("INT")
      ->group(g);
  app.add_option("--comm-json", f.json, "Write the collectives (sizes, times) as JSON here")->group(g);
}

void check_comm_flags(const CLI::App& app, const CommFlags& f, bool parallel_step) {
  if (!f.enabled())
    for (const char* name : kLayoutFlags)
      if (app.get_option(name)->count() > 0 && !(parallel_step && std::string(name) == "--grad-reduce-type"))
        throw UsageError(fmt::format("{} applies to the collectives: add --comm (or --comm-only)", name));
  const std::string sp = lower(f.sequence_parallel);
  if (sp != "on" && sp != "off")
    throw UsageError(fmt::format("--sequence-parallel must be on or off, got '{}'", clip_text(printable(f.sequence_parallel), 40)));
  if (f.iters < 1 || f.iters > 10000) throw UsageError(fmt::format("--comm-iters must be between 1 and 10000, got {}", f.iters));
  if (f.zero_stage < 0 || f.zero_stage > 3) throw UsageError(fmt::format("--zero-stage must be 0, 1, 2 or 3, got {}", f.zero_stage));
  if (f.data_parallel < 0) throw UsageError(fmt::format("--data-parallel must be >= 1, got {}", f.data_parallel));
  comm_type_from_string(f.grad_type);
  if (!f.json.empty()) check_output_path(f.json, "--comm-json");
}

std::string comm_section(const Plan& plan, const CommFlags& f, bool measure, CommResult* out) {
  const CommLayout l = layout_for(plan, f.data_parallel, lower(f.sequence_parallel) == "on",
                                  static_cast<int>(f.zero_stage), comm_type_from_string(f.grad_type));
  CommResult r = plan_comm(plan, l);
  std::string why_not;
  if (measure && !r.collectives.empty()) {
#ifdef GEMMSCOPE_WITH_CUDA
    // Under MPI (cmd_mpi.cpp) every rank drives its own GPU and the communicators are bootstrapped
    // through MPI; otherwise this process drives every GPU of the node.
    ProcessGroup* pg = current_process_group();
    std::unique_ptr<CommEngine> engine = pg ? cuda::make_nccl_engine(*pg, why_not) : cuda::make_nccl_engine(why_not);
    if (engine) r = measure_collectives(plan, l, *engine, static_cast<int>(f.warmup), static_cast<int>(f.iters));
#else
    why_not = "this build has no CUDA backend";
#endif
  }
  std::string text = render_comm_text(r, plan);
  if (!why_not.empty()) text += fmt::format("  collectives not measured: {}\n", why_not);
  if (!f.json.empty()) write_file_atomic(f.json, comm_to_json(r, plan).dump(2) + "\n");
  if (out) *out = std::move(r);
  return text;
}

}  // namespace gs::cli

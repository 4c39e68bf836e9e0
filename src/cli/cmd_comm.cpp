// --comm / --comm-only (cmd_comm.hpp, docs/node.md).
#include "cli/cmd_comm.hpp"

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/cli_util.hpp"
#include "cli/mpi_plugin.hpp"
#include "core/node/collectives.hpp"
#include "core/node/comm_records.hpp"
#include "core/util/error.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/util/text_util.hpp"
#ifdef GEMMSCOPE_WITH_CUDA
#include "cuda/comm/nccl_comm.hpp"
#endif

namespace gs::cli {

void add_comm_options(CLI::App& app, GivenSettings& given, std::string& json) {
  // Every flag of the registry's section "comm" (core/run/settings.cpp), in its order: --comm and
  // --comm-only (the collectives' shortcuts), then the layout's.
  for (const Setting& s : run_settings()) {
    if (s.section != "comm") continue;
    for (const SettingFlag& f : s.shortcuts) add_setting_flag(app, given, f.flags.substr(0, f.flags.find(',')));
    if (!s.flags.empty()) add_setting_flag(app, given, s.first_flag());
  }
  app.add_option("--comm-json", json, "Write the collectives (sizes, times) as JSON here")->group("Node");
}

void check_comm_json(const CommOptions& c, const std::string& json) {
  if (json.empty()) return;
  if (!c.enabled()) throw UsageError("--comm-json applies to the collectives: add --comm (or --comm-only)");
  check_output_path(json, "--comm-json");
}

std::string comm_section(const Plan& plan, const CommOptions& c, const std::string& json, bool measure,
                         CommResult* out) {
  CommLayout l = layout_for(plan, c.data_parallel, c.sequence_parallel, static_cast<int>(c.zero_stage),
                            comm_type_from_string(c.grad_reduce_type));
  l.fp8_param_gather = c.fp8_param_gather;
  CommResult r = plan_comm(plan, l);
  std::string why_not;
  if (measure && !r.collectives.empty()) {
#ifdef GEMMSCOPE_WITH_CUDA
    // Under MPI (cmd_mpi.cpp) every rank drives its own GPU and the communicators are bootstrapped
    // through MPI; otherwise this process drives every GPU of the node.
    ProcessGroup* pg = current_process_group();
    std::unique_ptr<CommEngine> engine = pg ? cuda::make_nccl_engine(*pg, why_not) : cuda::make_nccl_engine(why_not);
    if (engine) r = measure_collectives(plan, l, *engine, CommOptions::kWarmup, static_cast<int>(c.iters));
#else
    why_not = "this build has no CUDA backend";
#endif
  }
  std::string text = render_comm_text(r, plan);
  if (!why_not.empty()) text += fmt::format("  collectives not measured: {}\n", why_not);
  if (!json.empty()) write_file_atomic(json, json_text(comm_document(plan, r), 2) + "\n");  // core/node/comm_records.hpp
  if (out) *out = std::move(r);
  return text;
}

}  // namespace gs::cli

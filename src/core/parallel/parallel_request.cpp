#include "core/parallel/parallel_request.hpp"

#include <fmt/format.h>

#include "core/parallel/layout_check.hpp"
#include "core/util/error.hpp"

namespace gs {

namespace {

// A size the string may give and a flag may give: both given must agree.
void merge(bool in_string, int64_t& field, int64_t flag_value, const char* flag, const char* token) {
  if (flag_value <= 0) return;
  if (in_string && field != flag_value)
    throw UsageError(fmt::format("{} {} and --layout's {}{} disagree", flag, flag_value, token, field));
  field = flag_value;
}

}  // namespace

std::string cluster_name(const ParallelRequest& r) { return r.cluster.empty() ? std::string(kDefaultCluster) : r.cluster; }

ParallelLayout resolve_layout(const ParallelRequest& r, const ModelConfig& c, const ModelGiven& given, Recompute recompute) {
  ParallelLayout l;
  LayoutTokens t;
  if (!r.layout.empty()) t = parse_layout(r.layout, l, "--layout");
  merge(t.pp, l.pp, r.pp, "--pipeline-parallel", "pp");
  merge(t.vpp, l.vpp, r.vpp, "--virtual-stages", "vpp");
  merge(t.cp, l.cp, r.cp, "--context-parallel", "cp");
  merge(t.etp, l.etp, r.etp, "--expert-tensor-parallel", "etp");
  merge(t.gb, l.global_batch, r.global_batch, "--global-batch", "gb");
  if (given.tensor_parallel) merge(t.tp, l.tp, *given.tensor_parallel, "--tensor-parallel", "tp");
  else if (!t.tp) l.tp = c.tensor_parallel;
  if (given.expert_parallel) merge(t.ep, l.ep, *given.expert_parallel, "--expert-parallel", "ep");
  else if (!t.ep) l.ep = c.moe.enabled() ? c.moe.expert_parallel : 1;
  if (given.micro_batch) merge(t.mb, l.micro_batch, *given.micro_batch, "--micro_batch_size", "mb");
  else if (!t.mb) l.micro_batch = c.micro_batch_size;
  if (!r.sharding.empty()) {
    const DpSharding s = *dp_sharding_names().find(r.sharding);
    if (t.sharding && s != l.sharding)
      throw UsageError(fmt::format("--dp-sharding {} and --layout's {} disagree", r.sharding, to_string(l.sharding)));
    l.sharding = s;
  }
  if (!r.cp_comm.empty()) l.cp_comm = *cp_comm_names().find(r.cp_comm);
  l.recompute = recompute;
  if (!r.tp_comm_overlap.empty()) l.tp_comm_overlap = r.tp_comm_overlap == "on";
  if (!r.grad_overlap.empty()) l.overlap_grad_reduce = l.overlap_param_gather = r.grad_overlap == "on";
  if (!r.ep_comm_overlap.empty()) l.ep_comm_overlap = r.ep_comm_overlap == "on";
  if (!t.dp) {
    if (r.gpus > 0) {
      const int64_t other = l.tp * l.pp * l.cp;
      if (r.gpus % other != 0)
        throw UsageError(fmt::format("--gpus {} is not divisible by TP x PP x CP = {} x {} x {} (Megatron-LM: the world size "
                                     "is TP x PP x CP x DP)",
                                     r.gpus, l.tp, l.pp, l.cp));
      l.dp = r.gpus / other;
    }
  }
  check_layout(c, l, r.gpus);
  return l;
}

}  // namespace gs

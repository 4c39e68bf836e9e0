#include "core/parallel/parallel_step.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/model/layout_rules.hpp"
#include "core/model/attention_shape.hpp"
#include "core/model/moe_config.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/pipeline.hpp"
#include "core/parallel/stream_sim.hpp"
#include "core/plan/plan.hpp"

namespace gs {

const char* to_string(TimeKind k) {
  switch (k) {
    case TimeKind::Gemm: return "GEMMs";
    case TimeKind::Attention: return "attention";
    case TimeKind::Other: return "memory-bound kernels";
    case TimeKind::Recompute: return "recomputation";
    case TimeKind::TpComm: return "TP communication (exposed)";
    case TimeKind::CpComm: return "CP communication (exposed)";
    case TimeKind::EpComm: return "EP all-to-all (exposed)";
    case TimeKind::FsdpComm: return "ZeRO-3/FSDP gathers (exposed)";
    case TimeKind::PpSend: return "pipeline sends";
    case TimeKind::Bubble: return "pipeline bubble";
    case TimeKind::DpComm: return "DP gradient reduction (exposed)";
    case TimeKind::Optimizer: return "optimizer";
    case TimeKind::ParamGather: return "DP parameter gather (exposed)";
  }
  return "?";
}

namespace {

using Kinds = std::array<double, kTimeKinds>;
double& at(Kinds& k, TimeKind t) { return k[static_cast<size_t>(t)]; }
double at(const Kinds& k, TimeKind t) { return k[static_cast<size_t>(t)]; }
double total(const Kinds& k) { return std::accumulate(k.begin(), k.end(), 0.0); }
void add_into(Kinds& a, const Kinds& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}
double d(int64_t v) { return static_cast<double>(v); }

// One layer's forward and backward for one micro-batch, with its exposed communication.
struct LayerTime {
  Kinds fwd{}, bwd{};
};

struct Built {
  LayerTime dense, moe;
  std::vector<StepCollective> per_layer_colls;  // TP, CP, EP: one entry per collective of a layer
  std::vector<bool> coll_dense, coll_moe;       // which layer kinds run it
};

double gemm_ms(const LayerCost& lc, const GemmRef& r) {
  const auto it = lc.gemms.find(r.op);
  if (it == lc.gemms.end()) return 0;
  return r.pass == Pass::Fprop ? it->second.fprop_ms : r.pass == Pass::Dgrad ? it->second.dgrad_ms : it->second.wgrad_ms;
}

void base_compute(LayerTime& t, const LayerCost& lc, double eff) {
  at(t.fwd, TimeKind::Gemm) = lc.gemm_fwd_ms() / eff;
  at(t.fwd, TimeKind::Attention) = lc.attn_fwd_ms / eff;
  at(t.fwd, TimeKind::Other) = lc.other_fwd_ms / eff;
  at(t.bwd, TimeKind::Gemm) = lc.gemm_bwd_ms() / eff;
  at(t.bwd, TimeKind::Attention) = lc.attn_bwd_ms / eff;
  at(t.bwd, TimeKind::Other) = lc.other_bwd_ms / eff;
}

// The TP and EP collectives of one micro-batch through one layer (core/node/collectives.hpp, from
// the rank's plan), costed on the cluster, with their exposure; and context parallelism's.
Built build_layers(const ParallelJob& job, const StepCosts& costs, const CollectiveModel& net) {
  const ParallelLayout& l = job.layout;
  const ModelConfig& c = job.model;
  const bool fp8 = costs.precision != Precision::BF16;
  const int64_t domain = net.cluster().domain_gpus();
  Built b;
  const double eff = sustained_rate(job, costs);
  base_compute(b.dense, costs.dense, eff);
  base_compute(b.moe, costs.moe, eff);
  auto add_coll = [&](StepCollective x, bool dense, bool moe, double exposed_fwd_or_bwd, bool backward, TimeKind kind,
                      double hidden_cost = 0) {
    if (dense) at(backward ? b.dense.bwd : b.dense.fwd, kind) += exposed_fwd_or_bwd + hidden_cost;
    if (moe) at(backward ? b.moe.bwd : b.moe.fwd, kind) += exposed_fwd_or_bwd + hidden_cost;
    x.exposed_ms = exposed_fwd_or_bwd + hidden_cost;
    b.per_layer_colls.push_back(std::move(x));
    b.coll_dense.push_back(dense);
    b.coll_moe.push_back(moe);
  };
  const ModelConfig rc = rank_config(c, l);
  const Plan plan = build_model_plan(rc);
  // The TP collectives of the rank's plan, the EP all-to-alls of the experts' plan: under
  // expert-tensor parallelism other than TP the dispatcher sends the sequence shard gathered over
  // ETP, not the TP rank's whole micro-batch.
  const bool own_expert_plan = plan.has_moe() && l.expert_tp() != l.tp;
  const Plan expert_plan = own_expert_plan ? build_model_plan(expert_rank_config(c, l)) : Plan{};
  std::vector<Collective> colls;
  auto collect = [&](const Plan& p, int64_t tp, CommGroup keep) {
    CommLayout cl;
    cl.tensor_parallel = tp;
    cl.sequence_parallel = l.sequence_parallel;
    cl.expert_parallel = p.has_moe() ? l.ep : 1;
    cl.data_parallel = cl.expert_parallel;
    if (tp == 1 && cl.expert_parallel == 1) return;
    for (Collective& x : plan_collectives(p, cl))
      if (x.group == keep || (keep == CommGroup::Tensor && x.group == CommGroup::Expert && !own_expert_plan))
        colls.push_back(std::move(x));
  };
  collect(plan, l.tp, CommGroup::Tensor);
  if (own_expert_plan) collect(expert_plan, l.expert_tp(), CommGroup::Expert);
  {
    for (const Collective& x : colls) {
      // Expert-tensor parallelism 1 under TP: the MoE block dispatches the sequence shard directly.
      if (x.group == CommGroup::Tensor && x.scope == Scope::MoeLayer && l.expert_tp() == 1) continue;
      StepCollective s;
      s.what = x.what;
      s.group = to_string(x.group);
      s.kind = x.kind;
      s.ranks = x.ranks;
      s.bytes = static_cast<double>(x.size_bytes(x.wire_type(fp8)));
      s.placement = x.group == CommGroup::Tensor ? place_group(l.tp, 1, domain) : place_group(l.ep, l.expert_tp(), domain);
      const CollectiveCost cost = net.cost(x.kind, s.bytes, s.placement);
      s.ms = cost.ms;
      s.algo = cost.algo;
      const bool dense = x.scope == Scope::Layer || x.scope == Scope::DenseLayer;
      const bool moe = x.scope == Scope::Layer || x.scope == Scope::MoeLayer;
      if (x.group == CommGroup::Tensor) {
        if (l.tp_comm_overlap && x.overlaps) {
          // Userbuffers: the transfer pipelined with the GEMM in TP chunks; the first chunk is
          // exposed, the rest hides behind the GEMM, which runs slower for the SMs it gives up.
          const LayerCost& lc = moe && !dense ? costs.moe : costs.dense;
          const double g = gemm_ms(lc, *x.overlaps) / eff;
          const double exposed = std::max(0.0, s.ms - g) + s.ms / d(l.tp);
          add_coll(s, dense, moe, exposed, x.backward, TimeKind::TpComm, g * job.contention.userbuffers_gemm_slowdown);
        } else {
          add_coll(s, dense, moe, s.ms, x.backward, TimeKind::TpComm);
        }
      } else {
        if (l.ep_comm_overlap) add_coll(s, dense, moe, 0, x.backward, TimeKind::EpComm, s.ms * job.contention.compute_slowdown);
        else add_coll(s, dense, moe, s.ms, x.backward, TimeKind::EpComm);
      }
    }
  }
  if (l.cp > 1) {
    const double T = d(l.micro_batch) * d(c.sequence_length / l.cp);
    const double hd = d(c.head_dimension());
    const double q = d(c.num_attention_heads) * hd / d(l.tp);
    const double kv = d(std::max<int64_t>(1, c.kv_heads() / l.tp)) * hd;
    const GroupPlacement g = place_group(l.cp, l.tp, domain);
    if (l.cp_comm == CpComm::Ring) {
      // cp - 1 steps: each passes the key-value chunk on while attention runs on the previous one
      // (backward: the key-value chunk and its gradient).
      const bool same = g.per_domain >= l.cp;
      for (bool bwd : {false, true}) {
        StepCollective s;
        s.what = bwd ? "key-value chunks and their gradients around the CP ring" : "key-value chunks around the CP ring";
        s.group = "CP";
        s.p2p = true;
        s.ranks = l.cp;
        s.placement = g;
        s.bytes = 2.0 * T * 2 * kv * (bwd ? 2 : 1);
        const double step = net.p2p(s.bytes, same).ms;
        s.ms = step * d(l.cp - 1);  // the ring's cp - 1 steps
        s.algo = CollAlgo::Direct;
        const double chunk_attn = (bwd ? costs.dense.attn_bwd_ms : costs.dense.attn_fwd_ms) / eff / d(l.cp);
        add_coll(s, true, true, d(l.cp - 1) * std::max(0.0, step - chunk_attn), bwd, TimeKind::CpComm);
      }
    } else {
      // DeepSpeed-Ulysses: Q, K, V scattered by heads and O gathered back, each way.
      for (bool bwd : {false, true})
        for (double width : {q, kv, kv, q}) {
          StepCollective s;
          s.what = "heads all-to-all (Ulysses)";
          s.group = "CP";
          s.kind = CollKind::AllToAll;
          s.ranks = l.cp;
          s.placement = g;
          s.bytes = 2.0 * T * width;
          const CollectiveCost cost = net.cost(CollKind::AllToAll, s.bytes, g);
          s.ms = cost.ms;
          s.algo = cost.algo;
          add_coll(s, true, true, s.ms, bwd, TimeKind::CpComm);
        }
    }
  }
  if (l.recompute == Recompute::Full) {
    // The forward again before each layer's backward, its communication included.
    for (LayerTime* t : {&b.dense, &b.moe}) at(t->bwd, TimeKind::Recompute) += total(t->fwd);
  } else if (l.recompute == Recompute::Selective) {
    // Megatron's selective recompute: the core attention's forward again (core/step/step_options.hpp).
    for (LayerTime* t : {&b.dense, &b.moe}) at(t->bwd, TimeKind::Recompute) += at(t->fwd, TimeKind::Attention);
  }
  return b;
}

struct Unit {  // a layer (or the embedding / LM head) as the step runs it
  int64_t layer = -1;  // -1: embedding or head
  bool moe = false;
  double dense_params = 0, expert_params = 0;  // this rank's, before data-parallel sharding
  double dense_fp8_linear = 0;  // of dense_params, the FP8 linears' (the routed experts are all FP8 linears)
  Kinds fwd{}, bwd{};
};

// The units of chunk k of stage s, forward order: the embedding first on stage 0 chunk 0, the LM
// head and loss last on the last stage's last chunk.
std::vector<Unit> chunk_units(const ParallelJob& job, const StepCosts& costs, const Built& b, int64_t s, int64_t k) {
  const ParallelLayout& l = job.layout;
  const ModelConfig& c = job.model;
  const double vocab_params = rank_vocab_params(c, l);
  const double eff = sustained_rate(job, costs);
  std::vector<Unit> out;
  if (s == 0 && k == 0) {
    Unit e;
    at(e.fwd, TimeKind::Other) = costs.embed_fwd_ms / eff;
    at(e.bwd, TimeKind::Other) = costs.embed_bwd_ms / eff;
    e.dense_params = vocab_params;
    out.push_back(e);
  }
  const ChunkLayers layers = chunk_layers(c, l, s, k);
  for (int64_t i = 0; i < layers.count; ++i) {
    Unit u;
    u.layer = layers.first + i;
    u.moe = is_moe_layer(c, u.layer);
    const LayerTime& t = u.moe ? b.moe : b.dense;
    u.fwd = t.fwd;
    u.bwd = t.bwd;
    const LayerParams p = rank_layer_params(c, l, u.layer);
    u.dense_params = p.dense;
    u.dense_fp8_linear = p.dense_fp8_linear;
    u.expert_params = p.experts;
    out.push_back(u);
  }
  if (s == l.pp - 1 && k == l.vpp - 1) {
    Unit h;
    at(h.fwd, TimeKind::Gemm) = costs.head_fwd_ms / eff;
    at(h.fwd, TimeKind::Other) = costs.loss_fwd_ms / eff;
    at(h.bwd, TimeKind::Gemm) = costs.head_bwd_ms / eff;
    at(h.bwd, TimeKind::Other) = costs.loss_bwd_ms / eff;
    h.dense_params = vocab_params;
    out.push_back(h);
  }
  return out;
}

// The data-parallel groups of dense parameters (DP x CP, TP apart) and of routed experts.
struct DpGroups {
  GroupPlacement dense, experts;
};
DpGroups dp_groups(const ParallelLayout& l, int64_t domain) {
  return {place_group(l.dp * l.cp, l.tp, domain), place_group(std::max<int64_t>(1, l.expert_dp()), l.expert_tp() * l.ep, domain)};
}

double dp_cost(const CollectiveModel& net, CollKind kind, double dense_bytes, double expert_bytes, const DpGroups& g) {
  return net.cost(kind, dense_bytes, g.dense).ms + net.cost(kind, expert_bytes, g.experts).ms;
}

// A unit's parameter all-gather: the bytes of its dense and its expert part (memory.hpp
// param_gather_bytes: the FP8 linears in FP8 where fp8_params).
double unit_gather_dense(const Unit& u, bool fp8_params) {
  return param_gather_bytes(u.dense_params, u.dense_fp8_linear, fp8_params);
}
double unit_gather_experts(const Unit& u, bool fp8_params) {
  return param_gather_bytes(u.expert_params, u.expert_params, fp8_params);
}

// A pass through a chunk under ZeRO-3 / FSDP: each unit's parameters gathered (prefetched one unit
// ahead) on the communication stream, its gradients reduce-scattered after its backward.
Kinds sharded_pass(const ParallelJob& job, const CollectiveModel& net, const std::vector<Unit>& units, bool backward,
                   const DpGroups& g, bool fp8_params) {
  const bool gather = !backward || job.layout.sharding != DpSharding::FsdpGradOp;
  const double grad_bytes = d(comm_type_bytes(job.grad_type));
  std::vector<SimOp> ops;
  std::vector<size_t> compute_index;
  Kinds k{};
  double work = 0;
  const size_t n = units.size();
  for (size_t j = 0; j < n; ++j) {
    const Unit& u = units[backward ? n - 1 - j : j];
    std::vector<size_t> deps;
    if (gather) {
      SimOp ag;
      ag.stream = SimStream::Comm;
      ag.work_ms = dp_cost(net, CollKind::AllGather, unit_gather_dense(u, fp8_params), unit_gather_experts(u, fp8_params), g);
      if (j >= 2) ag.deps.push_back(compute_index[j - 2]);  // at most one unit prefetched
      ops.push_back(ag);
      deps.push_back(ops.size() - 1);
    }
    SimOp comp;
    comp.stream = SimStream::Compute;
    const Kinds& part = backward ? u.bwd : u.fwd;
    comp.work_ms = total(part);
    comp.deps = deps;
    add_into(k, part);
    work += comp.work_ms;
    ops.push_back(comp);
    compute_index.push_back(ops.size() - 1);
    if (backward) {
      SimOp rs;
      rs.stream = SimStream::Comm;
      rs.work_ms = dp_cost(net, CollKind::ReduceScatter, grad_bytes * u.dense_params, grad_bytes * u.expert_params, g);
      rs.deps.push_back(ops.size() - 1);
      ops.push_back(rs);
    }
  }
  const SimTiming t = simulate_streams(ops, job.contention.compute_slowdown, job.contention.comm_slowdown);
  at(k, TimeKind::FsdpComm) += std::max(0.0, t.makespan_ms - work);
  return k;
}

}  // namespace

ContentionModel contention_from(const CommResult& comm) {
  ContentionModel c;
  double sum = 0;
  int n = 0;
  for (const CommMeasurement& m : comm.measured)
    for (const std::optional<OverlapTiming>* o : {&m.overlap, &m.overlap_fp8})
      if (*o && (*o)->gemm_alone_ms > 0) sum += (*o)->gemm_slowdown(), ++n;
  if (n > 0) {
    c.compute_slowdown = std::max(0.0, sum / n);
    c.source = fmt::format("compute slowdown measured beside {} collectives on this node (CommEngine::overlap); the "
                           "collective's own slowdown assumed",
                           n);
  }
  return c;
}

double model_flops_per_step(const ModelConfig& c, const ParallelLayout& l) {
  ModelConfig f = c;
  f.tensor_parallel = 1;
  f.micro_batch_size = l.micro_batch;
  if (f.moe.enabled()) {
    f.moe.expert_parallel = 1;
    f.moe.routing = "balanced";
    f.moe.capacity_factor = 0;
  }
  const Plan plan = build_model_plan(f);
  const AttentionShape s = attention_shape(f);
  const double per_micro = plan_flops(plan).full_model(c.num_hidden_layers) +
                           (attention_fwd_flops(s) + attention_bwd_flops(s)) * d(c.num_hidden_layers);
  return per_micro * d(l.batch() / l.micro_batch);
}

double sustained_rate(const ParallelJob& job, const StepCosts& costs) {
  if (job.compute_efficiency > 0) return job.compute_efficiency;
  return costs.source == CostSource::Measured ? 1.0 : kStepComputeEfficiency;
}

ParallelStepResult simulate_parallel_step(const ParallelJob& job, const StepCosts& costs, const CollectiveModel& net,
                                          const GpuSpec& gpu, bool trace) {
  const ParallelLayout& l = job.layout;
  const ModelConfig& c = job.model;
  const int64_t p = l.pp, v = l.vpp, m = l.micro_batches();
  const int64_t domain = net.cluster().domain_gpus();
  ParallelStepResult r;
  r.layout = l;
  r.precision = costs.precision;
  r.source = costs.source;
  r.basis = costs.basis;
  r.gpus = l.world();

  const Built b = build_layers(job, costs, net);
  const DpGroups groups = dp_groups(l, domain);
  const bool sharded = shards_parameters(l.sharding) && l.dp * l.cp > 1;
  const bool fp8_params = fp8_params_kept(costs.precision, l.sharding, job.fp8_param_gather);

  // Pipeline passes: per stage and chunk, forward and backward, with their composition.
  PipelineSpec spec;
  spec.stages = p;
  spec.chunks = v;
  spec.microbatches = m;
  spec.fwd_ms.assign(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(v)));
  spec.bwd_ms = spec.fwd_ms;
  std::vector<std::vector<Kinds>> fwd_kinds(static_cast<size_t>(p), std::vector<Kinds>(static_cast<size_t>(v))),
      bwd_kinds = fwd_kinds;
  std::vector<std::vector<std::vector<Unit>>> units(static_cast<size_t>(p));
  // The sequence-sharded activation a stage sends on (its gradient comes back).
  const double send_bytes = d(l.micro_batch) * d(c.sequence_length / l.cp) * d(c.hidden_size) * 2 /
                            (l.tp > 1 && l.sequence_parallel ? d(l.tp) : 1.0);
  const bool stage_same_domain = l.tp * l.cp * l.dp < domain;
  const double send_ms = p > 1 ? net.p2p(send_bytes, stage_same_domain).ms : 0;
  for (int64_t s = 0; s < p; ++s)
    for (int64_t k = 0; k < v; ++k) {
      std::vector<Unit> us = chunk_units(job, costs, b, s, k);
      Kinds f{}, bw{};
      if (sharded) {
        f = sharded_pass(job, net, us, false, groups, fp8_params);
        bw = sharded_pass(job, net, us, true, groups, fp8_params);
      } else {
        for (const Unit& u : us) add_into(f, u.fwd), add_into(bw, u.bwd);
      }
      if (v == 1 && p > 1) {  // 1F1B: Megatron's blocking sends
        if (s < p - 1) at(f, TimeKind::PpSend) += send_ms;
        if (s > 0) at(bw, TimeKind::PpSend) += send_ms;
      }
      fwd_kinds[static_cast<size_t>(s)][static_cast<size_t>(k)] = f;
      bwd_kinds[static_cast<size_t>(s)][static_cast<size_t>(k)] = bw;
      spec.fwd_ms[static_cast<size_t>(s)][static_cast<size_t>(k)] = total(f);
      spec.bwd_ms[static_cast<size_t>(s)][static_cast<size_t>(k)] = total(bw);
      units[static_cast<size_t>(s)].push_back(std::move(us));
    }
  // Interleaved: sends overlapped with compute, on the edge between stages only; 1F1B: inside the
  // sending pass (above), which the receiver waits for.
  spec.send_fwd_ms = spec.send_bwd_ms = v > 1 ? send_ms : 0;
  const PipelineSchedule sched = simulate_pipeline(spec);
  r.bubble_fraction = p > 1 ? sched.bubble_fraction() : 0;

  // Per stage: what its passes spent, the gradient reduction overlapped with its last micro-batch's
  // backward, the optimizer and the parameter gather.
  const double grad_bytes = d(comm_type_bytes(job.grad_type));
  const CollKind grad_kind = l.sharding == DpSharding::Ddp ? CollKind::AllReduce : CollKind::ReduceScatter;
  const bool dp_comm = l.dp * l.cp > 1 || l.expert_dp() > 1;
  std::vector<double> stage_end(static_cast<size_t>(p));
  double dp_bytes_step = 0, dp_ms_step = 0, ag_ms_step = 0, ag_bytes_step = 0;
  int64_t buckets_step = 0;
  r.stages.resize(static_cast<size_t>(p));
  for (int64_t s = 0; s < p; ++s) {
    StageResult& st = r.stages[static_cast<size_t>(s)];
    st.stage = s;
    for (const PipelinePass& x : sched.stages[static_cast<size_t>(s)])
      add_into(st.ms, x.backward ? bwd_kinds[static_cast<size_t>(s)][static_cast<size_t>(x.chunk)]
                                 : fwd_kinds[static_cast<size_t>(s)][static_cast<size_t>(x.chunk)]);
    st.pipeline_end_ms = sched.end_ms[static_cast<size_t>(s)];
    at(st.ms, TimeKind::Bubble) += sched.end_ms[static_cast<size_t>(s)] - sched.busy_ms[static_cast<size_t>(s)];
    double dense_params = 0, expert_params = 0;
    for (const auto& us : units[static_cast<size_t>(s)])
      for (const Unit& u : us) dense_params += u.dense_params, expert_params += u.expert_params;
    double extra = 0, ag_exposed = 0;
    if (dp_comm && !sharded) {
      // The last micro-batch's backward, chunk v-1 first, each unit's backward as a compute
      // operation; buckets of about bucket_params reduced as their gradients are complete.
      std::vector<SimOp> ops;
      double work = 0, bucket_dense = 0, bucket_dense_fp8 = 0, bucket_expert = 0, comm_total = 0;
      std::vector<double> ag_buckets;
      auto flush = [&]() {
        if (bucket_dense + bucket_expert <= 0) return;
        SimOp rs;
        rs.stream = SimStream::Comm;
        rs.work_ms = dp_cost(net, grad_kind, grad_bytes * bucket_dense, grad_bytes * bucket_expert, groups);
        if (!ops.empty()) rs.deps.push_back(ops.size() - 1);
        comm_total += rs.work_ms;
        dp_bytes_step += grad_bytes * (bucket_dense + bucket_expert);
        ++buckets_step;
        ops.push_back(rs);
        if (l.sharding != DpSharding::Ddp) {
          const double dense_bytes = param_gather_bytes(bucket_dense, bucket_dense_fp8, fp8_params);
          const double expert_bytes = param_gather_bytes(bucket_expert, bucket_expert, fp8_params);
          ag_buckets.push_back(dp_cost(net, CollKind::AllGather, dense_bytes, expert_bytes, groups));
          ag_bytes_step += dense_bytes + expert_bytes;
        }
        bucket_dense = bucket_dense_fp8 = bucket_expert = 0;
      };
      for (int64_t k = v - 1; k >= 0; --k) {
        const auto& us = units[static_cast<size_t>(s)][static_cast<size_t>(k)];
        for (auto it = us.rbegin(); it != us.rend(); ++it) {
          SimOp comp;
          comp.stream = SimStream::Compute;
          comp.work_ms = total(it->bwd);
          work += comp.work_ms;
          ops.push_back(comp);
          bucket_dense += it->dense_params;
          bucket_dense_fp8 += it->dense_fp8_linear;
          bucket_expert += it->expert_params;
          if (bucket_dense + bucket_expert >= job.bucket_params) flush();
        }
      }
      flush();
      if (l.overlap_grad_reduce) {
        const SimTiming t = simulate_streams(ops, job.contention.compute_slowdown, job.contention.comm_slowdown);
        extra = std::max(0.0, t.makespan_ms - work);
      } else {
        extra = comm_total;
      }
      dp_ms_step = std::max(dp_ms_step, comm_total);
      if (!ag_buckets.empty()) {
        const double all = std::accumulate(ag_buckets.begin(), ag_buckets.end(), 0.0);
        ag_ms_step = std::max(ag_ms_step, all);
        // Hidden behind the next step's forward but for the first bucket, which the first layers wait for.
        ag_exposed = l.overlap_param_gather ? ag_buckets.back() + (all - ag_buckets.back()) * job.contention.compute_slowdown
                                            : all;
      }
    }
    const double dense_dp = d(l.dp * l.cp), edp = d(std::max<int64_t>(1, l.expert_dp()));
    const double updated = l.sharding == DpSharding::Ddp ? dense_params + expert_params
                                                         : dense_params / dense_dp + expert_params / edp;
    at(st.ms, TimeKind::DpComm) += extra;
    at(st.ms, TimeKind::Optimizer) += updated * costs.optimizer_ms_per_param;
    at(st.ms, TimeKind::ParamGather) += ag_exposed;
    stage_end[static_cast<size_t>(s)] = st.pipeline_end_ms + extra + updated * costs.optimizer_ms_per_param + ag_exposed;
    RankState state;
    state.storage = job.step.storage;
    state.grad_bytes = grad_bytes;
    state.precision = costs.precision;
    state.framework = job.framework;
    state.loss_fused = loss_fused(job.step, job.framework);
    state.fp8_param_gather = job.fp8_param_gather;
    st.memory = rank_memory(c, l, s, state);
  }
  r.step_ms = *std::max_element(stage_end.begin(), stage_end.end());
  r.critical_stage = std::max_element(stage_end.begin(), stage_end.end()) - stage_end.begin();
  for (int64_t s = 0; s < p; ++s) at(r.stages[static_cast<size_t>(s)].ms, TimeKind::Bubble) += r.step_ms - stage_end[static_cast<size_t>(s)];

  // Throughput and utilization.
  r.tokens_per_step = d(l.batch()) * d(c.sequence_length);
  r.tokens_per_s_per_gpu = r.tokens_per_step / (r.step_ms * 1e-3) / d(r.gpus);
  r.model_flops_per_step = model_flops_per_step(c, l);
  r.model_tflops_per_gpu = r.model_flops_per_step / (r.step_ms * 1e-3) / d(r.gpus) / 1e12;
  if (const auto& peak = gpu.peak(PeakFormat::BF16)) r.mfu = r.model_tflops_per_gpu / peak->value;

  // Memory.
  for (const StageResult& st : r.stages) r.peak_memory_bytes = std::max(r.peak_memory_bytes, st.memory.total_bytes());
  if (gpu.memory_bytes) {
    r.usable_memory_bytes = usable_memory_bytes(gpu.memory_bytes->value);
    r.fits = r.peak_memory_bytes <= r.usable_memory_bytes;
  } else {
    r.notes.push_back(fmt::format("{} has no memory size in the GPU spec database: whether the layout fits is not checked", gpu.key));
  }

  // The step's collectives, per step on one rank of the first stage.
  int64_t moe_stage = 0, dense_stage = 0;
  for (const auto& us : units[0])
    for (const Unit& u : us) {
      if (u.layer < 0) continue;
      (u.moe ? moe_stage : dense_stage) += 1;
    }
  const double passes = d(m);
  for (size_t i = 0; i < b.per_layer_colls.size(); ++i) {
    StepCollective x = b.per_layer_colls[i];
    const double layers = (b.coll_dense[i] ? d(dense_stage) : 0) + (b.coll_moe[i] ? d(moe_stage) : 0);
    x.per_step = layers * passes;
    x.exposed_ms *= layers * passes;
    if (x.per_step > 0) r.collectives.push_back(x);
  }
  if (p > 1) {
    StepCollective x;
    x.what = "activation (forward) and its gradient (backward) to the neighbouring stage";
    x.group = "PP";
    x.p2p = true;
    x.ranks = 2;
    x.bytes = send_bytes;
    x.ms = send_ms;
    x.algo = CollAlgo::Direct;
    x.per_step = 2 * d(m) * d(v);
    x.exposed_ms = at(r.critical().ms, TimeKind::PpSend);
    r.collectives.push_back(x);
  }
  if (dp_comm && !sharded && buckets_step > 0) {
    StepCollective x;
    x.what = fmt::format("gradients, {} buckets of about {:.0f} M parameters", buckets_step / p, job.bucket_params / 1e6);
    x.group = "DP";
    x.kind = grad_kind;
    x.ranks = l.dp * l.cp;
    x.placement = groups.dense;
    x.bytes = dp_bytes_step / d(p);
    x.ms = dp_ms_step;
    x.algo = net.cost(grad_kind, x.bytes, groups.dense).algo;
    x.per_step = 1;
    x.exposed_ms = at(r.critical().ms, TimeKind::DpComm);
    r.collectives.push_back(x);
    if (l.sharding != DpSharding::Ddp) {
      StepCollective a = x;
      a.what = fp8_params ? "updated parameters after the optimizer (FP8 linears in FP8, the rest BF16: --fp8-param-gather)"
                          : "updated parameters (BF16) after the optimizer";
      a.kind = CollKind::AllGather;
      a.bytes = ag_bytes_step / d(p);
      a.ms = ag_ms_step;
      a.algo = net.cost(CollKind::AllGather, a.bytes, groups.dense).algo;
      a.exposed_ms = at(r.critical().ms, TimeKind::ParamGather);
      r.collectives.push_back(a);
    }
  }
  if (sharded) {
    StepCollective x;
    x.what = l.sharding == DpSharding::FsdpGradOp ? "parameters gathered before each unit's forward, gradients reduce-scattered after its backward"
                                                  : "parameters gathered before each unit's forward and backward, gradients reduce-scattered after its backward";
    if (fp8_params) x.what += " (FP8 linears gathered in FP8: --fp8-param-gather)";
    x.what += "; size and time: one pass's gathers of the stage's units, exposed: the sharded passes' wait";
    x.group = "DP";
    x.kind = CollKind::AllGather;
    x.ranks = l.dp * l.cp;
    x.placement = groups.dense;
    for (const auto& us : units[0])
      for (const Unit& u : us) {
        const double dense_bytes = unit_gather_dense(u, fp8_params), expert_bytes = unit_gather_experts(u, fp8_params);
        x.bytes += dense_bytes + expert_bytes;
        x.ms += dp_cost(net, CollKind::AllGather, dense_bytes, expert_bytes, groups);
      }
    x.algo = net.cost(CollKind::AllGather, x.bytes, groups.dense).algo;
    x.per_step = d(m) * (l.sharding == DpSharding::FsdpGradOp ? 1 : 2);  // passes that gather
    x.exposed_ms = at(r.critical().ms, TimeKind::FsdpComm);
    r.collectives.push_back(x);
  }

  // The timeline: every pass of every stage, then its tail.
  if (trace) {
    for (int64_t s = 0; s < p; ++s) {
      const std::string process = fmt::format("stage {} ({})", s, to_string(r.precision));
      TraceTrack compute{static_cast<int>(s) + 1, 1, process, "compute", {}};
      TraceTrack comm{static_cast<int>(s) + 1, 2, process, "communication", {}};
      for (const PipelinePass& x : sched.stages[static_cast<size_t>(s)])
        compute.events.push_back({fmt::format("{} mb{}{}", x.backward ? "B" : "F", x.microbatch,
                                              v > 1 ? fmt::format(" chunk{}", x.chunk) : ""),
                                  x.backward ? "backward" : "forward", x.start_ms * 1e3, (x.end_ms - x.start_ms) * 1e3, {}});
      const StageResult& st = r.stages[static_cast<size_t>(s)];
      double t0 = st.pipeline_end_ms;
      for (TimeKind k : {TimeKind::DpComm, TimeKind::Optimizer, TimeKind::ParamGather}) {
        const double ms = st.ms[static_cast<size_t>(k)];
        if (ms <= 0) continue;
        (k == TimeKind::Optimizer ? compute : comm).events.push_back({to_string(k), "tail", t0 * 1e3, ms * 1e3, {}});
        t0 += ms;
      }
      r.trace.push_back(std::move(compute));
      r.trace.push_back(std::move(comm));
    }
  }
  const double rate = sustained_rate(job, costs);
  const char* why = job.compute_efficiency > 0          ? ": --step-efficiency"
                    : costs.source == CostSource::Measured ? ": measured in the framework's step context, taken as it is"
                                                         : ": calibrated on the tune rows of published runs";
  r.notes.push_back(fmt::format("compute runs at {:.2f} of its costed rate in the multi-GPU step{} (docs/parallel.md)", rate, why));
  r.notes.push_back(fmt::format("contention while communication overlaps compute: compute +{:.0f}%, communication +{:.0f}% "
                                "({})",
                                100 * job.contention.compute_slowdown, 100 * job.contention.comm_slowdown, job.contention.source));
  if (!net.calibration_note().empty()) r.notes.push_back(net.calibration_note());
  if (job.fp8_param_gather) {
    if (fp8_params)
      r.notes.push_back(fmt::format("FP8 parameter gathers (--fp8-param-gather): the FP8 linears' parameters are kept in {} "
                                    "(Transformer Engine's FP8 parameters) and gathered at 1 byte each; norms, embedding, LM "
                                    "head and router stay BF16; the FP32 main parameters, gradients and optimizer states are "
                                    "unchanged",
                                    to_string(r.precision)));
    else if (r.precision == Precision::BF16)
      r.notes.push_back("--fp8-param-gather changes nothing in BF16: no parameter is kept in FP8, the gathers send BF16");
    else if (r.precision == Precision::NVFP4)
      r.notes.push_back("--fp8-param-gather changes nothing under NVFP4 (Megatron-LM keeps NVFP4 parameters with its own "
                        "--fp4-param-gather, not modelled): the gathers send BF16");
    else
      r.notes.push_back("--fp8-param-gather changes nothing under ddp: Megatron-LM gathers parameters only with the "
                        "distributed optimizer or FSDP");
  }
  const ParallelLayout& lay = job.layout;
  const bool fsdp = lay.dp > 1 && shards_parameters(lay.sharding);
  if (job.framework != StepContextKind::TransformerEngine && (lay.tp > 1 || fsdp))
    r.notes.push_back("a lower bound for eager torch.distributed: its tensor-parallel and FSDP steps left the GPUs waiting "
                      "between collectives far beyond this model on 2 x H200 (docs/results/h200x2_parallel_real.md)");
  return r;
}

}  // namespace gs

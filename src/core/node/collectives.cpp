// The collectives of a parallel layout, derived from the GEMM plan (collectives.hpp, docs/node.md).
#include "core/node/collectives.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/util/text_util.hpp"

namespace gs {

const char* to_string(CollKind k) {
  switch (k) {
    case CollKind::AllGather: return "all-gather";
    case CollKind::ReduceScatter: return "reduce-scatter";
    case CollKind::AllReduce: return "all-reduce";
    case CollKind::AllToAll: return "all-to-all";
  }
  return "?";
}
const char* to_string(CommGroup g) {
  switch (g) {
    case CommGroup::Tensor: return "TP";
    case CommGroup::Expert: return "EP";
    case CommGroup::Data: return "DP";
    case CommGroup::ExpertData: return "EDP";
  }
  return "?";
}
const char* to_string(CommType t) {
  switch (t) {
    case CommType::Fp32: return "FP32";
    case CommType::Bf16: return "BF16";
    case CommType::Fp8: return "FP8";
  }
  return "?";
}
const char* to_string(OverlapGemm k) { return k == OverlapGemm::Fp8 ? "FP8" : "BF16"; }

int64_t comm_type_bytes(CommType t) {
  switch (t) {
    case CommType::Fp32: return 4;
    case CommType::Bf16: return 2;
    case CommType::Fp8: return 1;
  }
  return 0;
}
CommType comm_type_from_string(const std::string& s) {
  const std::string l = ascii_lower(trim(s));
  if (l == "fp32") return CommType::Fp32;
  if (l == "bf16") return CommType::Bf16;
  throw UsageError(fmt::format("gradient reduction type '{}' is not fp32 or bf16", clip_text(printable(s), 40)));
}

// Sizes are products of plan dimensions (each up to 2^24, experts up to 16,384): checked, so a
// plan at the documented limits is refused with the bound named instead of wrapping around
// (signed overflow is undefined; in Release it printed 0.00 MiB or negative rows).
int64_t Collective::rows_sent(int64_t rank) const {
  int64_t s = 0;
  for (int64_t j = 0; j < ranks; ++j) s = checked_add(s, matrix[static_cast<size_t>(rank * ranks + j)], "--comm: rows sent");
  return s;
}
int64_t Collective::rows_received(int64_t rank) const {
  int64_t s = 0;
  for (int64_t i = 0; i < ranks; ++i) s = checked_add(s, matrix[static_cast<size_t>(i * ranks + rank)], "--comm: rows received");
  return s;
}
int64_t Collective::bytes_of_rows(int64_t r, CommType t) const {
  const std::string w = "--comm: the bytes of " + what;
  int64_t b = checked_mul(checked_mul(r, width, w), comm_type_bytes(t), w);
  if (t == CommType::Fp8 && block_scales) b = checked_add(b, checked_mul(checked_mul(r, (width + 127) / 128, w), 4, w), w);
  return b;
}
int64_t Collective::size_bytes(CommType t) const {
  if (kind != CollKind::AllToAll) return bytes_of_rows(rows, t);
  int64_t most = 0;
  for (int64_t r = 0; r < ranks; ++r) most = std::max({most, rows_sent(r), rows_received(r)});
  return bytes_of_rows(most, t);
}
double Collective::bus_factor() const {
  const double n = static_cast<double>(ranks);
  return kind == CollKind::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}
double Collective::bus_bandwidth_gbs(CommType t, double ms) const {
  if (ms <= 0) return 0;
  return static_cast<double>(size_bytes(t)) / (ms * 1e-3) * bus_factor() / 1e9;
}

int64_t times_per_step(const Collective& c, const Plan& plan) {
  switch (c.scope) {
    case Scope::Layer: return plan.layers();
    case Scope::DenseLayer: return plan.dense_layers();
    case Scope::MoeLayer: return plan.moe_layers();
    default: return 1;
  }
}

CommLayout layout_for(const Plan& plan, int64_t data_parallel, bool sequence_parallel, int zero_stage,
                      CommType grad_type) {
  if (!plan.model_mode || !plan.config)
    throw UsageError("the collectives of a layout need a model (--model or --config), not --shapes");
  CommLayout l;
  l.tensor_parallel = plan.config->tensor_parallel;
  l.expert_parallel = plan.has_moe() ? plan.config->moe.expert_parallel : 1;
  l.sequence_parallel = sequence_parallel;
  l.zero_stage = zero_stage;
  l.grad_type = grad_type;
  l.data_parallel = data_parallel > 0 ? data_parallel : l.expert_parallel;
  return l;
}

void validate_layout(const CommLayout& l, const Plan& plan) {
  if (!plan.model_mode || !plan.config)
    throw UsageError("the collectives of a layout need a model (--model or --config), not --shapes");
  if (l.data_parallel < 1) throw UsageError(fmt::format("--data-parallel must be >= 1, got {}", l.data_parallel));
  if (l.data_parallel > 1048576) throw UsageError(fmt::format("--data-parallel {} exceeds the limit 1048576", l.data_parallel));
  if (l.zero_stage < 0 || l.zero_stage > 3)
    throw UsageError(fmt::format("--zero-stage must be 0, 1, 2 or 3, got {}", l.zero_stage));
  if (l.tensor_parallel != plan.config->tensor_parallel)
    throw UsageError("the layout's tensor parallelism differs from the plan's");
  const int64_t ep = plan.has_moe() ? plan.config->moe.expert_parallel : 1;
  if (l.expert_parallel != ep) throw UsageError("the layout's expert parallelism differs from the plan's");
  if (l.expert_parallel > kMaxCommExpertParallel)
    throw UsageError(fmt::format("--comm plans all-to-alls over at most {} expert-parallel ranks, got --expert-parallel {}",
                                 kMaxCommExpertParallel, l.expert_parallel));
  if (l.data_parallel % l.expert_parallel != 0)
    throw UsageError(fmt::format("--data-parallel {} is not a multiple of --expert-parallel {} (expert-parallel ranks "
                                 "are data-parallel ranks)",
                                 l.data_parallel, l.expert_parallel));
  if (l.tensor_parallel > 1 && l.sequence_parallel && plan.config->tokens() % l.tensor_parallel != 0)
    throw UsageError(fmt::format("sequence parallelism splits the {} tokens of a micro-batch over --tensor-parallel {}: "
                                 "not divisible (pass --sequence-parallel off, or change the batch)",
                                 plan.config->tokens(), l.tensor_parallel));
}

namespace {

// The first GEMM of the attention block, as the plan names it.
Op first_attention_op(const ModelConfig& c) {
  if (!c.mla.enabled()) return Op::Qkv;
  return c.mla.q_lora_rank > 0 ? Op::QDown : Op::QProj;
}

Collective make(CollKind kind, CommGroup group, int64_t ranks, Scope scope, bool backward, std::string what,
                std::optional<GemmRef> overlaps, CommType t16, CommType t8, int64_t rows, int64_t width) {
  Collective c{kind, group, ranks, scope, backward, std::move(what), overlaps, t16, t8};
  c.rows = rows;
  c.width = width;
  return c;
}

// Tensor (and sequence) parallelism of one block: the input gathered before its first GEMM, the
// output reduced after its last; in backward the gradient gathered before the last GEMM's Dgrad,
// the input gathered again for the first GEMM's Wgrad and the input gradient reduced after the
// first GEMM's Dgrad (Megatron / Transformer Engine; the gathered input is not kept).
void add_tp_block(std::vector<Collective>& fwd, std::vector<Collective>& bwd, const CommLayout& l, Scope scope,
                  const std::string& name, Op first, Op last, int64_t tokens, int64_t hidden) {
  const int64_t tp = l.tensor_parallel;
  using K = CollKind;
  const CommType B = CommType::Bf16, F = CommType::Fp8;
  if (l.sequence_parallel) {
    fwd.push_back(make(K::AllGather, CommGroup::Tensor, tp, scope, false, "input of " + name, GemmRef{Pass::Fprop, first},
                       B, F, tokens, hidden));
    fwd.push_back(make(K::ReduceScatter, CommGroup::Tensor, tp, scope, false, "output of " + name,
                       GemmRef{Pass::Fprop, last}, B, B, tokens, hidden));
    bwd.push_back(make(K::AllGather, CommGroup::Tensor, tp, scope, true, "output gradient of " + name,
                       GemmRef{Pass::Dgrad, last}, B, F, tokens, hidden));
    bwd.push_back(make(K::AllGather, CommGroup::Tensor, tp, scope, true, "input of " + name + " again, for Wgrad",
                       GemmRef{Pass::Dgrad, first}, B, F, tokens, hidden));
    bwd.push_back(make(K::ReduceScatter, CommGroup::Tensor, tp, scope, true, "input gradient of " + name,
                       GemmRef{Pass::Wgrad, first}, B, B, tokens, hidden));
  } else {
    fwd.push_back(make(K::AllReduce, CommGroup::Tensor, tp, scope, false, "output of " + name, std::nullopt, B, B,
                       tokens, hidden));
    bwd.push_back(make(K::AllReduce, CommGroup::Tensor, tp, scope, true, "input gradient of " + name,
                       GemmRef{Pass::Wgrad, first}, B, B, tokens, hidden));
  }
}

// Rows rank i sends to rank j: the rows the routing gives rank j's experts, split evenly over the
// source ranks (the routing holds per-expert totals over the EP group, not who sent them).
std::vector<int64_t> dispatch_matrix(const Routing& r) {
  const int64_t n = r.expert_parallel;
  std::vector<int64_t> m(static_cast<size_t>(n * n), 0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t total = r.rank_rows[static_cast<size_t>(j)];
    for (int64_t i = 0; i < n; ++i) m[static_cast<size_t>(i * n + j)] = total / n + (i < total % n ? 1 : 0);
  }
  return m;
}

std::vector<int64_t> transposed(const std::vector<int64_t>& m, int64_t n) {
  std::vector<int64_t> t(m.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) t[static_cast<size_t>(j * n + i)] = m[static_cast<size_t>(i * n + j)];
  return t;
}

// Weight elements of this rank per (scope, kind): attention and dense MLP per layer, the router,
// shared and routed experts per MoE layer, the LM head once.
struct WeightGroup {
  Scope scope;
  std::string what;
  bool experts;   // sharded over EP: reduced over the expert-data-parallel group
  bool bf16_only; // BF16 in every recipe (router, LM head)
  Op first;       // the group's first GEMM
  int64_t elements = 0;
};

std::vector<WeightGroup> weight_groups(const Plan& plan) {
  std::vector<WeightGroup> g;
  auto group_for = [&](Scope s, const std::string& what, bool experts, bool bf16, Op op) -> WeightGroup& {
    for (WeightGroup& w : g)
      if (w.scope == s && w.what == what) return w;
    g.push_back({s, what, experts, bf16, op});
    return g.back();
  };
  const int64_t local_experts = plan.routing ? plan.routing->local_experts() : 0;
  const auto add = [](WeightGroup& w, int64_t elements) {
    w.elements = checked_add(w.elements, elements, "--comm: the elements of the " + w.what);
  };
  for (const Gemm& x : plan.gemms) {
    if (x.pass != Pass::Fprop) continue;
    const int64_t per = checked_mul(x.k, x.n, "--comm: a weight's elements (k x n)");
    switch (x.op) {
      case Op::Router: add(group_for(x.scope, "router weights", false, true, x.op), per); break;
      case Op::ExpertUp:
      case Op::ExpertDown:
        add(group_for(x.scope, "routed expert weights", true, false, x.op),
            checked_mul(per, local_experts, "--comm: the elements of the routed expert weights"));
        break;
      case Op::LmHead: add(group_for(x.scope, "LM head weights", false, true, x.op), per); break;
      case Op::SharedUp:
      case Op::SharedDown: add(group_for(x.scope, "shared expert weights", false, false, x.op), per); break;
      default: add(group_for(x.scope, x.scope == Scope::Layer ? "layer weights" : "dense MLP weights", false, false, x.op), per);
    }
  }
  return g;
}

int64_t round_up(int64_t v, int64_t m) { return checked_add(v, m - 1, "--comm: a padded shard") / m * m; }

void add_dp(std::vector<Collective>& fwd, std::vector<Collective>& bwd, const CommLayout& l, const Plan& plan) {
  const int64_t edp = l.data_parallel / l.expert_parallel;
  for (const WeightGroup& w : weight_groups(plan)) {
    const int64_t ranks = w.experts ? edp : l.data_parallel;
    if (ranks < 2 || w.elements == 0) continue;
    const CommGroup grp = w.experts ? CommGroup::ExpertData : CommGroup::Data;
    const int64_t rows = round_up(w.elements, ranks);  // NCCL shards must be equal: padded
    // The weights' wire type under the FP8 recipes: FP8 only with --fp8-param-gather, and never for
    // the weights that stay BF16 in every recipe.
    const CommType wt8 = w.bf16_only || !l.fp8_param_gather ? CommType::Bf16 : CommType::Fp8;
    const GemmRef f{Pass::Fprop, w.first}, wg{Pass::Wgrad, w.first};
    if (l.zero_stage == 0) {
      bwd.push_back(make(CollKind::AllReduce, grp, ranks, w.scope, true, "gradients of the " + w.what, wg, l.grad_type,
                         l.grad_type, rows, 1));
      continue;
    }
    if (l.zero_stage == 3) {
      fwd.push_back(make(CollKind::AllGather, grp, ranks, w.scope, false, w.what + " (FSDP, forward)", f,
                         CommType::Bf16, wt8, rows, 1));
      bwd.push_back(make(CollKind::AllGather, grp, ranks, w.scope, true, w.what + " (FSDP, backward)",
                         GemmRef{Pass::Dgrad, w.first}, CommType::Bf16, wt8, rows, 1));
    } else {
      fwd.push_back(make(CollKind::AllGather, grp, ranks, w.scope, false, "updated " + w.what, f, CommType::Bf16, wt8,
                         rows, 1));
    }
    bwd.push_back(make(CollKind::ReduceScatter, grp, ranks, w.scope, true, "gradients of the " + w.what, wg,
                       l.grad_type, l.grad_type, rows, 1));
  }
}

}  // namespace

std::vector<Collective> plan_collectives(const Plan& plan, const CommLayout& l) {
  validate_layout(l, plan);
  const ModelConfig& c = *plan.config;
  const int64_t T = c.tokens(), h = c.hidden_size;
  std::vector<Collective> fwd, bwd;
  if (l.tensor_parallel > 1) {
    // Backward runs the blocks in reverse: the MLP's (or MoE block's) collectives before attention's.
    std::vector<Collective> bwd_attn;
    add_tp_block(fwd, bwd_attn, l, Scope::Layer, "attention", first_attention_op(c), Op::AttnOut, T, h);
    if (plan.dense_layers() > 0)
      add_tp_block(fwd, bwd, l, plan.has_moe() ? Scope::DenseLayer : Scope::Layer, "the MLP", Op::MlpUp, Op::MlpDown,
                   T, h);
    if (plan.has_moe()) add_tp_block(fwd, bwd, l, Scope::MoeLayer, "the MoE block", Op::Router, Op::ExpertDown, T, h);
    bwd.insert(bwd.end(), bwd_attn.begin(), bwd_attn.end());
  }
  if (l.expert_parallel > 1 && plan.routing) {
    const Routing& r = *plan.routing;
    const int64_t ep = l.expert_parallel;
    const bool shared = c.moe.shared_experts > 0;
    const std::vector<int64_t> disp = dispatch_matrix(r), comb = transposed(disp, ep);
    auto a2a = [&](bool backward, const std::string& what, const std::vector<int64_t>& m, CommType t8,
                   std::optional<GemmRef> ov) {
      Collective x = make(CollKind::AllToAll, CommGroup::Expert, ep, Scope::MoeLayer, backward, what, ov,
                          CommType::Bf16, t8, 0, h);
      x.block_scales = t8 == CommType::Fp8;
      x.matrix = m;
      return x;
    };
    // Shared experts run beside the all-to-alls where the model has them (DeepSeek-V3).
    auto beside = [&](Pass p, Op o) { return shared ? std::optional<GemmRef>(GemmRef{p, o}) : std::nullopt; };
    fwd.push_back(a2a(false, "dispatch of tokens to experts", disp, CommType::Fp8, beside(Pass::Fprop, Op::SharedUp)));
    fwd.push_back(a2a(false, "combine of expert outputs", comb, CommType::Bf16, beside(Pass::Fprop, Op::SharedDown)));
    bwd.push_back(a2a(true, "output gradients to experts (combine backward)", disp, CommType::Bf16,
                      beside(Pass::Dgrad, Op::SharedDown)));
    bwd.push_back(a2a(true, "input gradients back (dispatch backward)", comb, CommType::Bf16,
                      beside(Pass::Dgrad, Op::SharedUp)));
  }
  add_dp(fwd, bwd, l, plan);
  std::vector<Collective> all = std::move(fwd);
  all.insert(all.end(), std::make_move_iterator(bwd.begin()), std::make_move_iterator(bwd.end()));
  // Every size within kMaxCollectiveBytes, so the sums and byte counts that follow (per step,
  // per layer, bus bandwidth, JSON) stay far from 64-bit limits and exact in doubles.
  for (const Collective& x : all)
    for (CommType t : {x.type_bf16, x.type_fp8})
      if (const int64_t b = x.size_bytes(t); b > kMaxCollectiveBytes)
        throw UsageError(fmt::format("--comm: the {} ({}) would move {} bytes, more than the 2^53 bytes (8 PiB) a collective "
                                     "may move: a smaller model or more ranks",
                                     x.what, to_string(t), format_thousands(b)));
  return all;
}

void check_gpus_present(const std::vector<Collective>& cs, const CommLayout& l, int64_t gpus_present, GpuPool pool) {
  for (const Collective& c : cs) {
    if (c.ranks <= gpus_present) continue;
    const char* flag = c.group == CommGroup::Tensor   ? "--tensor-parallel"
                       : c.group == CommGroup::Expert ? "--expert-parallel"
                                                      : "--data-parallel";
    const char* s = gpus_present == 1 ? "" : "s";
    const std::string present =
        pool == GpuPool::MpiRanks
            ? fmt::format("this MPI job has {} rank{}, one GPU each (lower {}, start more ranks, or pass --dry-run "
                          "for the sizes alone)",
                          gpus_present, s, flag)
            : fmt::format("this node has {} visible GPU{} (lower {}, or pass --dry-run for the sizes alone)",
                          gpus_present, s, flag);
    throw UsageError(fmt::format("the {} collectives need {} GPUs in one communicator ({} {}); {}", to_string(c.group),
                                 c.ranks, flag, c.group == CommGroup::ExpertData ? l.data_parallel : c.ranks,
                                 present));
  }
}

const CommMeasurement* CommResult::find(size_t index, CommType t) const {
  for (const CommMeasurement& m : measured)
    if (m.index == index && m.type == t) return &m;
  return nullptr;
}

namespace {

void layout_notes(CommResult& r, const Plan& plan) {
  const CommLayout& l = r.layout;
  if (l.tensor_parallel > 1 && l.expert_parallel > 1)
    r.notes.push_back("with tensor parallelism the all-to-alls are modelled as moving the routing's full rows; "
                      "Megatron's dispatcher splits them over the TP ranks and gathers inside the TP group");
  if (l.expert_parallel > 1)
    r.notes.push_back("all-to-all rows: each rank's received rows from the routing, split evenly over the sending "
                      "ranks; FP8 dispatch carries one FP32 scale per 128 elements");
  if (l.data_parallel > 1)
    r.notes.push_back("data-parallel buffers are padded to a multiple of the group size; embedding and norm weights "
                      "are not counted (no GEMM in the plan)");
  (void)plan;
}

}  // namespace

CommResult plan_comm(const Plan& plan, const CommLayout& l) {
  CommResult r;
  r.layout = l;
  r.collectives = plan_collectives(plan, l);
  layout_notes(r, plan);
  return r;
}

const Gemm* overlapped_gemm(const Collective& c, const Plan& plan) {
  if (!c.overlaps) return nullptr;
  for (const Gemm& g : plan.gemms)
    if (g.pass == c.overlaps->pass && g.op == c.overlaps->op) return &g;
  return nullptr;
}

CommResult measure_collectives(const Plan& plan, const CommLayout& l, CommEngine& engine, int warmup, int iters,
                               bool overlap) {
  CommResult r = plan_comm(plan, l);
  check_gpus_present(r.collectives, l, engine.gpus(), engine.pool());
  r.engine = engine.description();
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const Collective& c = r.collectives[i];
    const Gemm* g = overlap ? overlapped_gemm(c, plan) : nullptr;
    r.measured.push_back({i, c.type_bf16, engine.time(c, c.type_bf16, warmup, iters)});
    if (g) r.measured.back().overlap = engine.overlap(c, c.type_bf16, *g, OverlapGemm::Bf16, warmup, iters);
    if (c.type_fp8 != c.type_bf16) r.measured.push_back({i, c.type_fp8, engine.time(c, c.type_fp8, warmup, iters)});
    if (g) r.measured.back().overlap_fp8 = engine.overlap(c, c.type_fp8, *g, OverlapGemm::Fp8, warmup, iters);
  }
  return r;
}

nlohmann::json comm_to_json(const CommResult& r, const Plan& plan) {
  nlohmann::json j;
  j["schema"] = "gemmscope-comm/1";
  j["engine"] = r.engine;
  j["measured"] = !r.measured.empty();
  const CommLayout& l = r.layout;
  j["layout"] = {{"tensor_parallel", l.tensor_parallel}, {"sequence_parallel", l.sequence_parallel},
                 {"expert_parallel", l.expert_parallel}, {"data_parallel", l.data_parallel},
                 {"zero_stage", l.zero_stage},           {"grad_type", to_string(l.grad_type)},
                 {"fp8_param_gather", l.fp8_param_gather}, {"gpus", l.gpus()}};
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const Collective& c = r.collectives[i];
    nlohmann::json x = {{"kind", to_string(c.kind)},   {"group", to_string(c.group)},
                        {"ranks", c.ranks},            {"scope", to_string(c.scope)},
                        {"backward", c.backward},      {"what", c.what},
                        {"per_step", times_per_step(c, plan)}, {"rows", c.rows},
                        {"width", c.width},            {"block_scales", c.block_scales}};
    if (c.kind == CollKind::AllToAll) x["matrix"] = c.matrix;
    if (c.overlaps) x["overlaps"] = {{"pass", to_string(c.overlaps->pass)}, {"op", to_string(c.overlaps->op)}};
    nlohmann::json types = nlohmann::json::object();
    for (CommType t : {c.type_bf16, c.type_fp8}) {
      nlohmann::json y = {{"size_bytes", c.size_bytes(t)}, {"recipes", t == c.type_bf16 && t == c.type_fp8 ? "all"
                                                                      : t == c.type_bf16           ? "BF16"
                                                                                                   : "FP8"}};
      if (const CommMeasurement* m = r.find(i, t)) {
        y["ms"] = m->timing.ms;
        y["ms_min"] = m->timing.ms_min;
        y["ms_max"] = m->timing.ms_max;
        y["iterations"] = m->timing.iterations;
        y["bus_gbs"] = c.bus_bandwidth_gbs(t, m->timing.ms);
        // "overlap": beside the BF16 GEMM; "overlap_fp8": beside the FP8 GEMM (OverlapGemm).
        for (const OverlapGemm k : {OverlapGemm::Bf16, OverlapGemm::Fp8})
          if (const auto& o = m->beside(k))
            y[k == OverlapGemm::Fp8 ? "overlap_fp8" : "overlap"] = {
                {"gemm", to_string(k)},           {"gemm_alone_ms", o->gemm_alone_ms},
                {"gemm_overlap_ms", o->gemm_overlap_ms}, {"comm_overlap_ms", o->comm_overlap_ms},
                {"both_ms", o->both_ms},          {"exposed_ms", o->exposed_ms()}};
      }
      types[to_string(t)] = y;
    }
    x["types"] = types;
    list.push_back(std::move(x));
  }
  j["collectives"] = std::move(list);
  j["notes"] = r.notes;
  return j;
}

LayerComm layer_comm(const CommResult& r, bool moe_layer) {
  LayerComm s;
  s.measured = !r.measured.empty();
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const Collective& c = r.collectives[i];
    if (c.scope != Scope::Layer && c.scope != (moe_layer ? Scope::MoeLayer : Scope::DenseLayer)) continue;
    const CommMeasurement* a = r.find(i, c.type_bf16);
    if (!a) continue;
    const CommMeasurement* b = r.find(i, c.type_fp8);
    if (!b) b = a;
    s.bf16_ms += a->timing.ms;
    s.fp8_ms += b->timing.ms;
    s.exposed_bf16_ms += a->overlap ? a->overlap->exposed_ms() : a->timing.ms;
    s.exposed_fp8_ms += b->overlap_fp8 ? b->overlap_fp8->exposed_ms() : b->timing.ms;
    s.overlap_bf16 |= a->overlap.has_value();
    s.overlap_fp8 |= b->overlap_fp8.has_value();
  }
  return s;
}

std::string render_comm_text(const CommResult& r, const Plan& plan) {
  const CommLayout& l = r.layout;
  std::ostringstream o;
  o << fmt::format("\nCommunication of the layout: TP {}{}, EP {}, DP {}, ZeRO stage {}, gradients in {}{}: {} GPU{}\n",
                   l.tensor_parallel, l.tensor_parallel > 1 ? (l.sequence_parallel ? " (sequence parallel)" : " (no SP)") : "",
                   l.expert_parallel, l.data_parallel, l.zero_stage, to_string(l.grad_type),
                   l.fp8_param_gather ? ", FP8 weight gathers (--fp8-param-gather)" : "", l.gpus(), l.gpus() == 1 ? "" : "s");
  if (r.collectives.empty()) {
    o << "  no collectives: the layout runs on one GPU\n";
    return o.str();
  }
  o << (r.measured.empty() ? "  sizes modelled from the plan; nothing measured\n"
                           : fmt::format("  measured with {} (CUDA events around 10 back-to-back collectives, as nccl-tests times them; slowest rank, median)\n", r.engine));
  const bool m = !r.measured.empty();
  o << fmt::format("  {:<4} {:<4} {:<15} {:<46} {:>5} {:>10} {:>10}", "pass", "grp", "collective", "what", "x/step",
                   "BF16 MiB", "FP8 MiB");
  bool any_overlap = false;
  for (const CommMeasurement& x : r.measured) any_overlap |= x.overlap.has_value() || x.overlap_fp8.has_value();
  if (m) o << fmt::format(" {:>9} {:>8} {:>9} {:>8}", "BF16 ms", "GB/s", "FP8 ms", "GB/s");
  if (any_overlap) o << fmt::format(" {:>8} {:>8} {:>8} {:>8}", "BF16 +%", "exposed", "FP8 +%", "exposed");
  o << "\n";
  double bytes16 = 0, bytes8 = 0, ms16 = 0, ms8 = 0, exposed16 = 0, exposed8 = 0;

  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const Collective& c = r.collectives[i];
    const int64_t n = times_per_step(c, plan);
    const double b16 = static_cast<double>(c.size_bytes(c.type_bf16)), b8 = static_cast<double>(c.size_bytes(c.type_fp8));
    bytes16 += b16 * static_cast<double>(n);
    bytes8 += b8 * static_cast<double>(n);
    std::string what = c.what;
    if (c.type_bf16 != CommType::Bf16 || c.type_fp8 != c.type_bf16)
      what += fmt::format(" [{}{}]", to_string(c.type_bf16), c.type_fp8 != c.type_bf16 ? std::string("/") + to_string(c.type_fp8) : "");
    o << fmt::format("  {:<4} {:<4} {:<15} {:<46} {:>5} {:>10.2f} {:>10.2f}", c.backward ? "bwd" : "fwd",
                     to_string(c.group), to_string(c.kind), clip_text(what, 46), n, b16 / 1048576.0, b8 / 1048576.0);
    if (m) {
      const CommMeasurement* a = r.find(i, c.type_bf16);
      const CommMeasurement* b = r.find(i, c.type_fp8);

      if (a) {
        ms16 += a->timing.ms * static_cast<double>(n);
        o << fmt::format(" {:>9.3f} {:>8.1f}", a->timing.ms, c.bus_bandwidth_gbs(c.type_bf16, a->timing.ms));
      }
      if (b && b != a) {
        ms8 += b->timing.ms * static_cast<double>(n);
        o << fmt::format(" {:>9.3f} {:>8.1f}", b->timing.ms, c.bus_bandwidth_gbs(c.type_fp8, b->timing.ms));
      } else if (a) {
        ms8 += a->timing.ms * static_cast<double>(n);
        o << fmt::format(" {:>9} {:>8}", "=", "");
      }
      if (any_overlap && a) {
        // Per family: the GEMM's slowdown beside the collective, and the collective's exposed ms.
        const auto cols = [&](const CommMeasurement& x, const std::optional<OverlapTiming>& ov, double& sum) {
          const double exposed = ov ? ov->exposed_ms() : x.timing.ms;
          sum += exposed * static_cast<double>(n);
          return ov ? fmt::format(" {:>7.1f}% {:>8.3f}", ov->gemm_slowdown() * 100, exposed)
                    : fmt::format(" {:>8} {:>8.3f}", "-", exposed);
        };
        o << cols(*a, a->overlap, exposed16) << cols(b ? *b : *a, (b ? b : a)->overlap_fp8, exposed8);
      }
    }
    o << "\n";
  }
  o << fmt::format("  per step: {:.1f} MiB in BF16 recipes, {:.1f} MiB in FP8 recipes", bytes16 / 1048576.0,
                   bytes8 / 1048576.0);
  if (m) o << fmt::format("; {:.2f} ms and {:.2f} ms of communication if none overlapped (measured)", ms16, ms8);
  o << "\n";
  const auto layer_line = [&](const char* kind, const LayerComm& s) {
    o << fmt::format("  per {}layer (measured): communication {:.3f} ms in BF16 recipes, {:.3f} ms in FP8 recipes{}\n",
                     kind, s.bf16_ms, s.fp8_ms,
                     any_overlap ? fmt::format("; exposed {:.3f} ms in BF16, {:.3f} ms in FP8 (beside the per-layer "
                                               "GEMM time above)",
                                               s.exposed_bf16_ms, s.exposed_fp8_ms)
                                 : std::string());
  };
  if (m && plan.dense_layers() > 0) layer_line(plan.has_moe() ? "dense " : "", layer_comm(r, false));
  if (m && plan.has_moe()) layer_line("MoE ", layer_comm(r, true));
  if (any_overlap)
    o << fmt::format("  exposed per step: {:.2f} ms in the BF16 recipe, {:.2f} ms in FP8 recipes. Overlap model: each "
                     "collective hides only behind the GEMM it runs beside (+%: that GEMM's slowdown), in the recipe "
                     "family's GEMM (BF16; FP8: per-tensor E4M3 of the same shape) and wire type; exposed = the pair's "
                     "time beyond the GEMM alone; a collective with no such GEMM (or no figure, -) is exposed whole\n",
                     exposed16, exposed8);
  for (const std::string& n : r.notes) o << "  note: " << n << "\n";
  return o.str();
}

}  // namespace gs

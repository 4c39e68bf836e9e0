#include "core/parallel/step_costs.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/analysis/predict.hpp"
#include "core/model/attention_shape.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/memory.hpp"
#include "core/results/step_context_records.hpp"
#include "core/recipes/modes.hpp"
#include "core/step/step_breakdown.hpp"
#include "core/step/step_kernels.hpp"
#include "core/step/step_params.hpp"
#include "core/util/error.hpp"

namespace gs {

const char* to_string(CostSource s) { return s == CostSource::Measured ? "measured" : "predicted"; }

double LayerCost::gemm_fwd_ms() const {
  double t = 0;
  for (const auto& [op, c] : gemms) t += c.fprop_ms;
  return t;
}
double LayerCost::gemm_bwd_ms() const {
  double t = 0;
  for (const auto& [op, c] : gemms) t += c.dgrad_ms + c.wgrad_ms;
  return t;
}

namespace {

// The memory-bound kernels' share that runs in the forward pass (norms, residual adds and the
// activation forward move about 2 of the 5 parts the step model counts; docs/parallel.md).
constexpr double kOtherForwardShare = 0.4;

void add_gemm(StepCosts& s, const Gemm& g, double ms, bool experts_only) {
  if (experts_only && g.op != Op::ExpertUp && g.op != Op::ExpertDown) return;
  auto put = [&](LayerCost& lc) {
    OpCost& c = lc.gemms[g.op];
    (g.pass == Pass::Fprop ? c.fprop_ms : g.pass == Pass::Dgrad ? c.dgrad_ms : c.wgrad_ms) = ms;
  };
  switch (g.scope) {
    case Scope::Layer: put(s.dense); put(s.moe); break;
    case Scope::DenseLayer: put(s.dense); break;
    case Scope::MoeLayer: put(s.moe); break;
    case Scope::Model:
      if (g.pass == Pass::Fprop) s.head_fwd_ms += ms;
      else s.head_bwd_ms += ms;
      break;
    case Scope::Shape: break;
  }
}

size_t precision_index(const std::vector<Precision>& ps, Precision p, const std::string& what) {
  const auto it = std::find(ps.begin(), ps.end(), p);
  if (it == ps.end()) throw UsageError(fmt::format("{} has no {} column", what, to_string(p)));
  return static_cast<size_t>(it - ps.begin());
}

// What the predicted GEMMs rest on: their time at the dense peak of their kernel's format (wave
// quantization out) and their predicted kernel time, and how many took a published prior.
struct GemmBasis {
  double at_peak_ms = 0, kernel_ms = 0;
  int with_prior = 0, without_prior = 0;
  std::vector<std::string> notes;  // the prediction's notes on GEMMs without a prior
  void add(const GemmBasis& o) {
    at_peak_ms += o.at_peak_ms;
    kernel_ms += o.kernel_ms;
    with_prior += o.with_prior;
    without_prior += o.without_prior;
    for (const std::string& n : o.notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  }
};

// Predicted GEMM times of `plan` in precision p (training mode) into `s`: gemmscope predict's
// datasheet path, each GEMM at the published prior of its format, generation and size class
// (data.priors; the fallback fraction where none is published or no priors are given).
GemmBasis predicted_gemms(StepCosts& s, const Plan& plan, const GpuSpec& gpu, Precision p, const RecipeOptions& o,
                          const PredictData& data, bool experts_only) {
  const Prediction pr = predict_datasheet_only(plan, {Mode::Training}, o, gpu, data, {p});
  const size_t pi = precision_index(pr.result.precisions, p, "the prediction");
  GemmBasis b;
  for (size_t g = 0; g < plan.gemms.size(); ++g) {
    const Gemm& gemm = plan.gemms[g];
    const PredictedCell& cell = pr.cells[0][g][pi];
    if (!cell.ok)
      throw UsageError(fmt::format("{} cannot run {} on {}: {}", to_string(p), gemm.label(), gpu.key, cell.reason));
    add_gemm(s, gemm, cell.ms, experts_only);
    if (experts_only && gemm.op != Op::ExpertUp && gemm.op != Op::ExpertDown) continue;
    const Precision kernel = make_recipe(p, gemm, o).precision;
    b.at_peak_ms += gemm.flops() / required_peak_flops(gpu, kernel, gemm.label()) * 1e3;
    b.kernel_ms += cell.kernel_ms;
    (cell.from_prior ? b.with_prior : b.without_prior) += 1;
  }
  for (const std::string& n : pr.assumptions)
    if (n.rfind("no prior for", 0) == 0) b.notes.push_back(n);
  return b;
}

double bandwidth_bytes_per_ms(const GpuSpec& gpu) {
  return gpu.bandwidth_gbs->value * 1e6 * PredictConstants::kMemEff;  // a streaming kernel's rate
}

// Core attention of one layer on this rank: its heads over the whole sequence (the causal pairs
// this rank computes under context parallelism: 1/cp of them, load-balanced).
AttentionShape rank_attention(const ModelConfig& c, const ParallelLayout& l) {
  ModelConfig a = rank_config(c, l);
  a.sequence_length = c.sequence_length;
  return attention_shape(a);
}

void predicted_attention(StepCosts& s, const ModelConfig& c, const ParallelLayout& l, const GpuSpec& gpu,
                         StepContextKind framework) {
  const auto& peak = gpu.peak(PeakFormat::BF16);
  if (!peak) throw UsageError(fmt::format("the GPU spec database has no BF16 peak for {}: attention cannot be modelled", gpu.key));
  const double frac = gpu.arch_policy().flash_attention_peak_fraction(framework == StepContextKind::TransformerEngine);
  const double rate = peak->value * 1e9 * frac;  // FLOP per ms
  const AttentionShape a = rank_attention(c, l);
  const double cp = static_cast<double>(l.cp);
  for (LayerCost* lc : {&s.dense, &s.moe}) {
    lc->attn_fwd_ms = attention_fwd_flops(a) / cp / rate;
    lc->attn_bwd_ms = attention_bwd_flops(a) / cp / rate;
  }
}

// The memory-bound kernels of an average layer as the step context models them for `framework`:
// under sequence parallelism the norms and residuals run on the rank's sequence shard, which the
// step model sees as a plan of one TP rank over tokens / tp (the activations' T x f / tp is the same).
void modelled_memory_bound(StepCosts& s, const ModelConfig& c, const ParallelLayout& l, double bytes_per_ms,
                           StepContextKind framework) {
  if (framework == StepContextKind::None) return;
  ModelConfig rc = rank_config(c, l);
  if (l.tp > 1 && l.sequence_parallel) {
    rc.tensor_parallel = 1;
    rc.sequence_length = rc.tokens() / l.tp;
    rc.micro_batch_size = 1;
    if (rc.moe.enabled()) rc.moe.expert_parallel = 1;
  }
  const Plan plan = build_model_plan(rc);
  const StepWorkModel m = step_work_model(plan, framework);
  const double other = m.other_bytes / (bytes_per_ms * m.efficiency);
  const double moe_layers = static_cast<double>(plan.moe_layers());
  const double move = moe_layers > 0 ? m.move_bytes * static_cast<double>(plan.layers()) / moe_layers / (bytes_per_ms * kMoveRate) : 0;
  s.dense.other_fwd_ms = other * kOtherForwardShare;
  s.dense.other_bwd_ms = other * (1 - kOtherForwardShare);
  s.moe.other_fwd_ms = (other + move) * kOtherForwardShare;
  s.moe.other_bwd_ms = (other + move) * (1 - kOtherForwardShare);
}

// Embedding, loss and optimizer as the one-GPU step plans them (core/step/step_plan.hpp) for the
// rank's plan: the groups' bytes at the streaming rate, one default launch latency per kernel where
// a group is launch-bound. Per micro-batch for the embedding and the loss (the rank's plan is one
// micro-batch), and the optimizer's groups (zero-grad, gradient norm, clipping, the update) per
// parameter of the rank's plan, so that the parallel step scales them to the parameters a rank
// updates. The storage is the rank's (FSDP: FP32 shards).
double group_ms(const StepGroup& g, double bytes_per_ms) {
  const double one = g.basis == TimeBasis::Launches ? g.launches * kDefaultLaunchUs * 1e-3 : g.bytes / bytes_per_ms;
  return one * g.count;
}

void modelled_once_and_optimizer(StepCosts& s, const ModelConfig& c, const ParallelLayout& l, double bytes_per_ms,
                                 StepContextKind framework, const RecipeOptions& o, const StepOptions& step) {
  const Plan plan = build_model_plan(rank_config(c, l));
  StepOptions options = step;
  options.recompute = l.recompute;
  options.storage = rank_storage(l, step.storage);
  const StepPlan sp = build_step_plan(plan, framework, options, s.precision, Mode::Training, o);
  double optimizer_ms = 0;
  for (const StepGroup& g : sp.groups) {
    const double ms = group_ms(g, bytes_per_ms);
    if (g.name == "embedding fwd") s.embed_fwd_ms += ms;
    else if (g.name == "embedding bwd" || g.name == "embedding main-grad add") s.embed_bwd_ms += ms;
    else if (g.name == "loss fwd") s.loss_fwd_ms += ms;
    else if (g.name == "loss bwd") s.loss_bwd_ms += ms;
    else if (g.category == StepCategory::Optimizer) optimizer_ms += ms;
  }
  const double params = sp.params.total();
  s.optimizer_ms_per_param = params > 0 ? optimizer_ms / params : 0;
  s.stream_bytes_per_ms = bytes_per_ms;
}

// Where the run timed its whole step (core/step: --step-context with a model plan), its embedding,
// loss and optimizer groups replace the bytes-only estimates: per instance for the once-per-step
// parts, and the optimizer's groups (zero-grad, gradient norm, clipping, the update) over the
// parameters the run's GPU held. Returns how many of the groups used were measured.
int from_whole_step(StepCosts& s, const RunResult& run, size_t precision) {
  if (!run.step || !run.step->timed) return 0;
  const StepBreakdown* b = run.step->at(0, precision);
  if (!b) return 0;
  int measured = 0;
  double optimizer_ms = 0;
  bool optimizer_known = true, any_optimizer = false;
  std::map<double*, double> once;  // the slots the run's step times, summed over their groups
  for (const StepGroupResult& g : b->groups) {
    const std::optional<double> total = g.total_ms();
    const bool m = g.time.source == TimeSource::Measured;
    double* slot = g.group.name == "embedding fwd"                                                ? &s.embed_fwd_ms
                   : g.group.name == "embedding bwd" || g.group.name == "embedding main-grad add" ? &s.embed_bwd_ms
                   : g.group.name == "loss fwd"                                                   ? &s.loss_fwd_ms
                   : g.group.name == "loss bwd"                                                   ? &s.loss_bwd_ms
                                                                                                  : nullptr;
    if (slot && total) {
      once[slot] += *total;
      measured += m;
    }
    if (g.group.category == StepCategory::Optimizer) {
      any_optimizer = true;
      if (!total) optimizer_known = false;
      else {
        optimizer_ms += *total;
        measured += m;
      }
    }
  }
  for (const auto& [slot, ms] : once) *slot = ms;
  if (any_optimizer && optimizer_known && run.plan.config) {
    const double params = count_params(run.plan).total();
    if (params > 0) s.optimizer_ms_per_param = optimizer_ms / params;
  }
  return measured;
}

void check_gpu(const GpuSpec& gpu) {
  if (!gpu.bandwidth_gbs) throw UsageError(fmt::format("the GPU spec database has no memory bandwidth for {}", gpu.key));
}

}  // namespace

StepCosts predicted_step_costs(const ModelConfig& c, const ParallelLayout& l, const GpuSpec& gpu, Precision p,
                               StepContextKind framework, const RecipeOptions& o, const StepOptions& step,
                               const PredictData& data) {
  check_gpu(gpu);
  StepCosts s;
  s.precision = p;
  s.source = CostSource::Predicted;
  GemmBasis gb = predicted_gemms(s, build_model_plan(rank_config(c, l)), gpu, p, o, data, false);
  if (c.moe.enabled() && l.expert_tp() != l.tp) {
    // The routed experts split by ETP over the dispatched tokens: replace their GEMMs.
    s.moe.gemms.erase(Op::ExpertUp);
    s.moe.gemms.erase(Op::ExpertDown);
    gb.add(predicted_gemms(s, build_model_plan(expert_rank_config(c, l)), gpu, p, o, data, true));
  }
  predicted_attention(s, c, l, gpu, framework);
  const double bw = bandwidth_bytes_per_ms(gpu);
  modelled_memory_bound(s, c, l, bw, framework);
  modelled_once_and_optimizer(s, c, l, bw, framework, o, step);
  const std::string priors =
      gb.without_prior == 0
          ? std::string("each at the published prior of its format and size class on ") + gpu.arch + " GPUs (data/priors.json)"
          : fmt::format("{} of {} at the published prior of their format and size class on {} GPUs (data/priors.json), "
                        "the others at the {:.0f}% assumed where none is published{}",
                        gb.with_prior, gb.with_prior + gb.without_prior, gpu.arch, 100 * PredictConstants::kComputePrior,
                        data.priors ? "" : " (no priors given)");
  s.basis = fmt::format(
      "predicted from the {} datasheet: GEMMs as gemmscope predict predicts a run that never happened (datasheet only, "
      "training mode with quantization), {}: {:.0f}% of the dense peak of their format over the rank's GEMMs, wave "
      "quantization included; attention at {:.0f}% of the BF16 peak ({}), memory-bound kernels from their bytes at "
      "{:.0f}% of {:.0f} GB/s; embedding, loss and optimizer as the one-GPU step plans them",
      gpu.key, priors, gb.kernel_ms > 0 ? 100 * gb.at_peak_ms / gb.kernel_ms : 0.0,
      100 * gpu.arch_policy().flash_attention_peak_fraction(framework == StepContextKind::TransformerEngine),
      framework == StepContextKind::TransformerEngine ? "cuDNN fused attention" : "FlashAttention-2",
      100 * PredictConstants::kMemEff, gpu.bandwidth_gbs->value);
  for (const std::string& n : gb.notes) s.basis += "; " + n;
  return s;
}

StepCosts measured_step_costs(const RunResult& run, const ModelConfig& c, const ParallelLayout& l, const GpuSpec* gpu,
                              Precision p, StepContextKind framework, const RecipeOptions& o, const StepOptions& step) {
  const ModelConfig rc = rank_config(c, l);
  if (run.dry_run || run.modes.empty()) throw UsageError("the run measured nothing to build the parallel step from");
  if (!run.plan.config || run.plan.config->tensor_parallel != rc.tensor_parallel || run.plan.config->tokens() != rc.tokens())
    throw UsageError(fmt::format("the measured run's plan is not this layout's rank plan (TP {}, {} tokens per micro-batch)",
                                 rc.tensor_parallel, rc.tokens()));
  if (c.moe.enabled() && l.expert_tp() != l.tp)
    throw UsageError("a measured run plans the experts with ETP = TP: measure with --expert-tensor-parallel equal to TP, "
                     "or predict (no GPU)");
  StepCosts s;
  s.precision = p;
  s.source = CostSource::Measured;
  const size_t pi = precision_index(run.precisions, p, "the measured run");
  for (size_t g = 0; g < run.plan.gemms.size(); ++g) {
    const Cell& cell = run.cell(0, g, pi);
    if (!cell.ok)
      throw UsageError(fmt::format("the measured run's {} cell of {} is N/A ({})", to_string(p), run.plan.gemms[g].label(),
                                   cell.reason));
    add_gemm(s, run.plan.gemms[g], cell.stats.mean_ms, false);
  }
  std::string rest;
  const std::optional<StepContextInfo> context = step_context_view(run);
  if (context && context->attention_ms() > 0) {
    const StepContextInfo& sc = *context;
    // The run timed attention over its own sequence (seq / cp): the rank's share is cp times that
    // pair count (causal pairs: (s / cp)^2 / 2 measured, s^2 / (2 cp) computed).
    const double cp = static_cast<double>(l.cp);
    for (LayerCost* lc : {&s.dense, &s.moe}) {
      lc->attn_fwd_ms = sc.attention_fwd_ms * cp;
      lc->attn_bwd_ms = sc.attention_bwd_ms * cp;
      lc->other_fwd_ms = sc.memory_ms() * kOtherForwardShare;
      lc->other_bwd_ms = sc.memory_ms() * (1 - kOtherForwardShare);
    }
    rest = fmt::format("attention {} ({}), memory-bound kernels {}", sc.attention_measured ? "measured" : "modelled",
                       sc.attention_source, sc.other_from_user ? "from --step-other-ms" : "modelled at the measured stand-in rate");
  } else {
    if (!gpu) throw UsageError("the measured run has no step context and its GPU is not in the GPU spec database: attention "
                               "and the memory-bound kernels cannot be modelled");
    check_gpu(*gpu);
    predicted_attention(s, c, l, *gpu, framework);
    modelled_memory_bound(s, c, l, bandwidth_bytes_per_ms(*gpu), framework);
    rest = fmt::format("attention and memory-bound kernels predicted from the {} datasheet", gpu->key);
  }
  double bw = 0;
  if (context && context->stream_gb_per_s > 0) bw = context->stream_gb_per_s * 1e6;
  else if (gpu && gpu->bandwidth_gbs) bw = bandwidth_bytes_per_ms(*gpu);
  if (!(bw > 0)) throw UsageError("no bandwidth to model the optimizer and the loss: the run has no step context and no GPU entry");
  modelled_once_and_optimizer(s, c, l, bw, framework, o, step);
  const int from_step = from_whole_step(s, run, pi);
  s.basis = fmt::format("GEMMs measured on {} ({}); {}; {}", run.device ? run.device->name : std::string("this GPU"),
                        to_string(run.modes[0]), rest,
                        from_step > 0 ? fmt::format("embedding, loss and optimizer from the run's whole step "
                                                    "(core/step: {} of its groups measured, the others modelled)",
                                                    from_step)
                                      : "embedding, loss and optimizer as the one-GPU step plans them, from their bytes");
  return s;
}

}  // namespace gs

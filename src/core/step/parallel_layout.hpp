// A training job's parallel layout as Megatron-LM / NeMo and PyTorch FSDP2 define it: tensor
// parallel (with sequence parallel), context parallel, pipeline parallel (1F1B, interleaved virtual
// stages), data parallel (DDP, ZeRO-1/2/3 as Megatron's distributed optimizer, FSDP FULL_SHARD /
// SHARD_GRAD_OP), expert parallel and expert-tensor parallel, with the micro-batch and the global
// batch. Pure data: what the layout is and its compact string (docs/parallel.md); the rules that
// refuse a layout for a model are core/parallel/layout_check.hpp, the step it runs core/parallel/.
//
// The compact string: dot-separated tokens, each optional, in any order:
//   tpN ppN vppN cpN epN etpN dpN   the parallel sizes (vpp: virtual stages per pipeline rank)
//   mbN gbN                         micro-batch and global batch (sequences)
//   ddp zero1 zero2 zero3 fsdp fsdp-grad-op   how data parallelism shards the model state
//   uneven                          layers not divisible by the model chunks: split as evenly as
//                                   possible (Megatron's --pipeline-model-parallel-layout)
// e.g. "tp8.pp4.vpp5.dp16.mb1.gb512" or "tp2.pp4.vpp2.cp1.ep8.etp1.dp16".
#pragma once
#include <cstdint>
#include <string>

#include "core/step/step_options.hpp"
#include "core/util/text_util.hpp"

namespace gs {

// How data parallelism holds the model state.
enum class DpSharding {
  Ddp,         // ZeRO-0: every rank holds everything; gradients all-reduced
  Zero1,       // Megatron's distributed optimizer: optimizer state sharded; gradients reduce-scattered
  Zero2,       // and gradients sharded
  Zero3,       // and parameters: gathered before each layer's forward and backward (Megatron FSDP)
  FsdpFull,    // PyTorch FSDP FULL_SHARD (FP32 sharded parameters, BF16 gathered for compute)
  FsdpGradOp,  // PyTorch FSDP SHARD_GRAD_OP: parameters kept gathered from forward to backward
};
const EnumNames<DpSharding>& dp_sharding_names();  // ddp (zero0), zero1, zero2, zero3, fsdp (full-shard), fsdp-grad-op
const char* to_string(DpSharding s);
bool shards_parameters(DpSharding s);  // Zero3, FsdpFull, FsdpGradOp
bool is_fsdp(DpSharding s);            // FsdpFull, FsdpGradOp (PyTorch's storage: FP32 parameters)

// Context parallelism's exchange: Megatron / Transformer Engine's ring of key-value chunks (P2P,
// overlapped with attention), or DeepSpeed-Ulysses' all-to-alls of heads.
enum class CpComm { Ring, AllToAll };
const EnumNames<CpComm>& cp_comm_names();  // ring (p2p), a2a (all-to-all, ulysses)
const char* to_string(CpComm c);


struct ParallelLayout {
  int64_t tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1;
  int64_t etp = 0;  // expert-tensor parallel; 0: as tp (Megatron's default)
  int64_t dp = 1;
  int64_t micro_batch = 1;
  int64_t global_batch = 0;  // sequences per step; 0: one micro-batch per data-parallel rank
  bool sequence_parallel = true;  // with tp > 1 (Megatron: on in every NeMo recipe)
  DpSharding sharding = DpSharding::Zero1;
  CpComm cp_comm = CpComm::Ring;
  Recompute recompute = Recompute::None;  // the whole step's --recompute (core/step/step_options.hpp)
  // Transformer Engine's userbuffers: TP all-gathers / reduce-scatters overlapped with their GEMMs.
  bool tp_comm_overlap = false;
  // Megatron's --overlap-grad-reduce / --overlap-param-gather (on in NeMo's recipes); FSDP prefetch.
  bool overlap_grad_reduce = true, overlap_param_gather = true;
  // EP all-to-alls hidden behind another micro-batch's compute (DualPipe, Megatron's
  // --overlap-moe-expert-parallel-comm); off: exposed on the compute stream.
  bool ep_comm_overlap = false;
  // Layers that do not divide over the pipeline's model chunks are spread as evenly as possible
  // (the first chunk, which holds the embedding, gets the fewest); off: Megatron's divisibility rule.
  bool uneven_pipeline = false;

  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  int64_t world() const { return tp * pp * cp * dp; }
  // Ranks of one pipeline stage that hold the same dense weights: tp x cp x dp; the experts' are
  // folded over them (Megatron's MoE parallel folding): expert_tp x ep x expert_dp.
  int64_t expert_dp() const;  // tp x cp x dp / (expert_tp x ep); 0 when it does not divide
  int64_t batch() const { return global_batch > 0 ? global_batch : micro_batch * dp; }
  int64_t micro_batches() const;  // batch / (micro_batch x dp); 0 when it does not divide
};

// The canonical string: every size, then mb and gb, then the sharding: "tp8.pp4.vpp1.cp1.ep1.etp8.dp16.mb1.gb512.zero1".
std::string to_string(const ParallelLayout& l);
// The short form users type: only what differs from 1 (tp, pp, vpp, cp, ep, etp where it differs
// from tp), then dp, mb, gb: "tp8.pp4.dp16.mb1.gb512".
std::string short_string(const ParallelLayout& l);

// What the compact string set (a token absent leaves its field as it was).
struct LayoutTokens {
  bool tp = false, pp = false, vpp = false, cp = false, ep = false, etp = false, dp = false, mb = false, gb = false,
       sharding = false, uneven = false;
};
// Parses the compact string onto `l` (UsageError naming the token: unknown, repeated, not a
// positive integer, over 2^20). `what` names the input in messages ("--layout").
LayoutTokens parse_layout(const std::string& text, ParallelLayout& l, const std::string& what = "--layout");

// The settings a run request holds for the parallel step, as the command line gave them (the
// run-settings registry, core/run/settings.cpp, fills it; core/parallel/ turns it into a layout):
// integers 0 and texts "" are "not given".
struct ParallelRequest {
  std::string layout;   // --layout, canonical short string
  int64_t pp = 0, vpp = 0, cp = 0, etp = 0, global_batch = 0;
  int64_t gpus = 0;     // --gpus: the job's GPU count (data parallelism derived from it)
  double compute_efficiency = 0;  // --step-efficiency (0: the calibrated default, core/parallel/parallel_step.hpp)
  std::string sharding, cp_comm;  // --dp-sharding, --cp-comm (--recompute is the whole step's: StepOptions)
  std::string tp_comm_overlap, grad_overlap, ep_comm_overlap;  // on | off
  std::string cluster;  // --cluster: a preset name or a JSON file
  std::string gpu;      // --gpu: the GPU type of the job (the GPU spec database's key)
  std::string trace;    // --parallel-trace: the per-rank timeline as a Chrome trace
  std::string json;     // --parallel-json: the parallel step as JSON
  // The parallel step is asked for: a layout, a cluster or a GPU count given.
  bool requested() const { return !layout.empty() || !cluster.empty() || gpus > 0 || pp > 0 || cp > 0; }
};

}  // namespace gs

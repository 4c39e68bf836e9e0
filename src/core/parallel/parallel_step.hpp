// The training step of a parallel layout, per rank (pipeline stage): the rank's compute
// (step_costs.hpp) with the layout's communication on the streams the framework uses and overlapped
// as it schedules it, through the pipeline schedule (pipeline.hpp) and the two-stream simulation
// (stream_sim.hpp), with the collectives costed on the cluster (collective_model.hpp):
//
//   TP (+SP)   all-gathers / reduce-scatters (all-reduces without SP) around each block, on the
//              compute path; with Transformer Engine's userbuffers overlap hidden behind their
//              GEMM but for one chunk of TP, the GEMM slowed by the SMs the overlap takes.
//   CP         ring: key-value chunks passed around the ring, each hidden behind the attention
//              of the previous chunk; all-to-all: four all-to-alls per pass, exposed.
//   EP         dispatch / combine all-to-alls per MoE layer: exposed, or hidden behind another
//              micro-batch's compute (DualPipe-style) at the contention's cost.
//   PP         1F1B or interleaved, point-to-point sends of the sequence-sharded activation
//              (blocking in 1F1B, overlapped in the interleaved schedule, as Megatron runs them).
//   DP         gradients reduce-scattered (all-reduced under DDP) in buckets of about 40 M
//              parameters during the last micro-batch's backward, parameters all-gathered after
//              the optimizer (hidden behind the next step's forward but for its first bucket);
//              ZeRO-3 / FSDP: every layer's parameters gathered before its forward and backward,
//              prefetched one layer ahead, its gradients reduce-scattered after its backward.
//              With --fp8-param-gather (FP8 recipes) the parameter gathers send the FP8 linears in FP8.
//
// Contention: while a collective and compute overlap on one GPU, compute runs 1 + s_c slower and
// the collective 1 + s_m slower (ContentionModel). The step's outputs: step time, tokens/s per
// GPU, model TFLOP/s and MFU, the bubble, memory per rank, where each stage's time goes (compute,
// exposed communication by kind, bubble, optimizer) and the critical stage, and a per-rank timeline.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/model/model_config.hpp"
#include "core/step/parallel_layout.hpp"
#include "core/node/collectives.hpp"
#include "core/parallel/collective_model.hpp"
#include "core/parallel/memory.hpp"
#include "core/parallel/step_costs.hpp"
#include "core/step/step_trace.hpp"

namespace gs {

// Where a rank's step time goes.
enum class TimeKind {
  Gemm, Attention, Other, Recompute,             // compute
  TpComm, CpComm, EpComm, FsdpComm, PpSend,      // communication on the compute path (exposed)
  Bubble,                                        // waiting for another stage
  DpComm, Optimizer, ParamGather,                // after the last backward
};
inline constexpr int kTimeKinds = 13;
const char* to_string(TimeKind k);  // "GEMMs", "attention", ...

// The slowdown of each side while a collective overlaps compute on one GPU.
struct ContentionModel {
  double compute_slowdown = 0.06;  // GEMMs beside NCCL (measured 1-14% on 2 x H200, docs/node.md; mean 6%)
  double comm_slowdown = 0.10;     // the collective beside compute (assumed; not measured)
  double userbuffers_gemm_slowdown = 0.05;  // a GEMM overlapped by TE's userbuffers (assumed)
  std::string source = "defaults (docs/parallel.md)";
};

// The fraction of the rank's costed compute rate a multi-GPU training step sustains: kernel gaps,
// synchronization between ranks, launch latency and the clocks of a fully loaded node, none of
// which a GEMM's datasheet prior or a single-GPU loop contains. Calibrated on the `tune` rows of
// bench/validate_parallel.py only (docs/results/parallel_validation.md); never on a check row.
// It scales predicted compute only: compute measured in the framework's step context on this GPU
// already holds the step's kernel gaps and launches (the whole one-GPU step is validated against
// real steps, docs/results/h200_whole_step.md), so it runs at 1.0 unless --step-efficiency says.
constexpr double kStepComputeEfficiency = 0.80;

struct ParallelJob;
struct StepCosts;
// The rate the step's compute runs at: the job's --step-efficiency when set, else the default for
// the costs' source (above).
double sustained_rate(const ParallelJob& job, const StepCosts& costs);

// The contention measured on this node: the mean slowdown of the GEMMs timed beside the
// collectives (CommEngine::overlap, both recipe families); the defaults where nothing was timed
// beside a GEMM. The collective's own slowdown stays the default (the measurement launches the
// collective beside a GEMM that holds every SM, not as a framework schedules it).
ContentionModel contention_from(const CommResult& measured);

struct ParallelJob {
  ModelConfig model;  // the full model; its micro-batch and sequence are the job's
  ParallelLayout layout;
  StepContextKind framework = StepContextKind::TransformerEngine;
  // The whole step's settings beyond the layout (core/step/step_options.hpp: parameter storage,
  // optimizer, loss; the layout's recompute wins): memory per rank reads the storage from it.
  StepOptions step;
  CommType grad_type = CommType::Fp32;  // gradients in data-parallel reductions
  double bucket_params = 40e6;          // Megatron's default gradient bucket
  // Megatron-LM's --fp8-param-gather (the same setting as --comm's, core/run/settings.cpp): under the
  // FP8 recipes the FP8 linears' parameters are kept in FP8 (memory.hpp fp8_params_kept), so the
  // parameter all-gathers (ZeRO-1/2 after the optimizer, ZeRO-3/FSDP per unit) send 1 byte per FP8
  // linear parameter, 2 per BF16 one (norms, embedding, LM head, router).
  bool fp8_param_gather = false;
  double compute_efficiency = 0;  // 0: the default for the costs' source (sustained_rate)
  ContentionModel contention;
};

// One collective of the step, as costed.
struct StepCollective {
  std::string what;
  std::string group;  // "TP", "CP", "EP", "DP", "EDP", "PP"
  CollKind kind = CollKind::AllGather;
  bool p2p = false;   // a point-to-point send (PP, CP ring)
  double bytes = 0;   // nccl-tests size of one
  int64_t ranks = 0;
  GroupPlacement placement;
  CollAlgo algo = CollAlgo::Ring;
  double ms = 0;          // one
  double per_step = 0;    // how many per step on one rank
  double exposed_ms = 0;  // per step, on this rank's critical path
};

struct StageResult {
  int64_t stage = 0;
  std::array<double, kTimeKinds> ms{};  // where the stage's step time goes (sums to step_ms)
  double pipeline_end_ms = 0;           // its last backward ends
  RankMemory memory;
};

struct ParallelStepResult {
  ParallelLayout layout;
  Precision precision = Precision::BF16;
  CostSource source = CostSource::Predicted;
  std::string basis;
  int64_t gpus = 0;
  double step_ms = 0;
  double tokens_per_step = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;  // GEMMs and attention, forward and backward, no recomputation
  double model_tflops_per_gpu = 0;
  double mfu = 0;                   // against the dense BF16 peak
  double bubble_fraction = 0;       // the pipeline schedule's
  int64_t critical_stage = 0;       // the stage that ends last
  std::vector<StageResult> stages;
  std::vector<StepCollective> collectives;
  std::vector<TraceTrack> trace;   // per stage: a compute and a communication track (pid = stage + 1)
  double usable_memory_bytes = 0;   // the GPU's memory less kParallelReserveBytes
  double peak_memory_bytes = 0;     // the fullest rank's
  bool fits = true;
  std::vector<std::string> notes;
  const StageResult& critical() const { return stages.at(static_cast<size_t>(critical_stage)); }
};

// The model FLOPs of one step (every micro-batch of every data-parallel replica): the GEMMs of the
// unsharded model with balanced routing, and causal attention, forward and backward.
double model_flops_per_step(const ModelConfig& c, const ParallelLayout& l);

// Simulates the step. The layout must be valid (layout_check.hpp); `costs` the rank's compute in
// one precision; `gpu` for the peak (MFU) and the memory. `trace`: keep the per-rank timeline.
ParallelStepResult simulate_parallel_step(const ParallelJob& job, const StepCosts& costs, const CollectiveModel& net,
                                          const GpuSpec& gpu, bool trace = false);

}  // namespace gs

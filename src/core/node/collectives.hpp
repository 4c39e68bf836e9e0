// The communication of a parallel layout: every collective one training step runs under tensor
// (and sequence) parallelism, expert parallelism and data parallelism (ZeRO / FSDP), with its size
// and wire type derived from the GEMM plan (docs/node.md). Pure data and arithmetic: the NCCL
// measurement lives in src/cuda/comm/nccl_comm.*, behind the CommEngine interface below.
//
// Sizes follow nccl-tests: a collective's `size` is the buffer nccl-tests names by it (all-gather:
// the gathered output, reduce-scatter: the input before scattering, all-reduce: the buffer,
// all-to-all: what one rank sends, here the busiest rank's larger of sent and received bytes), and
// bus bandwidth = size / time x factor, factor 2(n-1)/n for all-reduce and (n-1)/n for all-gather,
// reduce-scatter and all-to-all.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plan/plan.hpp"

namespace gs {

enum class CollKind { AllGather, ReduceScatter, AllReduce, AllToAll };
enum class CommGroup { Tensor, Expert, Data, ExpertData };
// The element type on the wire. Fp8 carries one FP32 scale per 128 elements of a row when the
// collective says so (block-scaled dispatch, DeepSeek-V3 style); otherwise one per tensor (not counted).
enum class CommType { Fp32, Bf16, Fp8 };

const char* to_string(CollKind k);   // "all-gather", "reduce-scatter", "all-reduce", "all-to-all"
const char* to_string(CommGroup g);  // "TP", "EP", "DP", "EDP"
const char* to_string(CommType t);   // "FP32", "BF16", "FP8"
int64_t comm_type_bytes(CommType t);  // 4, 2, 1
CommType comm_type_from_string(const std::string& s);  // fp32 | bf16 (any case); UsageError otherwise

// The layout whose communication is planned. Tensor and expert parallelism come from the model
// config (--tensor-parallel, --expert-parallel); the rest from their own flags.
struct CommLayout {
  int64_t tensor_parallel = 1;
  bool sequence_parallel = true;  // TP > 1: all-gather / reduce-scatter (true) or all-reduce (false)
  int64_t expert_parallel = 1;
  int64_t data_parallel = 1;  // data-parallel replicas; expert parallelism is carved out of them
  // 0: gradients all-reduced once per step; 1 and 2 (Megatron's distributed optimizer): gradients
  // reduce-scattered and weights all-gathered once per step; 3 (FSDP): weights all-gathered
  // before each layer's forward and backward, gradients reduce-scattered per layer.
  int zero_stage = 1;
  CommType grad_type = CommType::Fp32;  // gradients reduced in FP32 (main gradients) or BF16
  // Megatron's --fp8-param-gather: the ZeRO / FSDP weight all-gathers send FP8 under the FP8
  // recipes. Off (Megatron-Core's and NeMo's default): BF16 in every recipe.
  bool fp8_param_gather = false;
  int64_t gpus() const { return tensor_parallel * data_parallel; }
};

// The GEMM a collective runs beside (Transformer Engine's comm-GEMM overlap, FSDP prefetch,
// gradient reduction behind the backward pass).
struct GemmRef {
  Pass pass;
  Op op;
};

struct Collective {
  CollKind kind;
  CommGroup group;
  int64_t ranks;      // communicator size
  Scope scope;        // Layer, DenseLayer, MoeLayer: per layer of that kind; Model: once per step
  bool backward;      // runs in the backward pass (or after it: gradient reduction)
  std::string what;   // "all-gather of the LN output before QKV"
  std::optional<GemmRef> overlaps;  // the GEMM it runs beside; none: exposed under any overlap model
  CommType type_bf16;  // on the wire under the BF16 recipe
  CommType type_fp8;   // under the FP8 recipes
  bool block_scales = false;  // FP8 sends one FP32 scale per 128 elements of a row
  int64_t width = 0;  // elements per row
  int64_t rows = 0;   // rows of the nccl-tests buffer (all-gather, reduce-scatter, all-reduce)
  // All-to-all only: ranks x ranks rows sent from rank i (row) to rank j (column), row-major.
  std::vector<int64_t> matrix;

  CommType wire_type(bool fp8) const { return fp8 ? type_fp8 : type_bf16; }
  int64_t rows_sent(int64_t rank) const;      // all-to-all
  int64_t rows_received(int64_t rank) const;  // all-to-all
  // Bytes of `r` rows in type t (with block scales for FP8 where the collective has them).
  int64_t bytes_of_rows(int64_t r, CommType t) const;
  // nccl-tests size in bytes, see the header comment.
  int64_t size_bytes(CommType t) const;
  // nccl-tests bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n otherwise.
  double bus_factor() const;
  // Bus bandwidth in GB/s (1e9 B/s) of this collective in type t taking `ms` milliseconds.
  double bus_bandwidth_gbs(CommType t, double ms) const;
};

// How many times per step a collective of this scope runs (layers of its kind, or 1).
int64_t times_per_step(const Collective& c, const Plan& plan);

// The all-to-alls hold a ranks x ranks matrix of counts: bounded so that any accepted input plans
// in well under a second and a few MiB (docs/hostile-input.md).
constexpr int64_t kMaxCommExpertParallel = 512;
// The most bytes one collective may move (2^53 = 8 PiB, exact in a double): plan_collectives
// refuses a plan whose weights or rows would move more, naming the bound (a plan at the limits of
// its flags could reach 2^64 otherwise).
constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 53;

// Refuses (UsageError, one sentence naming the flag) a layout that does not fit the plan: sizes
// below 1, a ZeRO stage outside 0-3, data parallelism not a multiple of expert parallelism, tokens
// not divisible by the tensor-parallel size under sequence parallelism, expert parallelism that
// differs from the plan's.
void validate_layout(const CommLayout& l, const Plan& plan);

// The layout the plan implies with the user's flags on top: TP and EP from the plan's config;
// data parallelism, when not given (0), the smallest that holds the expert parallelism.
CommLayout layout_for(const Plan& plan, int64_t data_parallel, bool sequence_parallel, int zero_stage,
                      CommType grad_type);

// Every collective one step runs under `l`, per layer kind: the forward pass's (TP, then EP, then
// DP weight gathers), then the backward pass's (TP blocks in reverse, EP, DP gradient reductions). A model plan only (UsageError for --shapes plans); empty when the
// layout runs on one GPU.
std::vector<Collective> plan_collectives(const Plan& plan, const CommLayout& l);

// Where the GPUs a measurement can use come from: the visible GPUs of one process, or the ranks of
// an MPI job (one GPU each).
enum class GpuPool { Node, MpiRanks };

// Refuses a measurement that needs more GPUs in one communicator than `gpus_present`:
// "the TP collectives need 4 GPUs in one communicator; this node has 2 visible GPUs ..." (under
// MPI: "this MPI job has 2 ranks, one GPU each ..."). Nothing to check when the plan has no
// collectives.
void check_gpus_present(const std::vector<Collective>& cs, const CommLayout& l, int64_t gpus_present,
                        GpuPool pool = GpuPool::Node);

// ---- measurement ----

// One collective timed in one wire type (CUDA events on every rank's stream; the slowest rank).
struct CommTiming {
  double ms = 0;        // median over iterations
  double ms_min = 0;
  double ms_max = 0;
  int64_t iterations = 0;
};

// A collective beside the GEMM it overlaps: the GEMM on each rank's compute stream, the collective
// on a side stream, both started at one event. Overlap model: the collective hides behind its GEMM
// only; exposed = max(0, both - gemm_alone), the time the pair takes beyond the GEMM alone.
struct OverlapTiming {
  double gemm_alone_ms = 0;    // the GEMM alone (median, slowest rank)
  double gemm_overlap_ms = 0;  // the GEMM while the collective runs
  double comm_overlap_ms = 0;  // the collective while the GEMM runs (from the common start)
  double both_ms = 0;          // the pair, from the common start to the later end
  double gemm_slowdown() const { return gemm_alone_ms > 0 ? gemm_overlap_ms / gemm_alone_ms - 1 : 0; }
  double exposed_ms() const { return both_ms > gemm_alone_ms ? both_ms - gemm_alone_ms : 0; }
};

// The GEMM a collective is timed beside, per recipe family: the BF16 recipe's BF16 GEMM, or the FP8
// recipes' FP8 GEMM (per-tensor E4M3 x E4M3 with unit scales, BF16 output; fast accumulation in
// Fprop, split in Dgrad/Wgrad, as Transformer Engine runs them). Both of g's shape (grouped GEMMs:
// one dense GEMM of their total rows), and the collective in that family's wire type.
enum class OverlapGemm { Bf16, Fp8 };
const char* to_string(OverlapGemm k);  // "BF16", "FP8"

class CommEngine {
 public:
  virtual ~CommEngine() = default;
  virtual std::string description() const = 0;  // "NCCL 2.28.3, 2 x NVIDIA H100 80GB HBM3"
  virtual int64_t gpus() const = 0;
  virtual GpuPool pool() const { return GpuPool::Node; }  // what gpus() counts
  virtual CommTiming time(const Collective& c, CommType t, int warmup, int iters) = 0;
  // The collective in type t beside `g` run as `kind` says (OverlapGemm); nullopt where the engine
  // cannot run that GEMM.
  virtual std::optional<OverlapTiming> overlap(const Collective& c, CommType t, const Gemm& g, OverlapGemm kind,
                                               int warmup, int iters) {
    (void)c, (void)t, (void)g, (void)kind, (void)warmup, (void)iters;
    return std::nullopt;
  }
};

struct CommMeasurement {
  size_t index;  // into the collective list
  CommType type;
  CommTiming timing;
  // A collective with an `overlaps` GEMM, in the type the family sends: beside the BF16 GEMM (the
  // BF16 recipe) and beside the FP8 GEMM (the FP8 recipes). One measurement holds both where the
  // collective sends the same type in both.
  std::optional<OverlapTiming> overlap;
  std::optional<OverlapTiming> overlap_fp8;
  const std::optional<OverlapTiming>& beside(OverlapGemm k) const { return k == OverlapGemm::Fp8 ? overlap_fp8 : overlap; }
};

struct CommResult {
  CommLayout layout;
  std::vector<Collective> collectives;
  std::vector<CommMeasurement> measured;  // empty: sizes only (modelled)
  std::string engine;                     // description of the engine that measured, "" if none
  std::vector<std::string> notes;
  const CommMeasurement* find(size_t index, CommType t) const;
};

// Times every collective in its BF16-recipe type and, where it differs, its FP8-recipe type; with
// `overlap`, each collective that has an `overlaps` GEMM also beside that GEMM, once per recipe
// family (its BF16 type beside the BF16 GEMM, its FP8 type beside the FP8 GEMM).
CommResult measure_collectives(const Plan& plan, const CommLayout& l, CommEngine& engine, int warmup, int iters,
                               bool overlap = true);
// The plan's GEMM a collective overlaps (first match of pass and op), or nullptr.
const Gemm* overlapped_gemm(const Collective& c, const Plan& plan);
// The same result with sizes only.
CommResult plan_comm(const Plan& plan, const CommLayout& l);

// The measured communication of one layer of a kind: a dense layer runs the collectives of scope
// Layer and DenseLayer, a MoE layer those of scope Layer and MoeLayer (its all-to-alls). Exposed time
// under the overlap model (OverlapTiming) per recipe family: a collective without an overlap figure
// in that family counts whole.
struct LayerComm {
  double bf16_ms = 0, fp8_ms = 0;  // in the BF16 recipe's and the FP8 recipes' wire types
  double exposed_bf16_ms = 0, exposed_fp8_ms = 0;
  bool overlap_bf16 = false, overlap_fp8 = false;  // some collective of the layer was timed beside its GEMM
  bool measured = false;                           // the result holds times
};
LayerComm layer_comm(const CommResult& r, bool moe_layer);

// {"schema": "gemmscope-comm/1", "engine", "layout", "collectives": [{kind, group, ranks, scope,
// backward, what, per_step, rows, width, block_scales, matrix, types: {"BF16": {size_bytes,
// ms, ms_min, ms_max, bus_gbs}, ...}}], "notes"}: what bench/validate_collectives.py replays.
nlohmann::json comm_to_json(const CommResult& r, const Plan& plan);

// The per-layer communication table (sizes, counts per step, measured ms and bus bandwidth).
std::string render_comm_text(const CommResult& r, const Plan& plan);

}  // namespace gs

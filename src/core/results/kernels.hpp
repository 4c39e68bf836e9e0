// Kernel-level records of a measured cell: which GPU kernels one iteration launched (traced with
// CUPTI by the backend), how long each ran, which cuBLASLt algorithm the GEMM used and, with
// --algo autotune, what tuning gained over cuBLASLt's first choice. Pure data plus the name
// rules (kernel class, a GEMM kernel's input type) so reports and tests need no GPU.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/json_fields.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

struct RunResult;

enum class KernelClass { Gemm, Quantize, Other };
const char* to_string(KernelClass c);  // "gemm", "quantize", "other"
KernelClass kernel_class_from_string(const std::string& s);  // UsageError on anything else

// The class of a kernel from its (demangled) name: cuBLAS/cuBLASLt GEMM kernels (nvjet_*,
// cutlass*, *gemm*, *xmma*, cuBLAS's split-K reduction) are Gemm; gemmscope's own
// quantization kernels (amax, casts, block/MX/NVFP4 quantization, transposes, the delayed
// scaling history step, NVFP4's alpha) and kernels with such names elsewhere are Quantize;
// everything else (the launch gate, fills, the step kernels of cuda/stepwork/) is Other.
KernelClass classify_kernel(std::string_view name);

// The input type a GEMM kernel's name says it reads. cuBLASLt's nvjet kernels name their types
// after the architecture: nvjet_sm90_tst_* reads BF16 (t), nvjet_sm90_qqtst_* E4M3 x E4M3,
// qrtst / rqtst E4M3 x E5M2 (q = E4M3, r = E5M2), h FP16, s FP32. Other kernels: e4m3/e5m2/fp8,
// e2m1/fp4, bf16 in the name. Unknown when the name does not say.
enum class KernelInputs { BF16, FP16, FP32, FP8, FP4, Unknown };
const char* to_string(KernelInputs k);
KernelInputs gemm_kernel_inputs(std::string_view name);

struct KernelStat {
  std::string name;
  double mean_us = 0;  // mean GPU duration of one launch
  double count = 0;    // launches per iteration (traced launches / traced iterations)
  KernelClass cls = KernelClass::Other;
};

// One traced launch: name and GPU duration.
struct KernelLaunch {
  std::string name;
  double ns = 0;
};
// Launches of `iters` iterations -> one row per kernel name, in first-launch order.
std::vector<KernelStat> aggregate_launches(const std::vector<KernelLaunch>& launches, int iters);

// cuBLASLt's algorithm as cublasLtMatmulAlgoConfigGetAttribute reports it. Enum values are kept
// as numbers and, where the backend knows the enum's name, as text ("128x256", "2x1x1").
struct AlgoRecord {
  int id = -1;
  int tile = 0, stages = 0, cluster = 0;  // cublasLtMatmulTile_t / Stages_t / ClusterShape_t
  std::string tile_name, stages_name, cluster_name;
  int split_k = 1;
  int reduction = 0;  // cublasLtReductionScheme_t
  int swizzle = 0;
  int custom = 0;
  int rank = 0;  // position in cuBLASLt's heuristic list (0 = its first choice); -1: found by --algo search
  std::string summary() const;  // "algo 66 tile 128x256 stages 64x4 splitK 1 swizzle 0 cluster 2x1x1"
};

// --algo autotune: the top-K heuristic candidates timed GEMM-only, the fastest kept.
struct AutotuneRecord {
  int k = 0;           // candidates asked for
  int tried = 0;       // candidates that ran
  double heuristic_us = 0;  // the heuristic's first choice, timed in the same tuning run
  double chosen_us = 0;     // the kept candidate
  AlgoRecord heuristic;     // the first choice's configuration
  // A faster candidate than the heuristic's was found, won the A/B confirmation and then beat the
  // heuristic's choice in the cell's own timed loop (false: none was found, or it lost in one of
  // those, and the heuristic's choice was kept and timed).
  bool confirmed = false;
  // --algo search: configurations beyond the heuristic's list that were screened (0 with
  // autotune), and the kept configuration's output against the heuristic's (relative Frobenius
  // difference; < 0 when not checked: the heuristic's own choice was kept).
  int searched = 0;
  int screen_faster = 0;  // of those, how many beat the heuristic's choice by 1% in the screen
  double output_rel_diff = -1;
  double gain() const { return chosen_us > 0 ? heuristic_us / chosen_us : 0; }
};

struct CellKernels {
  // The kernel provider that ran the cell's GEMM (core/providers/provider.hpp; empty: cuBLASLt, files written
  // before providers existed) and, for providers other than cuBLASLt, its kernel configuration
  // ("cutlass sm90 ptr-array grouped bf16 ... 128x128x64 cluster 1x1 cooperative").
  std::string provider;
  std::string config;
  bool traced = false;
  std::string trace_note;  // why there is no trace (no CUPTI, --profile, ...)
  int trace_iters = 0;
  std::vector<KernelStat> kernels;
  // The GEMM kernel does not fit the cell's precision (e.g. a BF16 kernel in an FP8 cell: a
  // silent fallback) or no GEMM kernel was seen. Empty when fine.
  std::string flag;
  std::optional<AlgoRecord> algo;
  std::optional<AutotuneRecord> autotune;
  double class_us(KernelClass c) const;  // sum of mean_us * count over kernels of class c
  bool empty() const { return provider.empty() && config.empty() && !traced && trace_note.empty() && !algo && !autotune; }
};

// The flag for a traced cell of precision p (see CellKernels::flag), or "".
std::string kernel_flag(Precision p, const std::vector<KernelStat>& kernels);

// Options of the GEMM side of the engine (EngineOptions::gemm).
// Autotune: the heuristic's top K timed; Search: those plus other configurations that cuBLASLt
// accepts (other tiles, stages, cluster shapes, custom options, swizzles of the same algorithms,
// and cuBLASLt's other algorithms), screened, the best K of them timed beside the heuristic's.
enum class AlgoChoice { Heuristic, Autotune, Search };
struct GemmOptions {
  AlgoChoice algo = AlgoChoice::Heuristic;
  int autotune_k = 8;
  int num_sms = 0;            // > 0: CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET for every timed GEMM
  bool trace_kernels = true;  // CUPTI kernel records per cell (when libcupti can be loaded)
  int trace_iters = 3;        // iterations traced after the timed loop
  bool profile = false;       // cudaProfilerStart/Stop around each timed loop only
};
// "heuristic", "autotune", "autotune:K", "search" or "search:K" -> options; UsageError names --algo otherwise.
void parse_algo_option(const std::string& v, GemmOptions& o);
std::string algo_option_string(const GemmOptions& o);  // the inverse

// The JSON of a cell's kernel records (docs/kernels.md): "kernels", "kernel_trace_iters",
// "kernel_time_us", "kernel_flag", "kernel_trace_note", "kernel_config", "algo", "autotune" on the
// cell object, one table for the writer and the reader (core/io/json_fields.hpp).
const json_fields::Fields<CellKernels>& kernel_fields();

// NVTX range of a measured cell: "gemmscope/<mode>/<pass>/<op>/<precision>",
// e.g. "gemmscope/per-gemm/fprop/qkv/FP8Current".
std::string cell_range_name(Mode m, const Gemm& g, Precision p);

// After a run: sets every traced cell's flag and adds one note per flagged cell, plus notes for
// --num-sms, autotune and a trace that could not be taken.
void finish_kernel_records(RunResult& r);
// Judges every traced cell's kernels by today's rule (kernel_flag against the precision the GEMM is
// meant to run in: BF16 for the router, and for the LM head under --lm-head-precision bf16): sets
// each flag and replaces the run's "KERNEL CHECK" notes. The run's end calls it, and so does the
// reader of result files, so a file written under an older rule raises no stale alarm.
void judge_kernel_checks(RunResult& r);

// --kernels: per measured cell, its kernels (class, launches per iteration, mean us), the
// GEMM / quantize / other split, the algorithm and, with autotune, the gain over the heuristic.
std::string render_kernel_table(const RunResult& r);
// --algo autotune: one line per measured cell with the heuristic's and the kept algorithm's
// GEMM time and the gain; empty when no cell was tuned.
std::string render_autotune_table(const RunResult& r);

}  // namespace gs

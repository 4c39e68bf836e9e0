// One cuBLASLt matmul, described in the plan's terms: C[m,n] = L[m,k] . R[k,n], row-major BF16
// output, operands stored either K-contiguous ("k_major") or not. All low-precision operands are
// K-contiguous (Hopper FP8 is TN-only), BF16 operands may be either.
//
// Row-major C[m,n] is column-major C^T[n,m] = R^T . L^T, so cuBLASLt's A is R and B is L:
//   R k-major ([n,k] row-major = col-major k x n, ld k)  -> transa = T
//   R not     ([k,n] row-major = col-major n x k, ld n)  -> transa = N
//   L k-major ([m,k] row-major = col-major k x m, ld k)  -> transb = N
//   L not     ([k,m] row-major = col-major m x k, ld m)  -> transb = T
// Scale modes follow cuBLASLt's operands: R's scales go to A, L's to B.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/results/kernels.hpp"
#include "cuda/common/device_buffer.hpp"

namespace gs::cuda {

struct LtOperand {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_16BF;
  bool k_major = true;
  // Scaling: none for BF16; otherwise a device pointer and the cuBLASLt scale mode.
  const void* scale = nullptr;
  cublasLtMatmulMatrixScale_t scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
};

struct LtProblem {
  int64_t m = 0, n = 0, k = 0;
  LtOperand l, r;
  void* c = nullptr;        // [m,n] row-major, c_type
  cudaDataType_t c_type = CUDA_R_16BF;  // BF16, or FP32 (references; Wgrad's FP32 main gradient)
  float beta = 0.f;         // 1: D = A.B + C (C = D, accumulated in place)
  bool fast_accum = false;  // FP8 per-tensor only
  // Device {alpha, beta} pair (NVFP4 folds its tensor scales into alpha); null: alpha 1 and `beta` on the host.
  const float* alpha_device = nullptr;
  int sm_count = 0;  // > 0: CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET (--num-sms)
};

// The matmul descriptor and the A/B/C layouts of a problem (cuBLASLt's A = R, B = L). Needs no
// GPU and no handle, so the host tests read back exactly what every recipe, Blackwell's
// included, hands cuBLASLt. Throws CublasError.
class LtDescriptors {
 public:
  explicit LtDescriptors(const LtProblem& p);
  ~LtDescriptors();
  LtDescriptors(const LtDescriptors&) = delete;
  LtDescriptors& operator=(const LtDescriptors&) = delete;
  cublasLtMatmulDesc_t desc() const { return desc_; }
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }
  cublasLtMatrixLayout_t c() const { return c_; }
  const std::string& layout() const { return layout_; }  // e.g. "TN"

 private:
  void release();
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  std::string layout_;
};

// Heuristic results by problem (sizes, types, layouts, scale modes, accumulation, operand
// alignments) and count asked for: grouped GEMMs build hundreds of identical per-expert problems,
// and the heuristic query is host time outside nothing (the cell's setup). Not thread-safe.
class LtAlgoCache {
 public:
  using Algos = std::vector<cublasLtMatmulAlgo_t>;
  static std::string key(const LtProblem& p, int heuristic_count = 1);
  const Algos* find(const std::string& k) const {
    auto it = algos_.find(k);
    return it == algos_.end() ? nullptr : &it->second;
  }
  void put(const std::string& k, const Algos& a) { algos_[k] = a; }
  size_t size() const { return algos_.size(); }
  size_t hits = 0, misses = 0;

 private:
  std::map<std::string, Algos> algos_;
};

// Largest power of two (up to 256) dividing a pointer: the heuristic is told each operand's real
// alignment, since slices of a token-major buffer (grouped GEMMs) are not 256-byte aligned.
uint32_t pointer_alignment(const void* p);

// The descriptors, the heuristic's algorithms and the one in use. Construction asks cuBLASLt's
// heuristic once (with `cache`: once per distinct problem) for its top `heuristic_count`
// algorithms (1 unless a tuner times them: LtTuner::heuristic_count) and runs its first choice.
// Throws CublasError (NOT_SUPPORTED when cuBLASLt has no kernel: an N/A cell, not a crash).
// Which algorithm runs is the caller's (use()): tuning is LtTuner's (lt_tuner.hpp).
class LtMatmul {
 public:
  LtMatmul(cublasLtHandle_t handle, const LtProblem& p, void* workspace, size_t workspace_bytes,
           LtAlgoCache* cache = nullptr, int heuristic_count = 1);
  void run(cudaStream_t s);
  const std::string& layout() const { return d_.layout(); }
  // The algorithm in use, as cublasLtMatmulAlgoConfigGetAttribute reports it, with its rank.
  AlgoRecord algo_record() const;
  // The heuristic's algorithms, best first (those whose state is SUCCESS; never empty), and how
  // many were asked for.
  const std::vector<cublasLtMatmulAlgo_t>& heuristic() const { return heuristic_; }
  int heuristic_count() const { return heuristic_count_; }
  // Runs `a` from now on; `rank`: its position in heuristic(), -1 for a configuration found by search.
  void use(const cublasLtMatmulAlgo_t& a, int rank) {
    algo_ = a;
    rank_ = rank;
  }
  const cublasLtMatmulAlgo_t& algo() const { return algo_; }
  int rank() const { return rank_; }
  // What a tuner needs to check configurations and compare outputs.
  cublasLtHandle_t handle() const { return handle_; }
  const LtDescriptors& descriptors() const { return d_; }
  const LtProblem& problem() const { return p_; }
  size_t workspace_bytes() const { return ws_bytes_; }

 private:
  cublasLtHandle_t handle_;
  LtProblem p_;
  LtDescriptors d_;
  int heuristic_count_;
  std::vector<cublasLtMatmulAlgo_t> heuristic_;
  cublasLtMatmulAlgo_t algo_{};
  int rank_ = 0;  // position of algo_ in the heuristic's list; -1: found by search
  void* ws_;
  size_t ws_bytes_;
  float alpha_ = 1.f, beta_ = 0.f;  // beta_: LtProblem::beta
};

// One configuration attribute of an algorithm (T{} where cuBLASLt does not report it).
template <class T>
T lt_algo_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

// The configuration of an algorithm (id, tile, stages, split-K, swizzle, cluster shape, ...).
AlgoRecord describe_algo(const cublasLtMatmulAlgo_t& a);

constexpr size_t kWorkspaceBytes = 32u << 20;  // 32 MiB, as recommended for sm_90 / sm_100
// A cuBLASLt workspace of kWorkspaceBytes, zero-filled once (finished before it returns): some
// cuBLASLt kernels read counters in the workspace (compute-sanitizer initcheck flagged a read of
// never-written workspace memory), and zeros are what a fresh, defined start looks like.
DeviceBuffer make_lt_workspace();

}  // namespace gs::cuda

#include "cuda/providers/cublaslt/gemm_lt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/cublaslt/lt_enum_names.hpp"

namespace gs::cuda {

LtDescriptors::LtDescriptors(const LtProblem& p) {
  try {
    GS_CUBLAS(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = p.r.k_major ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = p.l.k_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    layout_ = std::string(ta == CUBLAS_OP_T ? "T" : "N") + (tb == CUBLAS_OP_T ? "T" : "N");
    GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const bool low_precision = p.l.type != CUDA_R_16BF || p.r.type != CUDA_R_16BF;
    if (low_precision) {
      const int8_t fast = p.fast_accum ? 1 : 0;
      GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
      GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.r.scale, sizeof p.r.scale));
      GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.l.scale, sizeof p.l.scale));
      if (p.r.scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &p.r.scale_mode, sizeof p.r.scale_mode));
      if (p.l.scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &p.l.scale_mode, sizeof p.l.scale_mode));
    }
    if (p.sm_count > 0) {
      const int32_t sms = p.sm_count;
      GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    if (p.alpha_device) {
      const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
      GS_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
    }
    const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
    // A = R: op(A) is n x k.   B = L: op(B) is k x m.   C/D: n x m, ld n.
    if (p.r.k_major) GS_CUBLAS(cublasLtMatrixLayoutCreate(&a_, p.r.type, k, n, static_cast<int64_t>(k)));
    else GS_CUBLAS(cublasLtMatrixLayoutCreate(&a_, p.r.type, n, k, static_cast<int64_t>(n)));
    if (p.l.k_major) GS_CUBLAS(cublasLtMatrixLayoutCreate(&b_, p.l.type, k, m, static_cast<int64_t>(k)));
    else GS_CUBLAS(cublasLtMatrixLayoutCreate(&b_, p.l.type, m, k, static_cast<int64_t>(m)));
    GS_CUBLAS(cublasLtMatrixLayoutCreate(&c_, p.c_type, n, m, static_cast<int64_t>(n)));
  } catch (...) {
    release();
    throw;
  }
}

LtDescriptors::~LtDescriptors() { release(); }

void LtDescriptors::release() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  c_ = b_ = a_ = nullptr;
  desc_ = nullptr;
}

uint32_t pointer_alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

std::string LtAlgoCache::key(const LtProblem& p, int heuristic_count) {
  auto op = [](const LtOperand& o) {
    return fmt::format("{}:{}:{}:{}", static_cast<int>(o.type), o.k_major ? 1 : 0, static_cast<int>(o.scale_mode),
                       pointer_alignment(o.data));
  };
  return fmt::format("{}x{}x{}|{}|{}|{}:{}|{}|{}", p.m, p.k, p.n, op(p.l), op(p.r), static_cast<int>(p.c_type),
                     pointer_alignment(p.c), p.fast_accum ? 1 : 0, p.alpha_device ? 1 : 0) +
         fmt::format("|sm{}|b{}|h{}", p.sm_count, p.beta, heuristic_count);
}

namespace {

// cuBLASLt's heuristic for the problem: up to `count` algorithms, best first, those whose state is
// SUCCESS. Told the workspace and each operand's real alignment (cuBLASLt's A = R, B = L; the
// default assumes 256 bytes). Throws CublasError NOT_SUPPORTED when its first choice is missing.
std::vector<cublasLtMatmulAlgo_t> ask_heuristic(cublasLtHandle_t h, const LtDescriptors& d, const LtProblem& p,
                                                size_t ws_bytes, int count) {
  cublasLtMatmulPreference_t pref = nullptr;
  GS_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::vector<cublasLtMatmulHeuristicResult_t> heur(static_cast<size_t>(std::max(count, 1)));
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
  const uint32_t al_a = pointer_alignment(p.r.data), al_b = pointer_alignment(p.l.data), al_c = pointer_alignment(p.c);
  for (auto [attr, al] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
                          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
                          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c},
                          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c}})
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(h, d.desc(), d.a(), d.b(), d.c(), d.c(), pref, static_cast<int>(heur.size()),
                                        heur.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (found == 0 || heur[0].state != CUBLAS_STATUS_SUCCESS)
    throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt heuristic found no algorithm");
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < found; ++i)
    if (heur[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(heur[static_cast<size_t>(i)].algo);
  return out;
}

}  // namespace

LtMatmul::LtMatmul(cublasLtHandle_t handle, const LtProblem& p, void* ws, size_t ws_bytes, LtAlgoCache* cache,
                   int heuristic_count)
    : handle_(handle), p_(p), d_(p), heuristic_count_(std::max(heuristic_count, 1)), ws_(ws), ws_bytes_(ws_bytes),
      beta_(p.beta) {
  std::string key;
  const LtAlgoCache::Algos* cached = nullptr;
  if (cache) {
    key = LtAlgoCache::key(p, heuristic_count_);
    cached = cache->find(key);
    ++(cached ? cache->hits : cache->misses);
  }
  heuristic_ = cached ? *cached : ask_heuristic(handle_, d_, p_, ws_bytes_, heuristic_count_);
  if (cache && !cached) cache->put(key, heuristic_);
  algo_ = heuristic_.front();
}

DeviceBuffer make_lt_workspace() {
  DeviceBuffer ws(kWorkspaceBytes);
  GS_CUDA(cudaMemset(ws.get(), 0, ws.bytes()));
  GS_CUDA(cudaDeviceSynchronize());  // legacy-stream memset: done before any non-blocking stream uses it
  return ws;
}

AlgoRecord describe_algo(const cublasLtMatmulAlgo_t& a) {
  AlgoRecord r;
  r.id = lt_algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
  r.tile = static_cast<int>(lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID));
  r.stages = static_cast<int>(lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID));
  r.cluster = static_cast<int>(lt_algo_config<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  r.tile_name = lt_tile_name(static_cast<unsigned>(r.tile));
  r.stages_name = lt_stages_name(static_cast<unsigned>(r.stages));
  r.cluster_name = lt_cluster_name(static_cast<unsigned>(r.cluster));
  r.split_k = lt_algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  r.reduction = static_cast<int>(lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  r.swizzle = static_cast<int>(lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
  r.custom = static_cast<int>(lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return r;
}

AlgoRecord LtMatmul::algo_record() const {
  AlgoRecord r = describe_algo(algo_);
  r.rank = rank_;
  return r;
}

void LtMatmul::run(cudaStream_t s) {
  const void* alpha = p_.alpha_device ? static_cast<const void*>(p_.alpha_device) : &alpha_;
  // In device pointer mode beta must live on the device too: alpha_device points at {alpha, 0}.
  const void* beta = p_.alpha_device ? static_cast<const void*>(p_.alpha_device + 1) : &beta_;
  GS_CUBLAS(cublasLtMatmul(handle_, d_.desc(), alpha, p_.r.data, d_.a(), p_.l.data, d_.b(), beta, p_.c, d_.c(), p_.c,
                           d_.c(), &algo_, ws_, ws_bytes_, s));
}

}  // namespace gs::cuda

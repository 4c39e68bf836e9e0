#include "cuda/gemm_lt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/error_norm.cuh"
#include "cuda/lt_enum_names.hpp"

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

std::string LtAlgoCache::key(const LtProblem& p) {
  auto op = [](const LtOperand& o) {
    return fmt::format("{}:{}:{}:{}", static_cast<int>(o.type), o.k_major ? 1 : 0, static_cast<int>(o.scale_mode),
                       pointer_alignment(o.data));
  };
  return fmt::format("{}x{}x{}|{}|{}|{}:{}|{}|{}", p.m, p.k, p.n, op(p.l), op(p.r), static_cast<int>(p.c_type),
                     pointer_alignment(p.c), p.fast_accum ? 1 : 0, p.alpha_device ? 1 : 0) +
         fmt::format("|sm{}|b{}", p.sm_count, p.beta);
}

LtMatmul::LtMatmul(cublasLtHandle_t handle, const LtProblem& p, void* ws, size_t ws_bytes, LtAlgoCache* cache)
    : handle_(handle), p_(p), d_(p), ws_(ws), ws_bytes_(ws_bytes), beta_(p.beta) {
  std::string key;
  if (cache) {
    key = LtAlgoCache::key(p);
    if (const cublasLtMatmulAlgo_t* a = cache->find(key)) {
      algo_ = *a;
      ++cache->hits;
      return;
    }
    ++cache->misses;
  }
  {
    cublasLtMatmulPreference_t pref = nullptr;
    GS_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t heur[1]{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &ws_bytes_, sizeof ws_bytes_);
    // The operands' real alignments (cuBLASLt's A = R, B = L); the default assumes 256 bytes.
    const uint32_t al_a = pointer_alignment(p.r.data), al_b = pointer_alignment(p.l.data), al_c = pointer_alignment(p.c);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle_, d_.desc(), d_.a(), d_.b(), d_.c(), d_.c(), pref, 1, heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) throw_cublas(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (found == 0 || heur[0].state != CUBLAS_STATUS_SUCCESS)
      throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt heuristic found no algorithm");
    algo_ = heur[0].algo;
  }
  if (cache) cache->put(key, algo_);
}

DeviceBuffer make_lt_workspace() {
  DeviceBuffer ws(kWorkspaceBytes);
  GS_CUDA(cudaMemset(ws.get(), 0, ws.bytes()));
  GS_CUDA(cudaDeviceSynchronize());  // legacy-stream memset: done before any non-blocking stream uses it
  return ws;
}

namespace {

template <class T>
T algo_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

// Heuristic candidates for the problem, best first (up to `k`), only those whose state is SUCCESS.
std::vector<cublasLtMatmulHeuristicResult_t> candidates(cublasLtHandle_t h, const LtDescriptors& d, const LtProblem& p,
                                                        size_t ws_bytes, int k) {
  cublasLtMatmulPreference_t pref = nullptr;
  GS_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::vector<cublasLtMatmulHeuristicResult_t> heur(static_cast<size_t>(std::max(k, 1)));
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
  // The same alignment preferences as LtMatmul's own query, so candidate 0 is its choice.
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
  heur.resize(static_cast<size_t>(std::max(found, 0)));
  heur.erase(std::remove_if(heur.begin(), heur.end(),
                            [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; }),
             heur.end());
  return heur;
}


template <class T>
std::vector<T> cap_list(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0) return {};
  std::vector<T> v(bytes / sizeof(T));
  if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), v.size() * sizeof(T), &bytes) != CUBLAS_STATUS_SUCCESS)
    return {};
  return v;
}

// A scalar capability of an algorithm, or `dflt` where cuBLASLt does not report it.
template <class T>
T cap_value(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr, T dflt) {
  T v{};
  size_t written = 0;
  return cublasLtMatmulAlgoCapGetAttribute(&a, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS ? v : dflt;
}

template <class T>
bool set_config(cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(&a, attr, &v, sizeof v) == CUBLAS_STATUS_SUCCESS;
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::equal(std::begin(x.data), std::end(x.data), std::begin(y.data));
}

// --algo search: configurations the heuristic did not list, nearest first:
//  1. for each candidate, every tile, stages and cluster shape (those a Hopper or Blackwell
//     kernel uses) its algorithm lists, each changed on its own, and each custom option x CTA
//     swizzle;
//  2. the other algorithms cuBLASLt has for the problem's types (cublasLtMatmulAlgoGetIds), up
//     to kPerOtherAlgo configurations each (tile x stages from their defaults);
//  3. every tile x stages x cluster combination of each candidate's algorithm.
// Split-K and reduction stay as the candidate has them. Only what cublasLtMatmulAlgoCheck
// accepts within the workspace, without duplicates, at most `limit`.
std::vector<cublasLtMatmulAlgo_t> searched_configs(cublasLtHandle_t h, const LtDescriptors& d, const LtProblem& p,
                                                   size_t ws_bytes, const std::vector<cublasLtMatmulAlgo_t>& base,
                                                   size_t limit) {
  static constexpr uint16_t kClusters[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                           CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1,
                                           CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_1x4x1};
  std::vector<cublasLtMatmulAlgo_t> out;
  auto known = [&](const cublasLtMatmulAlgo_t& a) {
    auto same = [&](const cublasLtMatmulAlgo_t& b) { return same_algo(a, b); };
    return std::any_of(base.begin(), base.end(), same) || std::any_of(out.begin(), out.end(), same);
  };
  auto consider = [&](cublasLtMatmulAlgo_t a, auto... settings) {
    if (out.size() >= limit) return;
    if (!(set_config(a, settings.first, settings.second) && ...)) return;
    if (known(a)) return;
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoCheck(h, d.desc(), d.a(), d.b(), d.c(), d.c(), &a, &r) != CUBLAS_STATUS_SUCCESS) return;
    if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > ws_bytes) return;
    out.push_back(a);
  };
  auto tiles_of = [](const cublasLtMatmulAlgo_t& b) { return cap_list<uint32_t>(b, CUBLASLT_ALGO_CAP_TILE_IDS); };
  auto stages_of = [](const cublasLtMatmulAlgo_t& b) { return cap_list<uint32_t>(b, CUBLASLT_ALGO_CAP_STAGES_IDS); };
  using TileSet = std::pair<cublasLtMatmulAlgoConfigAttributes_t, uint32_t>;
  using ClusterSet = std::pair<cublasLtMatmulAlgoConfigAttributes_t, uint16_t>;
  // One setting changed.
  for (const cublasLtMatmulAlgo_t& b : base) {
    for (uint32_t t : tiles_of(b)) consider(b, TileSet{CUBLASLT_ALGO_CONFIG_TILE_ID, t});
    for (uint32_t st : stages_of(b)) consider(b, TileSet{CUBLASLT_ALGO_CONFIG_STAGES_ID, st});
    for (uint16_t c : kClusters) consider(b, ClusterSet{CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c});
    const int32_t custom_max = cap_value<int32_t>(b, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, 0);
    const uint32_t swizzle_ok = cap_value<uint32_t>(b, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, 0);
    for (int32_t o = 0; o <= std::min(custom_max, 63); ++o)
      for (uint32_t sw = 0; sw <= (swizzle_ok ? 1u : 0u); ++sw)
        consider(b, TileSet{CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, static_cast<uint32_t>(o)},
                 TileSet{CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, sw});
  }
  // The other algorithms for these types.
  std::vector<int32_t> base_ids;
  for (const cublasLtMatmulAlgo_t& b : base) base_ids.push_back(algo_attr<int32_t>(b, CUBLASLT_ALGO_CONFIG_ID));
  constexpr int kMaxIds = 256;
  constexpr size_t kPerOtherAlgo = 24;
  std::vector<int> ids(kMaxIds);
  int n_ids = 0;
  if (cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.r.type, p.l.type, p.c_type, p.c_type, kMaxIds,
                               ids.data(), &n_ids) != CUBLAS_STATUS_SUCCESS)
    n_ids = 0;
  for (int i = 0; i < std::min(n_ids, kMaxIds); ++i) {
    if (std::find(base_ids.begin(), base_ids.end(), ids[static_cast<size_t>(i)]) != base_ids.end()) continue;
    cublasLtMatmulAlgo_t a{};
    if (cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.r.type, p.l.type, p.c_type, p.c_type,
                               ids[static_cast<size_t>(i)], &a) != CUBLAS_STATUS_SUCCESS)
      continue;
    const size_t before = out.size();
    const size_t cap = std::min(limit, before + kPerOtherAlgo);
    std::vector<uint32_t> stages = stages_of(a);
    if (stages.empty()) stages.push_back(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID));
    for (uint32_t t : tiles_of(a))
      for (uint32_t st : stages)
        if (out.size() < cap)
          consider(a, TileSet{CUBLASLT_ALGO_CONFIG_TILE_ID, t}, TileSet{CUBLASLT_ALGO_CONFIG_STAGES_ID, st});
  }
  // Every tile x stages x cluster of each candidate's algorithm (from its first candidate's other
  // settings).
  std::vector<int32_t> seen_ids;
  for (const cublasLtMatmulAlgo_t& b : base) {
    const int32_t id = algo_attr<int32_t>(b, CUBLASLT_ALGO_CONFIG_ID);
    if (std::find(seen_ids.begin(), seen_ids.end(), id) != seen_ids.end()) continue;
    seen_ids.push_back(id);
    const std::vector<uint32_t> stages = stages_of(b);
    for (uint32_t t : tiles_of(b))
      for (uint32_t st : stages)
        for (uint16_t c : kClusters)
          consider(b, TileSet{CUBLASLT_ALGO_CONFIG_TILE_ID, t}, TileSet{CUBLASLT_ALGO_CONFIG_STAGES_ID, st},
                   ClusterSet{CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c});
  }
  return out;
}

}  // namespace

AlgoRecord describe_algo(const cublasLtMatmulAlgo_t& a) {
  AlgoRecord r;
  r.id = algo_attr<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
  r.tile = static_cast<int>(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID));
  r.stages = static_cast<int>(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID));
  r.cluster = static_cast<int>(algo_attr<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  r.tile_name = lt_tile_name(static_cast<unsigned>(r.tile));
  r.stages_name = lt_stages_name(static_cast<unsigned>(r.stages));
  r.cluster_name = lt_cluster_name(static_cast<unsigned>(r.cluster));
  r.split_k = algo_attr<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  r.reduction = static_cast<int>(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  r.swizzle = static_cast<int>(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
  r.custom = static_cast<int>(algo_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return r;
}

AlgoRecord LtMatmul::algo_record() const {
  AlgoRecord r = describe_algo(algo_);
  r.rank = rank_;
  return r;
}

namespace {

// Events for one tuning sample: a pair per call, so that the L2 flush of --l2 cold (enqueued
// between calls, as in the timed loop) stays outside the time.
class SampleEvents {
 public:
  explicit SampleEvents(int n) {
    ev_.reserve(2 * static_cast<size_t>(n));
    for (int i = 0; i < 2 * n; ++i) ev_.push_back(make_event());
  }
  cudaEvent_t start(int i) const { return ev_[2 * static_cast<size_t>(i)]; }
  cudaEvent_t stop(int i) const { return ev_[2 * static_cast<size_t>(i) + 1]; }

 private:
  std::vector<Event> ev_;  // released with the sampler, also when its constructor throws
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

AutotuneRecord LtMatmul::autotune(cudaStream_t s, int k, const std::function<void()>& between, bool search) {
  AutotuneRecord rec;
  rec.k = k;
  std::vector<cublasLtMatmulAlgo_t> cand;
  std::vector<int> rank;  // position in the heuristic's list, -1 for a searched configuration
  for (const auto& r : candidates(handle_, d_, p_, ws_bytes_, k)) {
    cand.push_back(r.algo);
    rank.push_back(static_cast<int>(rank.size()));
  }
  if (cand.empty()) throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt heuristic found no algorithm");
  const size_t listed = cand.size();
  const std::vector<cublasLtMatmulAlgo_t> searched =
      search ? searched_configs(handle_, d_, p_, ws_bytes_, cand, kMaxSearched) : std::vector<cublasLtMatmulAlgo_t>{};
  const cublasLtMatmulAlgo_t keep = algo_;
  // Timing is sustained, as in the timed loop: a round enqueues every candidate's sample back to
  // back with no host wait in between (idle gaps let the clock boost, and a kernel that wins a
  // short burst can lose under the power cap: on an H100 a 192x192-tile pick that won bursts was
  // 6% slower in the timed loop). Each call has its own event pair (an event after every call,
  // as the timed loop records one per iteration: back-to-back calls without it can overlap one
  // GEMM's tail with the next one's start, which the timed loop never sees), so that `between`
  // (the L2 flush of --l2 cold) stays outside the time.
  constexpr int kMaxReps = 64;
  constexpr double kSampleUs = 2000.0;  // one sample: ~2 ms of calls
  std::vector<std::unique_ptr<SampleEvents>> ev;
  std::vector<bool> ok;
  auto add_events = [&](size_t upto) {
    while (ev.size() < upto) {
      ev.push_back(std::make_unique<SampleEvents>(kMaxReps));
      ok.push_back(true);
    }
  };
  // Enqueues a sample of candidate i (a first untimed call, then `reps` timed ones).
  auto enqueue = [&](size_t i, int reps) {
    algo_ = cand[i];
    run(s);
    for (int r = 0; r < reps; ++r) {
      if (between) between();
      GS_CUDA(cudaEventRecord(ev[i]->start(r), s));
      run(s);
      GS_CUDA(cudaEventRecord(ev[i]->stop(r), s));
    }
  };
  auto mean_us = [&](size_t i, int reps) {
    double us = 0;
    for (int r = 0; r < reps; ++r) {
      float ms = 0;
      GS_CUDA(cudaEventElapsedTime(&ms, ev[i]->start(r), ev[i]->stop(r)));
      us += static_cast<double>(ms) * 1000.0;
    }
    return us / reps;
  };
  // Enqueues one sample of each candidate in `which`, back to back, then waits: mean microseconds
  // per candidate (candidates that fail to enqueue are marked and skipped).
  auto round_of = [&](const std::vector<size_t>& which, int reps) {
    std::vector<size_t> ran;
    for (size_t i : which) {
      if (!ok[i]) continue;
      try {
        enqueue(i, reps);
        ran.push_back(i);
      } catch (const CublasError&) {
        // This candidate does not run here (e.g. a workspace or alignment limit): skip it.
        ok[i] = false;
      }
    }
    GS_CUDA(cudaStreamSynchronize(s));
    std::vector<std::pair<size_t, double>> out;
    for (size_t i : ran) out.emplace_back(i, mean_us(i, reps));
    return out;
  };
  try {
    add_events(cand.size());
    // Reps from one call of the first candidate that runs, then a heat-up of ~20 ms on it.
    int reps = 0;
    for (size_t i = 0; i < cand.size() && reps == 0; ++i)
      for (auto& [j, us] : round_of({i}, 1))
        reps = std::clamp(static_cast<int>(kSampleUs / std::max(us, 1e-3)), 3, kMaxReps);
    if (reps == 0) throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "no cuBLASLt candidate ran");
    auto heat_up = [&] {
      for (int h = 0; h < 10; ++h)
        for (size_t i = 0; i < cand.size(); ++i)
          if (ok[i]) {
            round_of({i}, reps);
            break;
          }
    };
    heat_up();
    if (!searched.empty()) {
      // The search's screen: one short sample of every searched configuration, in slices that
      // each begin with the heuristic's first choice (its sample in the same slice is the
      // yardstick, so a clock drift over the screen does not favour a slice). Configurations
      // faster than the yardstick by more than 1%, best first, up to K, join the candidates.
      const int screen_reps = std::max(1, reps / 4);
      constexpr size_t kSlice = 16;
      std::vector<std::pair<double, size_t>> faster;
      cand.insert(cand.end(), searched.begin(), searched.end());
      rank.insert(rank.end(), searched.size(), -1);
      add_events(cand.size());
      for (size_t first = listed; first < cand.size(); first += kSlice) {
        std::vector<size_t> slice{0};
        for (size_t i = first; i < std::min(cand.size(), first + kSlice); ++i) slice.push_back(i);
        double yard = 0;
        std::vector<std::pair<size_t, double>> got = round_of(slice, screen_reps);
        for (auto& [i, us] : got)
          if (i == 0) yard = us;
        for (auto& [i, us] : got)
          if (i != 0 && yard > 0 && us < 0.99 * yard) faster.emplace_back(us / yard, i);
      }
      rec.searched = static_cast<int>(searched.size());
      rec.screen_faster = static_cast<int>(faster.size());
      std::sort(faster.begin(), faster.end());
      if (faster.size() > static_cast<size_t>(k)) faster.resize(static_cast<size_t>(k));
      // The heuristic's candidates, then the screen's best: cand, rank and ok keep these rows.
      std::vector<size_t> kept(listed);
      for (size_t i = 0; i < listed; ++i) kept[i] = i;
      for (auto& [ratio, i] : faster) kept.push_back(i);
      auto keep_rows = [&](auto& v) {
        std::remove_reference_t<decltype(v)> w;
        for (size_t i : kept) w.push_back(v[i]);
        v = std::move(w);
      };
      keep_rows(cand);
      keep_rows(rank);
      keep_rows(ok);
      ev.resize(cand.size());  // events are interchangeable: the first ones serve the kept rows
      heat_up();
    }
    // Rounds interleave the candidates, so that a clock drift during tuning touches all of them
    // alike; each candidate's figure is the median of its rounds (the minimum would favour a
    // candidate with a noisy lucky round).
    constexpr int kRounds = 5;
    std::vector<std::vector<double>> rounds(cand.size());
    std::vector<size_t> all(cand.size());
    for (size_t i = 0; i < cand.size(); ++i) all[i] = i;
    for (int round = 0; round < kRounds; ++round)
      for (auto& [i, us] : round_of(all, reps)) rounds[i].push_back(us);
    std::vector<double> med(cand.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < cand.size(); ++i)
      if (ok[i]) med[i] = median_of(rounds[i]);
    // The heuristic's first choice (the algorithm LtMatmul was built with) is replaced only by a
    // candidate at least 2% faster (run-to-run noise on an H100 is about that) ...
    size_t pick = 0;
    for (size_t i = 1; i < cand.size(); ++i)
      if (ok[i] && med[i] < med[pick] && (!ok[0] || med[i] < 0.98 * med[0])) pick = i;
    if (!ok[pick]) throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "no cuBLASLt candidate ran");
    // ... that also wins a confirmation: heuristic and pick alternate in fresh, longer samples
    // (~25 ms each: long enough for the power cap to act, which short samples do not see: on an
    // H100 a cluster-1x2 FP8 block pick that won 2 ms samples by 2% ran 2% slower in the timed
    // loop), and the pick stays only if its median is at least 2% below the heuristic's there
    // too.
    if (pick != 0 && ok[0]) {
      constexpr int kConfirm = 6;
      constexpr double kConfirmUs = 25000.0;
      const int long_reps = std::clamp(static_cast<int>(kConfirmUs / std::max(med[0], 1e-3)), reps, 1024);
      ev[0] = std::make_unique<SampleEvents>(long_reps);
      ev[pick] = std::make_unique<SampleEvents>(long_reps);
      std::vector<double> h, c;
      for (int round = 0; round < kConfirm; ++round)
        for (auto& [i, us] :
             round_of(round % 2 ? std::vector<size_t>{pick, 0} : std::vector<size_t>{0, pick}, long_reps))
          (i == 0 ? h : c).push_back(us);
      const double hm = h.empty() ? med[0] : median_of(h), cm = c.empty() ? med[pick] : median_of(c);
      rec.confirmed = !c.empty() && cm < 0.98 * hm;
      if (!rec.confirmed) pick = 0;
      med[0] = hm;
      if (pick != 0) med[pick] = cm;
    }
    // A searched configuration is kept only if its output is the heuristic's (same inputs; a
    // different tiling sums in another order, so a few BF16 ulps apart at most).
    if (pick != 0 && rank[pick] < 0) {
      rec.output_rel_diff = output_difference(s, cand[0], cand[pick]);
      if (!(rec.output_rel_diff <= kMaxOutputRelDiff)) {
        pick = 0;
        rec.confirmed = false;
      }
    }
    for (bool b : ok) rec.tried += b ? 1 : 0;
    rec.heuristic = describe_algo(cand[0]);
    rec.heuristic_us = ok[0] ? med[0] : 0;
    rec.chosen_us = med[pick];
    algo_ = tuned_algo_ = cand[pick];
    heuristic_algo_ = cand[0];
    rank_ = tuned_rank_ = rank[pick];
  } catch (...) {
    algo_ = keep;
    throw;
  }
  return rec;
}

double LtMatmul::output_difference(cudaStream_t s, const cublasLtMatmulAlgo_t& reference,
                                   const cublasLtMatmulAlgo_t& other) {
  const size_t elems = static_cast<size_t>(p_.m) * static_cast<size_t>(p_.n);
  const bool bf16 = p_.c_type == CUDA_R_16BF;
  const size_t bytes = elems * (bf16 ? 2 : 4);
  DeviceBuffer ref(bytes);
  // Accumulating (beta != 0): both algorithms start from the same C.
  DeviceBuffer c0(p_.beta != 0.f ? bytes : 0);
  if (c0) GS_CUDA(cudaMemcpyAsync(c0.get(), p_.c, bytes, cudaMemcpyDeviceToDevice, s));
  const cublasLtMatmulAlgo_t keep = algo_;
  algo_ = reference;
  run(s);
  GS_CUDA(cudaMemcpyAsync(ref.get(), p_.c, bytes, cudaMemcpyDeviceToDevice, s));
  if (c0) GS_CUDA(cudaMemcpyAsync(p_.c, c0.get(), bytes, cudaMemcpyDeviceToDevice, s));
  algo_ = other;
  run(s);
  algo_ = keep;
  return rel_frobenius_difference(p_.c, ref.get(), bf16, elems, s);
}

bool LtMatmul::tuned_differs() const { return !same_algo(tuned_algo_, heuristic_algo_); }

void LtMatmul::select(bool tuned) {
  algo_ = tuned ? tuned_algo_ : heuristic_algo_;
  rank_ = tuned ? tuned_rank_ : 0;
}

void LtMatmul::run(cudaStream_t s) {
  const void* alpha = p_.alpha_device ? static_cast<const void*>(p_.alpha_device) : &alpha_;
  // In device pointer mode beta must live on the device too: alpha_device points at {alpha, 0}.
  const void* beta = p_.alpha_device ? static_cast<const void*>(p_.alpha_device + 1) : &beta_;
  GS_CUBLAS(cublasLtMatmul(handle_, d_.desc(), alpha, p_.r.data, d_.a(), p_.l.data, d_.b(), beta, p_.c, d_.c(), p_.c,
                           d_.c(), &algo_, ws_, ws_bytes_, s));
}

}  // namespace gs::cuda

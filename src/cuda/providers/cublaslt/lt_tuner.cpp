#include "cuda/providers/cublaslt/lt_tuner.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/error_norm.cuh"
#include "cuda/providers/tuner.hpp"

namespace gs::cuda {

namespace {

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

LtAlgoCaps caps_of(const cublasLtMatmulAlgo_t& a) {
  LtAlgoCaps c;
  c.id = lt_algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
  c.tiles = cap_list<uint32_t>(a, CUBLASLT_ALGO_CAP_TILE_IDS);
  c.stages = cap_list<uint32_t>(a, CUBLASLT_ALGO_CAP_STAGES_IDS);
  c.custom_option_max = cap_value<int32_t>(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, 0);
  c.cta_swizzling = cap_value<uint32_t>(a, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, 0) != 0;
  c.stages_setting = lt_algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  return c;
}

// The configuration's settings on its source algorithm, in lt_search.hpp's order; false where
// cuBLASLt refuses one.
bool apply(cublasLtMatmulAlgo_t& a, const LtConfig& c) {
  return (!c.tile || set_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID, *c.tile)) &&
         (!c.stages || set_config(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, *c.stages)) &&
         (!c.cluster || set_config(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, *c.cluster)) &&
         (!c.custom || set_config(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, *c.custom)) &&
         (!c.swizzle || set_config(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, *c.swizzle));
}

// The candidates of one tuning as a Tunable: the heuristic's list, then the searched
// configurations; each runs through the matmul.
class LtCandidates final : public Tunable {
 public:
  LtCandidates(LtMatmul& mm, std::vector<cublasLtMatmulAlgo_t> cand, size_t listed)
      : mm_(mm), cand_(std::move(cand)), listed_(listed) {}
  size_t listed() const override { return listed_; }
  size_t size() const override { return cand_.size(); }
  const cublasLtMatmulAlgo_t& algo(size_t i) const { return cand_[i]; }
  int rank(size_t i) const { return i < listed_ ? static_cast<int>(i) : -1; }
  void enqueue(size_t i, cudaStream_t s) override {
    mm_.use(cand_[i], rank(i));
    mm_.run(s);
  }
  double output_difference(size_t i, cudaStream_t s) override {
    const LtProblem& p = mm_.problem();
    const size_t elems = static_cast<size_t>(p.m) * static_cast<size_t>(p.n);
    const bool bf16 = p.c_type == CUDA_R_16BF;
    const size_t bytes = elems * (bf16 ? 2 : 4);
    DeviceBuffer ref(bytes);
    // Accumulating (beta != 0): both algorithms start from the same C.
    DeviceBuffer c0(p.beta != 0.f ? bytes : 0);
    if (c0) GS_CUDA(cudaMemcpyAsync(c0.get(), p.c, bytes, cudaMemcpyDeviceToDevice, s));
    const cublasLtMatmulAlgo_t keep = mm_.algo();
    const int keep_rank = mm_.rank();
    mm_.use(cand_[0], rank(0));
    mm_.run(s);
    GS_CUDA(cudaMemcpyAsync(ref.get(), p.c, bytes, cudaMemcpyDeviceToDevice, s));
    if (c0) GS_CUDA(cudaMemcpyAsync(p.c, c0.get(), bytes, cudaMemcpyDeviceToDevice, s));
    mm_.use(cand_[i], rank(i));
    mm_.run(s);
    mm_.use(keep, keep_rank);
    return rel_frobenius_difference(p.c, ref.get(), bf16, elems, s);
  }
  [[noreturn]] void none_ran() const override {
    throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED, "no cuBLASLt candidate ran");
  }

 private:
  LtMatmul& mm_;
  std::vector<cublasLtMatmulAlgo_t> cand_;
  size_t listed_;
};

}  // namespace

std::vector<cublasLtMatmulAlgo_t> lt_searched_configs(const LtMatmul& mm, const std::vector<cublasLtMatmulAlgo_t>& base,
                                                      size_t limit) {
  // The cluster shapes a Hopper or Blackwell kernel uses.
  static const std::vector<uint16_t> kClusters = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                                  CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1,
                                                  CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_1x4x1};
  const cublasLtHandle_t h = mm.handle();
  const LtDescriptors& d = mm.descriptors();
  const LtProblem& p = mm.problem();
  std::vector<LtAlgoCaps> base_caps;
  for (const cublasLtMatmulAlgo_t& b : base) base_caps.push_back(caps_of(b));
  // Every algorithm cuBLASLt has for the problem's types.
  constexpr int kMaxIds = 256;
  std::vector<int> ids(kMaxIds);
  int n_ids = 0;
  if (cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.r.type, p.l.type, p.c_type, p.c_type, kMaxIds,
                               ids.data(), &n_ids) != CUBLAS_STATUS_SUCCESS)
    n_ids = 0;
  std::vector<cublasLtMatmulAlgo_t> others;
  std::vector<LtAlgoCaps> other_caps;
  for (int i = 0; i < std::min(n_ids, kMaxIds); ++i) {
    cublasLtMatmulAlgo_t a{};
    if (cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.r.type, p.l.type, p.c_type, p.c_type,
                               ids[static_cast<size_t>(i)], &a) != CUBLAS_STATUS_SUCCESS)
      continue;
    others.push_back(a);
    other_caps.push_back(caps_of(a));
  }
  std::vector<cublasLtMatmulAlgo_t> out;
  auto known = [&](const cublasLtMatmulAlgo_t& a) {
    auto same = [&](const cublasLtMatmulAlgo_t& b) { return same_algo(a, b); };
    return std::any_of(base.begin(), base.end(), same) || std::any_of(out.begin(), out.end(), same);
  };
  for (const LtSearchGroup& g : lt_search_space(base_caps, other_caps, kClusters)) {
    const size_t cap = g.max_kept >= limit - std::min(limit, out.size()) ? limit : out.size() + g.max_kept;
    for (const LtConfig& c : g.configs) {
      if (out.size() >= cap) break;
      cublasLtMatmulAlgo_t a = c.other ? others[c.source] : base[c.source];
      if (!apply(a, c) || known(a)) continue;
      cublasLtMatmulHeuristicResult_t r{};
      if (cublasLtMatmulAlgoCheck(h, d.desc(), d.a(), d.b(), d.c(), d.c(), &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
      if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > mm.workspace_bytes()) continue;
      out.push_back(a);
    }
  }
  return out;
}

int LtTuner::heuristic_count(const GemmOptions& o) {
  return o.algo == AlgoChoice::Heuristic ? 1 : std::max(o.autotune_k, 1);
}

LtTuner::LtTuner(LtMatmul& mm, const GemmOptions& o)
    : mm_(mm), k_(o.autotune_k), search_(o.algo == AlgoChoice::Search) {
  if (mm.heuristic_count() != heuristic_count(o))
    throw std::logic_error("LtTuner: the matmul asked the heuristic for another number of candidates");
}

AutotuneRecord LtTuner::tune(cudaStream_t s, const std::function<void()>& between) {
  std::vector<cublasLtMatmulAlgo_t> cand = mm_.heuristic();  // asked once, when the matmul was built
  const size_t listed = cand.size();
  if (search_) {
    const std::vector<cublasLtMatmulAlgo_t> more = lt_searched_configs(mm_, cand);
    cand.insert(cand.end(), more.begin(), more.end());
  }
  LtCandidates c(mm_, std::move(cand), listed);
  const cublasLtMatmulAlgo_t keep = mm_.algo();
  const int keep_rank = mm_.rank();
  try {
    TuningOutcome o = run_tuning(c, s, k_, between);
    o.record.heuristic = describe_algo(c.algo(0));
    heuristic_ = c.algo(0);
    tuned_ = c.algo(o.pick);
    tuned_rank_ = c.rank(o.pick);
    mm_.use(tuned_, tuned_rank_);
    return o.record;
  } catch (...) {
    mm_.use(keep, keep_rank);
    throw;
  }
}

bool LtTuner::differs() const { return !same_algo(tuned_, heuristic_); }

void LtTuner::select(bool tuned) {
  if (tuned) mm_.use(tuned_, tuned_rank_);
  else mm_.use(heuristic_, 0);
}

}  // namespace gs::cuda

// cuBLASLt tuning as one component (--algo autotune[:K] and search[:K]; docs/kernels.md):
//  - candidates: the heuristic's top K, which the matmul asked cuBLASLt for once when it was
//    built (heuristic_count), and with search the configurations beyond that list
//    (lt_searched_configs: core/providers/lt_search.hpp's space over the algorithms'
//    capabilities, each kept only where cublasLtMatmulAlgoCheck accepts it);
//  - timed rounds, pick and confirmation: tuner.hpp's run_tuning, under the rules of
//    core/providers/tuning.hpp (a searched pick is kept only if its output is the heuristic's);
//  - the last word of the cell's timed loop (the engine's recheck_in_timed_loop: pick, heuristic,
//    pick), as for any provider's RunTuner (tuner.hpp);
//  - the record (AutotuneRecord, as the JSON writes it; the kept algorithm's AlgoRecord is the
//    matmul's algo_record()).
// LtMatmul keeps the descriptors, the algorithm in use and run().
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "core/providers/lt_search.hpp"
#include "core/results/kernels.hpp"
#include "core/results/results.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/tuner.hpp"

namespace gs::cuda {

class LtTuner final : public RunTuner {
 public:
  // The heuristic candidates a matmul must ask for under these options (LtMatmul's
  // heuristic_count): 1 with --algo heuristic, else K (at least 1).
  static int heuristic_count(const GemmOptions& o);
  // `mm` was built with heuristic_count(o) (std::logic_error otherwise) and outlives the tuner.
  LtTuner(LtMatmul& mm, const GemmOptions& o);
  // Times the candidates on the operands as they are now, `between` enqueued before each timed
  // call (--l2 cold's flush), and leaves the pick in use on the matmul. Synchronizes the stream.
  // Throws CublasError NOT_SUPPORTED when no candidate runs (the matmul keeps its algorithm).
  AutotuneRecord tune(cudaStream_t s, const std::function<void()>& between) override;
  // After tune(): the pick is another algorithm than the heuristic's first choice.
  bool differs() const override;
  // After tune(): run the pick (true) or the heuristic's first choice (false).
  void select(bool tuned) override;

 private:
  LtMatmul& mm_;
  int k_;
  bool search_;
  cublasLtMatmulAlgo_t heuristic_{}, tuned_{};
  int tuned_rank_ = 0;
};

// --algo search: lt_search_space for the matmul's problem, as algorithms: each configuration
// applied to its source algorithm, kept where cuBLASLt accepts it within the workspace and it is
// neither one of `base` nor kept already; at most `limit`, and kLtSearchPerOtherAlgo per other
// algorithm.
std::vector<cublasLtMatmulAlgo_t> lt_searched_configs(const LtMatmul& mm, const std::vector<cublasLtMatmulAlgo_t>& base,
                                                      size_t limit = kLtMaxSearched);

}  // namespace gs::cuda

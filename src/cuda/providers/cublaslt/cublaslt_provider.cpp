// The cuBLASLt provider (provider.hpp): what Transformer Engine and PyTorch run, and the run's
// default. A dense cell is one RecipeGemm (recipe_gemm.hpp: the recipe's quantization work per mode
// around one cuBLASLt matmul) with --algo autotune / search through LtTuner (lt_tuner.hpp); a
// grouped cell is one GroupedGemm (grouped_gemm.hpp: one cuBLASLt GEMM per expert, serial or over
// --grouped streams, the experts' operands quantized in multi-tensor launches), and carries the
// time of the dense GEMM of the experts' summed size beside it (the grouping efficiency).
// cuBLASLt refuses what it cannot run at run time (NOT_SUPPORTED: an N/A cell), so cannot_run()
// adds nothing to the engine's shape rules.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "core/providers/provider.hpp"
#include "core/recipes/modes.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/cublaslt/lt_tuner.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "cuda/providers/provider.hpp"

namespace gs::cuda {

namespace {

class LtDenseRun final : public ProviderRun {
 public:
  LtDenseRun(const EngineResources& res, const Gemm& g, const Recipe& r, Mode mode, GemmSources& src,
             const EngineOptions& o)
      : rg_(res.lt_handle, g, r, src, res.lt_workspace, o.recipe, /*with_gemm=*/true,
            operand_work(mode, g, Side::Left, r, o.recipe), operand_work(mode, g, Side::Right, r, o.recipe),
            /*cache=*/nullptr, o.gemm.num_sms, LtTuner::heuristic_count(o.gemm)) {
    if (o.gemm.algo != AlgoChoice::Heuristic) tuner_.emplace(*rg_.matmul(), o.gemm);
  }
  void prepare(cudaStream_t s) override {
    if (rg_.needs_prequantize()) rg_.prequantize(s);
  }
  void iteration(cudaStream_t s) override { rg_.step(s); }
  int ops() const override { return rg_.step_ops(); }
  std::string config() const override { return fmt::format("cublaslt {}: {}", rg_.layout(), algo().summary()); }
  // The algorithm in use (the pick or the heuristic's choice, after the tuning's last word); no
  // provider name or configuration text: a cuBLASLt cell's record as it always was.
  void describe(CellKernels& k, const char*) const override { k.algo = algo(); }
  RunTuner* tuner() override { return tuner_ ? &*tuner_ : nullptr; }

 private:
  AlgoRecord algo() const { return rg_.matmul()->algo_record(); }
  RecipeGemm rg_;
  std::optional<LtTuner> tuner_;  // --algo autotune / search
};

class LtGroupedRun final : public ProviderRun {
 public:
  LtGroupedRun(const EngineResources& res, GroupedSources& src, Precision p, Mode mode, const EngineOptions& o,
               LtAlgoCache* cache)
      : gg_(res.lt_handle, src, p, mode, o.recipe, std::max(o.grouped_streams, 0), res.stream, res.lt_workspace, cache),
        body_(gg_.body()) {}
  void prepare(cudaStream_t) override { gg_.prepare(); }
  LoopBody body(cudaStream_t) override { return body_; }
  // One whole iteration on the timing stream, synchronized (the kernel records).
  void iteration(cudaStream_t) override { gg_.run_once(); }
  int ops() const override {  // every piece's, as one iteration on one stream
    int n = body_.fork_join_cost;
    for (int i = 0; i < body_.pieces; ++i) n += body_.cost(i);
    return n;
  }
  bool traced() const override { return gg_.streams() <= 1; }
  std::string config() const override {
    return fmt::format("cublaslt: one GEMM per expert, {}", gg_.streams() == 0 ? std::string("serial")
                                                                               : fmt::format("{} streams", gg_.streams()));
  }
  void describe(CellKernels&, const char*) const override {}  // the kernel records say it all

 private:
  GroupedGemm gg_;
  LoopBody body_;  // gg_'s pieces (its experts over its streams), made once
};

class CublasLtProvider final : public GemmProvider {
 public:
  explicit CublasLtProvider(const EngineResources& res) : res_(res) {}
  const char* name() const override { return kProviderCublasLt; }
  std::string cannot_run(const Gemm&, Precision, Mode, const Recipe&, int) const override { return {}; }
  void configure(const EngineOptions& o) override { opts_ = o; }
  std::unique_ptr<ProviderRun> dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, int) override {
    return std::make_unique<LtDenseRun>(res_, g, r, m, src, opts_);
  }
  std::unique_ptr<ProviderRun> grouped(GroupedSources& src, const Recipe& r, Mode m, int) override {
    return std::make_unique<LtGroupedRun>(res_, src, r.precision, m, opts_, &algo_cache_);
  }
  // The experts' quantized copies and one workspace per stream.
  size_t grouped_bytes(const Gemm& g, const std::vector<int64_t>& padded, Precision p, Mode m) const override {
    return GroupedGemm::quantized_bytes(g, padded, p, m) + static_cast<size_t>(std::max(opts_.grouped_streams, 0)) * kWorkspaceBytes;
  }
  bool times_dense_equivalent() const override { return true; }

 private:
  EngineResources res_;
  EngineOptions opts_;
  LtAlgoCache algo_cache_;  // grouped cells: the heuristic asked once per distinct expert problem
};

}  // namespace

std::unique_ptr<GemmProvider> make_cublaslt_provider(const EngineResources& res) {
  return std::make_unique<CublasLtProvider>(res);
}

}  // namespace gs::cuda

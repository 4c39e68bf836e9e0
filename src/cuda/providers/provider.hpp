// Kernel providers in the backend (the provider axis, core/providers/provider.hpp), peers as the
// CUTLASS profiler's library::Provider are: cuBLASLt, CUTLASS and DeepGEMM each implement
// GemmProvider: a name, what it can run (recipe x layout x architecture, with the reason when it
// cannot) and how it runs a dense or a grouped GEMM on the engine's operands (common/operands.hpp),
// one iteration at a time, inside the engine's timed loop. The engine (engine_cuda.cu) owns the
// operands, the shape rules, the memory check, the timed loop, the step context, the clocks, the
// kernel records and the N/A cells, and runs every provider's cell through the same path; a
// provider only builds and launches its kernels, and offers their variants for tuning when it has
// any (ProviderRun::tuner, tuner.hpp).
//
// Every provider is listed once, in make_provider() (provider.cpp), in core/providers/provider.hpp's
// order.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/kernels.hpp"
#include "core/run/engine.hpp"
#include "cuda/common/operands.hpp"
#include "cuda/timing/timed_loop.hpp"

namespace gs::cuda {

class RunTuner;  // tuner.hpp

// One prepared cell: its kernels set up once, then enqueued once per timed iteration.
class ProviderRun {
 public:
  virtual ~ProviderRun() = default;
  // Untimed work on the timing stream `s` once the run is built, before tuning and the timed loop
  // (operands the timed region does not quantize: pre-quantized mode, delayed scaling's history).
  virtual void prepare(cudaStream_t) {}
  // One iteration on stream `s` (every expert of a grouped GEMM).
  virtual void iteration(cudaStream_t s) = 0;
  // Operations one iteration enqueues on `s` (an upper bound; the launch gate's chunking).
  virtual int ops() const = 0;
  // The timed loop's body (timed_loop.hpp): by default one piece, iteration() on `s`. A run whose
  // iteration spreads over several streams gives its pieces.
  virtual LoopBody body(cudaStream_t s);
  // Whether the cell gets kernel records (kernel_trace.hpp, iteration() traced after the timed
  // loop): not where the kernels of one iteration overlap on several streams, so their summed
  // durations compare with nothing in the cell.
  virtual bool traced() const { return true; }
  // The kernel configuration for the cell's record ("cutlass sm90 ptr-array grouped ...").
  virtual std::string config() const = 0;
  // What the cell's kernel record says of the run (core/results/kernels.hpp): by default the
  // provider's name and config(); cuBLASLt's runs record the algorithm (AlgoRecord) instead.
  virtual void describe(CellKernels& k, const char* provider) const {
    k.provider = provider;
    k.config = config();
  }
  // Its candidate kernels for --algo autotune / search, or null when it has one kernel.
  virtual RunTuner* tuner() { return nullptr; }
};

class GemmProvider {
 public:
  virtual ~GemmProvider() = default;
  virtual const char* name() const = 0;  // as core/providers/provider.hpp spells it
  // Why this provider cannot measure `g` in precision `p` and mode `m` on a device of compute
  // capability `cc` ("" when it can). `r` is the recipe of the cell (make_recipe of the GEMM, or of
  // one expert for a grouped GEMM). The engine has already applied the shape rules
  // (cell_shape_problem). The reason is the N/A cell's text: it names the provider.
  virtual std::string cannot_run(const Gemm& g, Precision p, Mode m, const Recipe& r, int cc) const = 0;
  // A dense GEMM on `src` (C written as the recipe says). Throws std::exception for what it cannot
  // do after all (an N/A cell with the message), CudaError for CUDA failures. A provider that
  // quantizes as the cuBLASLt cell does takes the recipe options from configure().
  virtual std::unique_ptr<ProviderRun> dense(const Gemm& g, const Recipe& r, Mode m, GemmSources& src, int device) = 0;
  // A grouped GEMM on `src` (per-expert sizes already padded to the recipe's alignment).
  virtual std::unique_ptr<ProviderRun> grouped(GroupedSources& src, const Recipe& r, Mode m, int device) = 0;
  // Device memory a grouped run of `g` at `padded` takes beyond the sources (the engine's memory
  // check before it builds the run).
  virtual size_t grouped_bytes(const Gemm&, const std::vector<int64_t>& /*padded*/, Precision, Mode) const { return 0; }
  // Whether a grouped cell also carries the time of one dense GEMM of the experts' summed
  // (padded) size through this provider (Cell::dense_equiv_ms: the grouping efficiency).
  virtual bool times_dense_equivalent() const { return false; }
  // The run's options, given once after the provider is made (--num-sms, recipe options, seed).
  virtual void configure(const EngineOptions&) {}
  // Lines for the run's notes about what this provider did beyond the cells (e.g. DeepGEMM's
  // NVRTC compile time and cache hits); empty when it has nothing to add.
  virtual std::vector<std::string> notes() const { return {}; }
};

// What the engine lends its providers: the timing stream and its cuBLASLt handle and workspace
// (the cuBLASLt provider's GEMMs share them with the engine's accuracy reference and power hold).
struct EngineResources {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt_handle = nullptr;
  void* lt_workspace = nullptr;
};

// The provider named `name` (core/providers/provider.hpp's spelling), not yet configured; null for
// a name this build does not list. A provider whose library is absent from the build is still
// made: its cannot_run() says so.
std::unique_ptr<GemmProvider> make_provider(const std::string& name, const EngineResources& res);

// The providers, one by one (each in its own folder under providers/).
std::unique_ptr<GemmProvider> make_cublaslt_provider(const EngineResources& res);  // cublaslt/cublaslt_provider.cpp
std::unique_ptr<GemmProvider> make_cutlass_provider();                             // cutlass/cutlass_provider.cpp
std::unique_ptr<GemmProvider> make_deepgemm_provider();                            // deepgemm/deepgemm_provider.cpp

}  // namespace gs::cuda

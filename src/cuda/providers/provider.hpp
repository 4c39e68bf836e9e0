// Kernel providers in the backend (the provider axis, core/providers/provider.hpp): a provider is a name,
// what it can run (recipe x layout x architecture, with the reason when it cannot) and how it runs
// a dense or a grouped GEMM on the engine's operands, one iteration at a time, inside the engine's
// timed loop (timed_loop.hpp). The engine owns the operands, the memory check, the timed loop, the
// kernel records and the N/A cells; a provider only builds and launches its kernels.
//
// cuBLASLt is the engine's built-in path (engine_cuda.cu: measure(), recipe_gemm, grouped_gemm,
// with its heuristic / autotune / search modes: lt_tuner.hpp) and needs no entry here. A provider
// with kernel variants of its own would tune them through tuner.hpp's Tunable. Every other library
// implements GemmProvider and is listed once, in make_providers() (provider.cpp).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/run/engine.hpp"
#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"

namespace gs::cuda {

struct GemmSources;     // recipe_gemm.hpp: the BF16 operands of a dense GEMM
struct GroupedSources;  // grouped_gemm.hpp: the BF16 operands of a grouped GEMM

// One prepared cell: its kernels set up once, then enqueued once per timed iteration.
class ProviderRun {
 public:
  virtual ~ProviderRun() = default;
  // One iteration on stream `s` (every expert of a grouped GEMM).
  virtual void iteration(cudaStream_t s) = 0;
  // Operations one iteration enqueues on `s` (an upper bound; the launch gate's chunking).
  virtual int ops() const = 0;
  // The kernel configuration for the cell's record ("cutlass sm90 ptr-array grouped ...").
  virtual std::string config() const = 0;
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
  // The run's options, given once after the provider is made (--num-sms, recipe options, seed).
  virtual void configure(const EngineOptions&) {}
  // Lines for the run's notes about what this provider did beyond the cells (e.g. DeepGEMM's
  // NVRTC compile time and cache hits); empty when it has nothing to add.
  virtual std::vector<std::string> notes() const { return {}; }
};

// Every provider this build knows besides cuBLASLt, in core/providers/provider.hpp's order. A provider whose
// library is absent from the build is still listed: its cannot_run() says so.
std::vector<std::unique_ptr<GemmProvider>> make_providers();

// The CUTLASS provider (cutlass_provider.cpp).
std::unique_ptr<GemmProvider> make_cutlass_provider();
// The DeepGEMM provider (deepgemm/deepgemm_provider.cpp).
std::unique_ptr<GemmProvider> make_deepgemm_provider();

}  // namespace gs::cuda

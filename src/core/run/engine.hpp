// The measurement interface. The core drives it (runner.hpp); the CUDA backend implements it.
// Keeping it abstract lets the runner, reports and the CLI be tested with a fake engine.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "core/step/step_kernels.hpp"

namespace gs {

struct EngineOptions {
  TimingConfig timing;
  RecipeOptions recipe;
  uint64_t seed = 1234;
  int device = 0;
  // Grouped GEMMs (MoE experts): per-expert cuBLASLt GEMMs dealt round-robin over this many
  // streams (Transformer Engine's GroupedLinear on Hopper uses 4); 0 = serial on one stream.
  int grouped_streams = 4;
  GemmOptions gemm;  // --algo, --num-sms, kernel tracing, --profile (core/results/kernels.hpp)
  StepWorkModel step_model;  // --step-context: what runs between timed iterations (core/plan/step_model.hpp)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual DeviceInfo device_info() const = 0;
  // Runs BF16 GEMMs for `seconds` so clocks settle before the first measurement.
  virtual void gpu_warmup(double seconds) = 0;
  // Measures one GEMM in one precision and mode through kernel provider `provider`
  // (core/providers/provider.hpp: cuBLASLt, CUTLASS, DeepGEMM, one path for all of them). Returns
  // an N/A cell (never throws) for anything the GPU or the provider cannot run: unsupported
  // shapes, a library's NOT_SUPPORTED, out of memory, a provider this engine does not have.
  virtual Cell measure(const Gemm& g, Precision p, Mode m, const std::string& provider) = 0;
  // The recipe's relative Frobenius error against an FP32 GEMM of the original BF16 operands
  // drawn from `d`. Emulated where the GPU has no kernel for the format. Never throws.
  virtual AccuracyCell accuracy(const Gemm& g, Precision p, Dist d) = 0;
  // One of the step's own kernels (core/step/step_kernels.hpp: optimizer, gradient norm, zero-grad,
  // loss, embedding, launch latency) timed on the GPU. An engine that cannot run it returns an N/A
  // cell saying why. Never throws.
  virtual Cell measure_step_kernel(const StepKernelSpec& spec) {
    return Cell::na(std::string(to_string(spec.kind)) + " is not available in this engine");
  }
  // The step context as it ran (after the cells that used one); nullopt when none did.
  virtual std::optional<StepContextInfo> step_context() const { return std::nullopt; }
  // Notes of the kernel providers that ran cells (e.g. compile time and cache hits of run-time
  // compiled kernels); the runner adds them to the run's notes.
  virtual std::vector<std::string> provider_notes() const { return {}; }
};

// Why no engine could be made when the CUDA runtime cannot count devices (make_engine): without
// the driver library (libcuda.so.1 does not load) the runtime reports "CUDA driver version is
// insufficient for CUDA runtime version", which sends people to upgrade a driver they do not have:
// then "no NVIDIA driver found (libcuda.so.1 cannot be loaded)"; with the driver library, the
// runtime's own message. Pure, so the message is tested on CPU (tests/core/cli/test_first_contact.cpp).
std::string cuda_unavailable_reason(bool driver_library_loads, const std::string& runtime_error);

}  // namespace gs

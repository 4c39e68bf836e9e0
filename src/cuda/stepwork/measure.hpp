// The backend of Engine::measure_step_kernel (core/run/engine.hpp): one of the step's own kernels
// (core/step/step_kernels.hpp) timed as a cell, as the GEMM cells are: the engine's timed loop
// (warm-up, iterations, chunks behind the launch gate, clock samples, statistics) and its kernel
// records. The launch cost alone is timed by the host clock (launch_cost.hpp).
//
// Buffers are sized to the spec's real counts. When they do not fit in the GPU's free memory (an
// 8e9-parameter model's AdamW with FP32 master state needs ~144 GB), the kernel is measured at the
// largest size that fits (fewer parameters in proportionally fewer tensors, or fewer token rows)
// and its times are scaled by the bytes moved (step_kernel_bytes) of the real spec over the
// measured one; the cell's kernel configuration says so ("measured on ..., times scaled by bytes
// x4.02"). A size that would leave the buffers within a few L2 sizes is never used: the cell is
// N/A instead. Memory-bound kernels well above the L2 scale with their bytes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "core/results/results.hpp"
#include "core/step/step_kernels.hpp"
#include "cuda/timing/timed_loop.hpp"

namespace gs::cuda::stepwork {

struct Timing {
  cudaStream_t stream = nullptr;
  int warmup = 10, iters = 100;  // the launch cost's batches
  uint64_t seed = 1234;
  std::function<Cell(const LoopBody&)> timed;                      // the engine's timed loop as a cell
  std::function<CellKernels(const std::function<void()>&)> trace;  // kernel records of a few calls
};

// Never throws for what the GPU refuses (no memory: N/A); a lost context throws std::runtime_error.
Cell measure(const StepKernelSpec& spec, const Timing& t);

// In a scaled cell's kernel configuration, before the factor ("... times scaled by bytes x4.015").
inline constexpr const char* kScaledNote = "times scaled by bytes x";

}  // namespace gs::cuda::stepwork

// Each step kernel of core/step/step_kernels.hpp at a spec's sizes: its device buffers, filled, and
// its pieces (step_run.hpp). The launch cost has no buffers and is timed by the host
// (launch_cost.hpp), not here.
//
// Parameter tensors: the spec gives a count and a total, not each size, so `tensors` tensors of
// equal size (within one value) are laid out one after another in one buffer per list, each
// starting 256-byte aligned. A real model's sizes are uneven (norm weights of a few thousand
// values beside matrices of millions): the launches differ by the few chunks that small tensors
// fill partly, not in the bytes.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/step/step_kernels.hpp"
#include "cuda/stepwork/step_run.hpp"

namespace gs::cuda::stepwork {

// Why `s` cannot be run at all ("" when it can): nothing to do, a shape the kernels refuse.
std::string cannot_run(const StepKernelSpec& s);

// Device bytes the buffers of `s` take.
size_t run_bytes(const StepKernelSpec& s);

// `s` with its size variable (values for the optimizer kinds, token rows for the loss and the
// embedding) scaled by `f` in (0, 1], at least one; the tensor count in proportion.
StepKernelSpec scaled_spec(const StepKernelSpec& s, double f);

// The buffers made and filled (normal-ish values from `seed`) and the kernel ready; synchronizes
// `stream`. Throws CudaError (out of memory: oom()).
std::unique_ptr<StepRun> make_run(const StepKernelSpec& s, cudaStream_t stream, uint64_t seed);

}  // namespace gs::cuda::stepwork

// The host's cost of one kernel launch: an empty kernel launched back to back on a stream, timed
// with the host clock in batches (the stream drained between batches, outside the timing). A
// batch stays far below the stream's ~1000-entry launch queue, so the host never waits for the
// GPU: the time is the launch call's own (cudaLaunchKernel through the runtime and driver), what an
// eager framework pays per kernel before the GPU sees it.
#pragma once
#include <cuda_runtime.h>

#include <vector>

namespace gs::cuda::stepwork {

constexpr int kLaunchBatch = 200;

// ms per launch, one sample per batch of kLaunchBatch launches; `warmup` batches untimed first.
std::vector<double> launch_cost_ms(cudaStream_t s, int warmup, int batches);

}  // namespace gs::cuda::stepwork

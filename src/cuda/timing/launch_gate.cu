#include "cuda/common/cuda_check.hpp"
#include "cuda/timing/launch_gate.hpp"

namespace gs::cuda {

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until ticket `t` is released (flags[0] >= t, in wrap-around arithmetic) or the timeout.
__global__ void gate_kernel(volatile uint32_t* flags, uint32_t t, unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (static_cast<int32_t>(flags[0] - t) < 0) {
    if (global_ns() - start > timeout_ns) {
      if (static_cast<int32_t>(flags[1] - t) < 0) flags[1] = t;
      break;
    }
    __nanosleep(256);
  }
}

}  // namespace

LaunchGate::LaunchGate() {
  void* p = nullptr;
  GS_CUDA(cudaHostAlloc(&p, 2 * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  flags_ = static_cast<volatile uint32_t*>(p);
  flags_[0] = flags_[1] = 0;
}

LaunchGate::~LaunchGate() {
  if (flags_) cudaFreeHost(const_cast<uint32_t*>(flags_));
}

uint32_t LaunchGate::close(cudaStream_t s, double timeout_ms) {
  const uint32_t t = last_ + 1;
  // Mapped pinned memory under unified addressing: the host pointer is valid on the device.
  gate_kernel<<<1, 1, 0, s>>>(flags_, t, static_cast<unsigned long long>(timeout_ms * 1e6));
  GS_CUDA_LAUNCH();
  last_ = t;
  return t;
}

void LaunchGate::release() {
  __atomic_store_n(const_cast<uint32_t*>(flags_), last_, __ATOMIC_SEQ_CST);
}

bool LaunchGate::timed_out_since(uint32_t first) const {
  const uint32_t hi = flags_[1];
  return hi != 0 && static_cast<int32_t>(hi - first) >= 0;
}

}  // namespace gs::cuda

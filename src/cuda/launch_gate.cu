#include "cuda/cuda_check.hpp"
#include "cuda/launch_gate.hpp"

namespace gs::cuda {

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gate_kernel(volatile int* flags, unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flags[1] = 1;
      break;
    }
    __nanosleep(256);
  }
}

}  // namespace

LaunchGate::LaunchGate() {
  void* p = nullptr;
  GS_CUDA(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  flags_ = static_cast<volatile int*>(p);
  flags_[0] = flags_[1] = 0;
}

LaunchGate::~LaunchGate() {
  if (flags_) cudaFreeHost(const_cast<int*>(flags_));
}

void LaunchGate::close(cudaStream_t s, double timeout_ms) {
  flags_[0] = 0;
  flags_[1] = 0;
  // Mapped pinned memory under unified addressing: the host pointer is valid on the device.
  gate_kernel<<<1, 1, 0, s>>>(flags_, static_cast<unsigned long long>(timeout_ms * 1e6));
  GS_CUDA_LAUNCH();
}

void LaunchGate::release() {
  __atomic_store_n(const_cast<int*>(flags_), 1, __ATOMIC_SEQ_CST);
}

bool LaunchGate::timed_out() const { return flags_[1] != 0; }

}  // namespace gs::cuda

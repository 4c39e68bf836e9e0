// Shared helpers for GPU tests. Every GPU test starts with GS_REQUIRE_GPU(), which skips the
// test with a message on a machine without a usable CUDA GPU (the CPU-only CI machine).
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace gs::test {

// Empty string when a GPU is usable, else the reason it is not.
inline std::string gpu_unavailable_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (") + cudaGetErrorName(e) + ")";
  }
  if (n == 0) return "no CUDA device";
  return {};
}

inline int compute_capability() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 0;
  return p.major * 10 + p.minor;
}

}  // namespace gs::test

// GS_EXPECT_GPU=1 (set by bench/run_all.sh on GPU nodes) turns the skip into a failure, so a
// node whose driver or device is broken cannot pass the GPU tests by skipping them.
#define GS_REQUIRE_GPU()                                                         \
  do {                                                                           \
    std::string gs_why_ = ::gs::test::gpu_unavailable_reason();                  \
    if (!gs_why_.empty()) {                                                      \
      const char* gs_expect_ = std::getenv("GS_EXPECT_GPU");                     \
      if (gs_expect_ && std::string(gs_expect_) == "1")                          \
        FAIL() << "GS_EXPECT_GPU=1 but " << gs_why_;                             \
      GTEST_SKIP() << "GPU test skipped: " << gs_why_;                           \
    }                                                                            \
  } while (0)

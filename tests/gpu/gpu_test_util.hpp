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

// GS_EXPECT_GPU=1: the suite runs on a GPU node that is expected to have everything this build
// carries (bench/run_all.sh sets it).
inline bool gpu_expected() {
  const char* e = std::getenv("GS_EXPECT_GPU");
  return e && std::string(e) == "1";
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
      if (::gs::test::gpu_expected()) FAIL() << "GS_EXPECT_GPU=1 but " << gs_why_; \
      GTEST_SKIP() << "GPU test skipped: " << gs_why_;                           \
    }                                                                            \
  } while (0)

// A feature this build carries whose optional run-time library or hardware is missing here (`why`,
// "" when it is there): skipped with the reason, a failure under GS_EXPECT_GPU=1. A feature the
// build does not carry skips with GTEST_SKIP directly, saying so; a feature that is there and
// fails is a failure (ASSERT/FAIL), never a skip.
#define GS_REQUIRE_RUNTIME(why)                                                  \
  do {                                                                           \
    std::string gs_rt_why_ = (why);                                              \
    if (!gs_rt_why_.empty()) {                                                   \
      if (::gs::test::gpu_expected()) FAIL() << "GS_EXPECT_GPU=1 but " << gs_rt_why_; \
      GTEST_SKIP() << gs_rt_why_;                                                \
    }                                                                            \
  } while (0)

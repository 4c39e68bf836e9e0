// What the CUTLASS GPU tests share: the skip rule and host copies of device outputs.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/formats/formats.hpp"
#include "core/gpu/arch_policy.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/common/device_buffer.hpp"
#include "gpu_test_util.hpp"

// Skips (with the reason) where the provider cannot run: no GPU, a build without CUTLASS, a device
// its kernels are not built for (core/gpu/arch_policy.hpp kernel_target).
#define GS_REQUIRE_CUTLASS()                                                                        \
  do {                                                                                              \
    GS_REQUIRE_GPU();                                                                               \
    if (!gs::cuda::cutlass_built()) GTEST_SKIP() << "built without CUTLASS (GEMMSCOPE_CUTLASS_DIR)"; \
    if (!gs::ArchPolicy(gs::test::compute_capability()).kernel_target())                            \
      GTEST_SKIP() << "the CUTLASS kernels are built for " << gs::ArchPolicy::arch_kernels_target().arch << " only"; \
  } while (0)

namespace gs::test {

inline std::vector<double> to_double(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = gs::nf::bf16_to_float(v[i]);
  return out;
}

inline std::vector<float> to_host_f32(const cuda::DeviceBuffer& b) {
  std::vector<float> h(b.bytes() / 4);
  GS_CUDA(cudaMemcpy(h.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace gs::test

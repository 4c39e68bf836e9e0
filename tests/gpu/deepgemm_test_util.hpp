// What the DeepGEMM GPU tests share: the rule for when they run.
#pragma once
#include <string>

#include "core/gpu/arch_policy.hpp"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/providers/deepgemm/embedded_headers.hpp"
#include "gpu_test_util.hpp"

// Skips where DeepGEMM is genuinely absent, saying which: no GPU, a build without its headers
// ("not built"), a device its kernels are not built for (the hardware: ArchPolicy's kernel
// target); skips with the reason where an optional run-time part is missing (NVRTC, the toolkit
// headers, the driver's entry points), which GS_EXPECT_GPU=1 makes a failure. Past this, a
// DeepGEMM that fails is a failure.
#define GS_REQUIRE_DEEPGEMM()                                                                            \
  do {                                                                                                   \
    GS_REQUIRE_GPU();                                                                                    \
    int gs_dg_count_ = 0;                                                                                \
    gs::dg::embedded_headers(gs_dg_count_);                                                              \
    if (gs_dg_count_ == 0) GTEST_SKIP() << "not built: " << gs::dg::Runtime::get().unavailable_reason(); \
    if (!gs::ArchPolicy(gs::test::compute_capability()).kernel_target())                                 \
      GTEST_SKIP() << "DeepGEMM's kernels are built for " << gs::ArchPolicy::arch_kernels_target().arch  \
                   << " only; this device is sm_" << gs::test::compute_capability();                    \
    GS_REQUIRE_RUNTIME(gs::dg::Runtime::get().unavailable_reason());                                     \
  } while (0)

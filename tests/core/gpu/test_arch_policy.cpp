// The architecture policy (core/gpu/arch_policy.hpp): each rule at the boundaries that matter.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/gpu/arch_policy.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/plan/step_model.hpp"

using gs::ArchPolicy;
using gs::PeakFormat;
using gs::Precision;

TEST(ArchPolicy, WhichRecipesEachArchitectureTimes) {
  const ArchPolicy a100(80), l40(89), h100(90), b200(100), rtx50(120);
  EXPECT_TRUE(a100.times(Precision::BF16));
  EXPECT_FALSE(a100.times(Precision::FP8Current));
  EXPECT_TRUE(l40.times(Precision::FP8Delayed));
  EXPECT_FALSE(l40.times(Precision::FP8Block));
  EXPECT_TRUE(h100.times(Precision::FP8Block));
  EXPECT_FALSE(h100.times(Precision::MXFP8));
  EXPECT_FALSE(h100.times(Precision::NVFP4));
  EXPECT_TRUE(b200.times(Precision::NVFP4));
  EXPECT_TRUE(rtx50.times(Precision::MXFP8));
  EXPECT_EQ(h100.why_not(Precision::FP8Block), "");
  EXPECT_EQ(l40.why_not(Precision::FP8Block), "needs compute capability >= 9.0 (device is 8.9)");
  EXPECT_EQ(ArchPolicy(121).cc_text(), "12.1");
}

TEST(ArchPolicy, BlockFp8RunsAsMxfp8OnBlackwellAndItsPeakFollows) {
  EXPECT_FALSE(ArchPolicy(90).fp8_block_via_mxfp8());
  EXPECT_TRUE(ArchPolicy(100).fp8_block_via_mxfp8());
  EXPECT_EQ(ArchPolicy(90).peak_format(Precision::FP8Block), PeakFormat::FP8);
  EXPECT_EQ(ArchPolicy(100).peak_format(Precision::FP8Block), PeakFormat::MXFP8);
  EXPECT_EQ(ArchPolicy(90).peak_format(Precision::FP8Current), PeakFormat::FP8);
  EXPECT_EQ(ArchPolicy(100).peak_format(Precision::NVFP4), PeakFormat::NVFP4);
  EXPECT_EQ(ArchPolicy(80).peak_format(Precision::BF16), PeakFormat::BF16);
}

TEST(ArchPolicy, ProvidersAndComputeModel) {
  // The architecture-specific kernels (CUTLASS's, DeepGEMM's) run on their target's compute
  // capability only: not on Ada below it, not on Blackwell above it.
  ASSERT_TRUE(ArchPolicy(90).kernel_target().has_value());
  EXPECT_EQ(ArchPolicy(90).kernel_target()->arch, "sm_90a");
  EXPECT_EQ(ArchPolicy(90).kernel_target()->nvrtc_arch_option(), "--gpu-architecture=sm_90a");
  EXPECT_EQ(ArchPolicy(90).kernel_target()->cutlass_tag, "cutlass::arch::Sm90");
  EXPECT_FALSE(ArchPolicy(89).kernel_target().has_value());
  EXPECT_FALSE(ArchPolicy(100).kernel_target().has_value());
  EXPECT_TRUE(ArchPolicy(ArchPolicy::arch_kernels_target().cc).runs_code_built_for(ArchPolicy::arch_kernels_target().cmake_arch));
  EXPECT_EQ(ArchPolicy(90).bf16_dense_flops_per_sm_clock(), 4096);
  EXPECT_EQ(ArchPolicy(100).bf16_dense_flops_per_sm_clock(), 8192);
  EXPECT_EQ(ArchPolicy(80).bf16_dense_flops_per_sm_clock(), 2048);
  EXPECT_EQ(ArchPolicy(89).bf16_dense_flops_per_sm_clock(), 1024);
  EXPECT_FALSE(ArchPolicy(90).may_convert_fp4_in_hardware());
  EXPECT_TRUE(ArchPolicy(100).may_convert_fp4_in_hardware());
}

// The datasheet side asks the same policy: a GPU spec's arch_policy() is its compute capability's.
TEST(ArchPolicy, GpuSpecAndDeviceAskTheSamePolicy) {
  gs::GpuSpec s;
  s.key = "X";
  s.cc_major = 8, s.cc_minor = 9;
  EXPECT_EQ(s.arch_policy().cc(), 89);
  EXPECT_NE(gs::cannot_run(s, Precision::FP8Block).find("needs compute capability 9.0; X is 8.9"), std::string::npos);
}

// Flash attention's share of the BF16 peak: cuDNN's fused kernel on Hopper and later (the step
// context's constant), FlashAttention-2 lower on Hopper (no wgmma), both alike on Ampere.
TEST(ArchPolicy, FlashAttentionFraction) {
  EXPECT_DOUBLE_EQ(ArchPolicy(90).flash_attention_peak_fraction(true), gs::kAttentionPeakFraction);
  EXPECT_LT(ArchPolicy(90).flash_attention_peak_fraction(false), ArchPolicy(90).flash_attention_peak_fraction(true));
  EXPECT_DOUBLE_EQ(ArchPolicy(80).flash_attention_peak_fraction(false), ArchPolicy(80).flash_attention_peak_fraction(true));
  EXPECT_GT(ArchPolicy(80).flash_attention_peak_fraction(false), ArchPolicy(90).flash_attention_peak_fraction(false));
}

// Which devices run code built for a CMake architecture: machine code on its major (minor at least
// its own), architecture-specific code on exactly its compute capability, PTX on it and newer.
TEST(ArchPolicy, WhatABuildsArchitecturesRunOn) {
  EXPECT_TRUE(ArchPolicy(90).runs_code_built_for("90-real"));
  EXPECT_FALSE(ArchPolicy(100).runs_code_built_for("90-real"));
  EXPECT_FALSE(ArchPolicy(89).runs_code_built_for("90-real"));
  EXPECT_TRUE(ArchPolicy(89).runs_code_built_for("80-real"));  // sm_80 cubins run on 8.6 and 8.9
  EXPECT_FALSE(ArchPolicy(90).runs_code_built_for("80-real"));
  EXPECT_TRUE(ArchPolicy(100).runs_code_built_for("90-virtual"));  // PTX, JIT-compiled by the driver
  EXPECT_FALSE(ArchPolicy(89).runs_code_built_for("90-virtual"));
  EXPECT_TRUE(ArchPolicy(120).runs_code_built_for("90"));  // a bare number: machine code and PTX
  EXPECT_TRUE(ArchPolicy(90).runs_code_built_for("90a-real"));
  EXPECT_FALSE(ArchPolicy(100).runs_code_built_for("90a-real"));  // architecture-specific: 9.0 only
  EXPECT_TRUE(ArchPolicy(103).runs_code_built_for("100f-real"));
  EXPECT_FALSE(ArchPolicy(110).runs_code_built_for("100f-real"));
  for (const char* bad : {"", "native", "90-fast", "sm_90", "9", "1000-real"}) EXPECT_FALSE(ArchPolicy(90).runs_code_built_for(bad)) << bad;
}

// predict compares two recipes' formats on the newest architecture, where every recipe runs in its
// own tensor-core format.
TEST(ArchPolicy, TheNewestArchitectureRunsEveryFormat) {
  for (Precision p : gs::kAllPrecisions) EXPECT_TRUE(ArchPolicy::newest().times(p)) << gs::to_string(p);
  EXPECT_EQ(ArchPolicy::newest().peak_format(Precision::FP8Block), PeakFormat::MXFP8);
}

namespace {
std::string slurp_source(const char* rel) {
  std::ifstream in(std::string(GS_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

// The CUTLASS units are built for the policy's kernel target: CMake's architecture for their
// object library and the CUTLASS arch tag of their one arch header are the policy's.
TEST(ArchPolicy, TheCutlassBuildUsesThePolicysKernelTarget) {
  const gs::KernelTarget& t = ArchPolicy::arch_kernels_target();
  const std::string cmake = slurp_source("CMakeLists.txt");
  const std::string needle = "gemmscope_cuda_cutlass PROPERTIES CUDA_ARCHITECTURES \"" + t.cmake_arch + "\"";
  EXPECT_NE(cmake.find(needle), std::string::npos) << needle;
  const std::string arch = slurp_source("src/cuda/providers/cutlass/kernels/cutlass_arch.cuh");
  EXPECT_NE(arch.find("using ArchTag = " + t.cutlass_tag + ";"), std::string::npos);
  const std::string kernel = slurp_source("src/cuda/providers/cutlass/kernels/grouped_kernel.cuh");
  EXPECT_EQ(kernel.find("cutlass::arch::Sm"), std::string::npos) << "an architecture tag outside cutlass_arch.cuh";
}

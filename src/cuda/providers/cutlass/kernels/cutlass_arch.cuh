// The architecture tag every CUTLASS instantiation is built with: a compile-time constant, in this
// one header. It is the CUTLASS tag of ArchPolicy::arch_kernels_target() (core/gpu/arch_policy.hpp),
// whose CMake architecture builds these units (CMakeLists.txt, the CUTLASS object library);
// tests/core/gpu/test_arch_policy.cpp checks that this header and CMakeLists.txt name the policy's.
#pragma once
#include "cutlass/arch/arch.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"

namespace gs::cuda::cutlass_kernels {

using ArchTag = cutlass::arch::Sm90;

// The blockwise scale layout of that architecture's FP8 block-scaled kernels (1 x SFN x SFK
// blocks; the majors of A's and B's scale factors).
template <int SFM, int SFN, int SFK, cute::GMMA::Major MajorSFA, cute::GMMA::Major MajorSFB>
using BlockwiseScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<SFM, SFN, SFK, MajorSFA, MajorSFB>;

}  // namespace gs::cuda::cutlass_kernels

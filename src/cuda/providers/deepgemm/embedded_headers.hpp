// The DeepGEMM and CUTLASS/CuTe headers the provider's kernels include, embedded at build time
// (cmake/embed_deepgemm.cmake) so the binary compiles them with NVRTC on a node without them.
#pragma once
#include <cstddef>

namespace gs::dg {

struct EmbeddedHeader {
  const char* name;   // include name, e.g. "deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh"
  const char* text;   // NUL-terminated contents
  size_t size;
};

// Empty (count 0) when the build had no DeepGEMM sources (GEMMSCOPE_DEEPGEMM_DIR unset/absent).
const EmbeddedHeader* embedded_headers(int& count);
const char* embedded_deepgemm_commit();

}  // namespace gs::dg

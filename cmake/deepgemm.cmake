# DeepGEMM provider (src/cuda/providers/deepgemm): NVRTC-compiled DeepGEMM kernels. Included from the CUDA
# backend block of CMakeLists.txt after gemmscope_cuda exists.
# GEMMSCOPE_DEEPGEMM_DIR / GEMMSCOPE_CUTLASS_DIR (CMake or environment variables) point at a
# DeepGEMM checkout and CUTLASS 4.2.1; default ../shared/third_party/. Their headers are embedded
# into the binary at build time; without them the provider builds and reports itself unavailable.
set(_dg_default "${CMAKE_SOURCE_DIR}/../shared/third_party/deepgemm-54e2261")
set(_cl_default "${CMAKE_SOURCE_DIR}/../shared/third_party/cutlass-4.2.1")
if(NOT GEMMSCOPE_DEEPGEMM_DIR AND DEFINED ENV{GEMMSCOPE_DEEPGEMM_DIR})
  set(GEMMSCOPE_DEEPGEMM_DIR "$ENV{GEMMSCOPE_DEEPGEMM_DIR}")
endif()
if(NOT GEMMSCOPE_CUTLASS_DIR AND DEFINED ENV{GEMMSCOPE_CUTLASS_DIR})
  set(GEMMSCOPE_CUTLASS_DIR "$ENV{GEMMSCOPE_CUTLASS_DIR}")
endif()
if(NOT GEMMSCOPE_DEEPGEMM_DIR AND EXISTS "${_dg_default}")
  get_filename_component(GEMMSCOPE_DEEPGEMM_DIR "${_dg_default}" ABSOLUTE)
endif()
if(NOT GEMMSCOPE_CUTLASS_DIR AND EXISTS "${_cl_default}")
  get_filename_component(GEMMSCOPE_CUTLASS_DIR "${_cl_default}" ABSOLUTE)
endif()
set(GEMMSCOPE_DEEPGEMM_DIR "${GEMMSCOPE_DEEPGEMM_DIR}" CACHE PATH "DeepGEMM checkout (deep_gemm/include)")
set(GEMMSCOPE_CUTLASS_DIR "${GEMMSCOPE_CUTLASS_DIR}" CACHE PATH "CUTLASS checkout (include/cute, include/cutlass)")

file(GLOB GS_DG_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/providers/deepgemm/*.cpp ${CMAKE_SOURCE_DIR}/src/cuda/providers/deepgemm/*.cu)
set(_dg_gen "${CMAKE_BINARY_DIR}/generated/deepgemm_embedded.cpp")
set(_dg_roots "deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh,deep_gemm/impls/sm90_fp8_gemm_1d1d.cuh,deep_gemm/impls/sm90_bf16_gemm.cuh")
if(GEMMSCOPE_DEEPGEMM_DIR AND GEMMSCOPE_CUTLASS_DIR
   AND EXISTS "${GEMMSCOPE_DEEPGEMM_DIR}/deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh"
   AND EXISTS "${GEMMSCOPE_CUTLASS_DIR}/include/cute/config.hpp")
  # The commit names the headers in the JIT cache key: from git if it is a checkout, else from a
  # folder named deepgemm-<commit>, else set GEMMSCOPE_DEEPGEMM_COMMIT.
  if(NOT GEMMSCOPE_DEEPGEMM_COMMIT)
    execute_process(COMMAND git -C "${GEMMSCOPE_DEEPGEMM_DIR}" rev-parse --short=7 HEAD
                    OUTPUT_VARIABLE _dg_commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _dg_git)
    if(NOT _dg_git EQUAL 0 OR NOT _dg_commit)
      get_filename_component(_dg_name "${GEMMSCOPE_DEEPGEMM_DIR}" NAME)
      if(_dg_name MATCHES "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]+)$")
        set(_dg_commit "${CMAKE_MATCH_1}")
      else()
        set(_dg_commit "unknown")
      endif()
    endif()
    set(GEMMSCOPE_DEEPGEMM_COMMIT "${_dg_commit}")
  endif()
  file(GLOB_RECURSE _dg_headers "${GEMMSCOPE_DEEPGEMM_DIR}/deep_gemm/include/*.cuh")
  add_custom_command(OUTPUT "${_dg_gen}"
    COMMAND ${CMAKE_COMMAND} -DDG_DIR=${GEMMSCOPE_DEEPGEMM_DIR} -DCUTLASS_DIR=${GEMMSCOPE_CUTLASS_DIR}
            "-DROOTS=${_dg_roots}" -DOUT=${_dg_gen} -DCOMMIT=${GEMMSCOPE_DEEPGEMM_COMMIT}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_deepgemm.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/cmake/embed_deepgemm.cmake ${_dg_headers}
    VERBATIM
    COMMENT "Embedding DeepGEMM ${GEMMSCOPE_DEEPGEMM_COMMIT} and CUTLASS headers for NVRTC")
  message(STATUS "gemmscope: DeepGEMM provider from ${GEMMSCOPE_DEEPGEMM_DIR} (${GEMMSCOPE_DEEPGEMM_COMMIT}), CuTe from ${GEMMSCOPE_CUTLASS_DIR}")
else()
  file(WRITE "${_dg_gen}.in"
    "// Generated: no DeepGEMM headers at build time.\n#include \"cuda/providers/deepgemm/embedded_headers.hpp\"\n"
    "namespace gs::dg {\nconst EmbeddedHeader* embedded_headers(int& count) { count = 0; return nullptr; }\n"
    "const char* embedded_deepgemm_commit() { return \"none\"; }\n}\n")
  configure_file("${_dg_gen}.in" "${_dg_gen}" COPYONLY)
  message(STATUS "gemmscope: no DeepGEMM/CUTLASS headers (set GEMMSCOPE_DEEPGEMM_DIR, GEMMSCOPE_CUTLASS_DIR); the DeepGEMM provider will say it is unavailable")
endif()
target_sources(gemmscope_cuda PRIVATE ${GS_DG_SRC} "${_dg_gen}")

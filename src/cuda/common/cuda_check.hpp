// Error handling for the CUDA backend: every runtime and cuBLASLt call goes through these.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gs::cuda {

// Thrown for any CUDA runtime failure. `oom` marks allocation failures so a runner can turn
// them into an N/A cell and continue.
struct CudaError : std::runtime_error {
  cudaError_t code;
  CudaError(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
  bool oom() const { return code == cudaErrorMemoryAllocation; }
};

// Thrown for a cuBLASLt failure; NOT_SUPPORTED is an expected outcome (an N/A cell).
struct CublasError : std::runtime_error {
  cublasStatus_t status;
  CublasError(cublasStatus_t s, const std::string& what) : std::runtime_error(what), status(s) {}
  bool not_supported() const { return status == CUBLAS_STATUS_NOT_SUPPORTED; }
};

const char* cublas_status_name(cublasStatus_t s);

// A sticky CUDA error (illegal address, launch failure, ...) poisons the context: every later
// cell would be an error too. After a CudaError `what` during `where`, this synchronizes the device
// and, when it reports an error, throws std::runtime_error naming both (the run stops with the
// cause instead of reporting N/A cells); otherwise it returns.
void throw_if_context_lost(const std::string& what, const std::string& where);

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line);

}  // namespace gs::cuda

#define GS_CUDA(expr)                                                          \
  do {                                                                         \
    cudaError_t gs_e_ = (expr);                                                \
    if (gs_e_ != cudaSuccess) ::gs::cuda::throw_cuda(gs_e_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define GS_CUDA_LAUNCH() GS_CUDA(cudaGetLastError())

#define GS_CUBLAS(expr)                                                        \
  do {                                                                         \
    cublasStatus_t gs_s_ = (expr);                                             \
    if (gs_s_ != CUBLAS_STATUS_SUCCESS) ::gs::cuda::throw_cublas(gs_s_, #expr, __FILE__, __LINE__); \
  } while (0)

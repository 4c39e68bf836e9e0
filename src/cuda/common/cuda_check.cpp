#include "cuda/common/cuda_check.hpp"

#include <fmt/format.h>

#include <string>

namespace gs::cuda {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "LICENSE_ERROR";
    default: return "UNKNOWN";
  }
}

void throw_if_context_lost(const std::string& what, const std::string& where) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return;
  throw std::runtime_error(fmt::format("the GPU reported an unrecoverable error during {} ({}; then {}); "
                                       "no further measurement is possible in this process",
                                       where, what, cudaGetErrorString(e)));
}

void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  throw CudaError(e, std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ") in " +
                         expr + " at " + file + ":" + std::to_string(line));
}

void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw CublasError(s, std::string("cuBLASLt ") + cublas_status_name(s) + " in " + expr + " at " +
                           file + ":" + std::to_string(line));
}

}  // namespace gs::cuda

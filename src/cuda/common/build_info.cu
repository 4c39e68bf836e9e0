#include "cuda/common/build_info.hpp"

#include <cuda_runtime.h>

#include <sstream>

#ifndef GEMMSCOPE_CUDA_ARCHS
#define GEMMSCOPE_CUDA_ARCHS ""
#endif

namespace gs::cuda {

namespace {
__global__ void probe_kernel(int* x) {
  if (x) *x = 1;
}
}  // namespace

std::vector<std::string> built_cuda_architectures() {
  std::vector<std::string> out;
  std::istringstream in(GEMMSCOPE_CUDA_ARCHS);  // space-separated (CMakeLists.txt)
  for (std::string a; in >> a;) out.push_back(a);
  return out;
}

int loaded_kernel_architecture(int device, std::string& why) {
  int current = 0;
  cudaGetDevice(&current);
  cudaError_t e = cudaSetDevice(device);
  cudaFuncAttributes attr{};
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, probe_kernel);
  cudaSetDevice(current);
  if (e != cudaSuccess) {
    why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return 0;
  }
  return attr.binaryVersion;
}

}  // namespace gs::cuda

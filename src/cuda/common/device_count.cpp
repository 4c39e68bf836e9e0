// visible_device_count (device_count.hpp).
#include "cuda/common/device_count.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include "core/run/engine.hpp"

namespace gs::cuda {

int visible_device_count(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0) why = "no CUDA device is visible";
  return n;
}

std::string device_unavailable_reason(int device) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    // Without the driver library the runtime says "driver version is insufficient", which sends
    // people to upgrade a driver they do not have: ask the loader first (core/run/engine.hpp).
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    std::string why = cuda_unavailable_reason(libcuda != nullptr, cudaGetErrorString(e));
    if (libcuda) dlclose(libcuda);
    cudaGetLastError();
    return why;
  }
  if (n == 0) return "no CUDA device found";
  if (device < 0 || device >= n) return fmt::format("--device {} does not exist ({} device(s))", device, n);
  return {};
}

}  // namespace gs::cuda

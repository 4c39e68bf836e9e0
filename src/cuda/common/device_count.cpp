// visible_device_count (device_count.hpp).
#include "cuda/common/device_count.hpp"

#include <cuda_runtime.h>

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

}  // namespace gs::cuda

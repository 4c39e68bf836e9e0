// What this build of the backend carries for the GPU, so that a test checks the build against the
// device (tests/gpu/test_device_smoke.cpp) rather than the device against a fixed expectation.
#pragma once
#include <string>
#include <vector>

namespace gs::cuda {

// The CUDA architectures the backend was built for, as CMake named them (CMAKE_CUDA_ARCHITECTURES:
// "90-real", "80-real", "90-virtual", ...; ArchPolicy::runs_code_built_for reads them).
std::vector<std::string> built_cuda_architectures();

// The architecture (major * 10 + minor) of the code the CUDA runtime loads for one of the
// backend's kernels on `device`: the machine code it carries for the device, or the device's own
// when it JIT-compiles the PTX it carries. 0 with `why` when the binary carries nothing the device
// runs (cudaErrorNoKernelImageForDevice) or the runtime fails.
int loaded_kernel_architecture(int device, std::string& why);

}  // namespace gs::cuda

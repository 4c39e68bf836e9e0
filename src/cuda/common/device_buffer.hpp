// RAII device allocation, freed on the device it was allocated on (the caller's current device is
// restored, as cuda_handles.hpp's handles do), so buffers of several GPUs may live side by side.
// Allocation failures throw CudaError (oom() == true). view() wraps memory owned elsewhere (a slice
// of a larger buffer) and frees nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (!bytes) return;
    GS_CUDA(cudaGetDevice(&device_));
    GS_CUDA(cudaMalloc(&ptr_, bytes));
  }
  static DeviceBuffer view(void* p, size_t bytes) {
    DeviceBuffer b;
    b.ptr_ = p;
    b.bytes_ = bytes;
    b.owns_ = false;
    return b;
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        owns_(std::exchange(o.owns_, true)),
        device_(o.device_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      owns_ = std::exchange(o.owns_, true);
      device_ = o.device_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void release() {
    if (!ptr_ || !owns_) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device_) cudaSetDevice(device_);
    cudaFree(ptr_);
    if (current != device_ && current >= 0) cudaSetDevice(current);
    ptr_ = nullptr;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool owns_ = true;
  int device_ = 0;  // where it was allocated
};

}  // namespace gs::cuda

// RAII device allocation. Allocation failures throw CudaError (oom() == true). view() wraps
// memory owned elsewhere (a slice of a larger buffer) and frees nothing.
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
    if (bytes) GS_CUDA(cudaMalloc(&ptr_, bytes));
  }
  static DeviceBuffer view(void* p, size_t bytes) {
    DeviceBuffer b;
    b.ptr_ = p;
    b.bytes_ = bytes;
    b.owns_ = false;
    return b;
  }
  ~DeviceBuffer() { if (ptr_ && owns_) cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), owns_(std::exchange(o.owns_, true)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_ && owns_) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      owns_ = std::exchange(o.owns_, true);
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
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool owns_ = true;
};

}  // namespace gs::cuda

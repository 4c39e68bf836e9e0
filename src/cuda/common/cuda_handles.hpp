// Owning handles for CUDA streams and events and cuBLASLt handles: each is released by its
// destructor, on the device it was created on (the caller's current device is restored), so an
// exception between creation and release leaks nothing. Move-only; a handle converts to the raw
// type for the CUDA and cuBLASLt calls that take it.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <utility>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda {

template <class T, void (*Destroy)(T)>
class CudaHandle {
 public:
  CudaHandle() = default;
  // Takes `h`, created on the current device.
  explicit CudaHandle(T h) : h_(h) { cudaGetDevice(&device_); }
  ~CudaHandle() { reset(); }
  CudaHandle(CudaHandle&& o) noexcept : h_(std::exchange(o.h_, T{})), device_(o.device_) {}
  CudaHandle& operator=(CudaHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
      device_ = o.device_;
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;

  T get() const { return h_; }
  operator T() const { return h_; }  // NOLINT: passed straight to CUDA calls
  explicit operator bool() const { return h_ != T{}; }

  void reset() {
    if (h_ == T{}) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device_) cudaSetDevice(device_);
    Destroy(h_);
    if (current != device_ && current >= 0) cudaSetDevice(current);
    h_ = T{};
  }

 private:
  T h_{};
  int device_ = 0;
};

namespace handle_detail {
inline void destroy_stream(cudaStream_t s) { cudaStreamDestroy(s); }
inline void destroy_event(cudaEvent_t e) { cudaEventDestroy(e); }
inline void destroy_lt(cublasLtHandle_t h) { cublasLtDestroy(h); }
}  // namespace handle_detail

using Stream = CudaHandle<cudaStream_t, handle_detail::destroy_stream>;
using Event = CudaHandle<cudaEvent_t, handle_detail::destroy_event>;
using LtHandle = CudaHandle<cublasLtHandle_t, handle_detail::destroy_lt>;

// A non-blocking stream on the current device. Throws CudaError.
inline Stream make_stream() {
  cudaStream_t s = nullptr;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}
// An event on the current device (cudaEventDisableTiming for ordering-only events). Throws CudaError.
inline Event make_event(unsigned flags = cudaEventDefault) {
  cudaEvent_t e = nullptr;
  GS_CUDA(cudaEventCreateWithFlags(&e, flags));
  return Event(e);
}
// A cuBLASLt handle. Throws CublasError.
inline LtHandle make_lt_handle() {
  cublasLtHandle_t h = nullptr;
  GS_CUBLAS(cublasLtCreate(&h));
  return LtHandle(h);
}

}  // namespace gs::cuda

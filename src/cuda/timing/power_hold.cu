#include "cuda/timing/power_hold.hpp"

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_handles.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/gemm_lt.hpp"

namespace gs::cuda {

PowerHold::PowerHold(cublasLtHandle_t handle, void* workspace, size_t workspace_bytes, cudaStream_t s) {
  const size_t n = size_t{kDim} * kDim;
  a_ = DeviceBuffer(n * 2);
  b_ = DeviceBuffer(n * 2);
  c_ = DeviceBuffer(n * 2);
  // Normal operands: a GEMM of zeros draws less power than real data.
  fill_normal_bf16(a_.get<__nv_bfloat16>(), n, 11, 1.0f, s);
  fill_normal_bf16(b_.get<__nv_bfloat16>(), n, 12, 0.02f, s);
  LtProblem p;
  p.m = p.n = p.k = kDim;
  p.l = {a_.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  p.r = {b_.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  p.c = c_.get();
  mm_ = std::make_unique<LtMatmul>(handle, p, workspace, workspace_bytes);
  Event start = make_event(), end = make_event();
  for (int i = 0; i < 5; ++i) mm_->run(s);
  constexpr int kTimed = 10;
  GS_CUDA(cudaEventRecord(start.get(), s));
  for (int i = 0; i < kTimed; ++i) mm_->run(s);
  GS_CUDA(cudaEventRecord(end.get(), s));
  GS_CUDA(cudaEventSynchronize(end.get()));
  float ms = 0;
  GS_CUDA(cudaEventElapsedTime(&ms, start.get(), end.get()));
  if (ms > 0) gemm_ms_ = ms / kTimed;
}

PowerHold::~PowerHold() = default;

double PowerHold::hold_ms(double host_enqueue_ms) {
  const double want = 1.5 * (std::isfinite(host_enqueue_ms) ? std::max(host_enqueue_ms, 0.0) : kMaxMs);
  return std::clamp(want, kMinMs, kMaxMs);
}

void PowerHold::enqueue(cudaStream_t s, double gpu_ms) {
  const int count = std::max(1, static_cast<int>(std::ceil(gpu_ms / gemm_ms_)));
  for (int i = 0; i < count; ++i) mm_->run(s);
}

void PowerHold::run_for(cudaStream_t s, double seconds) {
  Event start = make_event(), end = make_event();
  GS_CUDA(cudaEventRecord(start.get(), s));
  float elapsed = 0;
  while (elapsed < seconds * 1000.0) {
    enqueue(s, 20 * gemm_ms_);
    GS_CUDA(cudaEventRecord(end.get(), s));
    GS_CUDA(cudaEventSynchronize(end.get()));
    GS_CUDA(cudaEventElapsedTime(&elapsed, start.get(), end.get()));
  }
}

}  // namespace gs::cuda

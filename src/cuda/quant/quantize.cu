// BF16 -> FP8 quantization kernels (per-tensor current / delayed scaling, 1x128 and 128x128
// block scaling), each in one pass over the input, with 16-byte global accesses: the single-tensor
// launches. The kernel bodies are in quantize_kernels.cuh; design notes and measured numbers:
// docs/quantization.md.
#include "cuda/quant/quantize.cuh"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "cuda/common/cuda_check.hpp"
#include "cuda/quant/quant_common.cuh"
#include "cuda/quant/quantize_kernels.cuh"

namespace gs::cuda {
namespace {

using namespace qc;
using namespace qk;

// ---------------------------------------------------------------------------------------------
// Single-tensor kernels: each body over the kernel's own grid (bodies: quantize_kernels.cuh).
__global__ void __launch_bounds__(kAmaxThreads)
    amax_partial_kernel(const __nv_bfloat16* x, size_t n, uint32_t* partial) {
  amax_partial_body(x, n, partial, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kFinalThreads)
    amax_final_kernel(const uint32_t* partial, int np, float* amax) {
  amax_final_body(partial, np, amax, blockIdx.x, gridDim.x);
}

template <Fp8Kind K, bool kDelayed>
__global__ void __launch_bounds__(kThreads)
    cast_rowwise_kernel(const uint4* x, size_t nchunks, const float* src, uint8_t* q, float* scale_inv,
                        float* history, const int* pos) {
  cast_rowwise_body<K, kDelayed>(x, nchunks, src, q, scale_inv, history, pos, blockIdx.x, gridDim.x);
}

template <Fp8Kind K, int kMode, int kH, bool kVec, bool kDual>
__global__ void __launch_bounds__(kThreads)
    transpose_kernel(const __nv_bfloat16* x, int rows, int cols, const float* src, uint8_t* q, float* scale_inv,
                     float* history, const int* pos, uint8_t* q_row, float* scale_row, bool pow2) {
  transpose_body<K, kMode, kH, kVec, kDual>(x, rows, cols, src, q, scale_inv, history, pos, q_row, scale_row, pow2,
                                            blockIdx.x, gridDim.x);
}

template <Fp8Kind K, int kU>
__global__ void __launch_bounds__(kThreads)
    block1x128_rowwise_kernel(const __nv_bfloat16* x, int rows, int cols, uint8_t* q, float* scale_inv, bool pow2) {
  block1x128_rowwise_body<K, kU>(x, rows, cols, q, scale_inv, pow2, blockIdx.x, gridDim.x);
}

template <Fp8Kind K>
__global__ void __launch_bounds__(kThreads)
    block128_rowwise_kernel(const __nv_bfloat16* x, int rows, int cols, uint8_t* q, float* scale_inv, bool pow2) {
  block128_rowwise_body<K>(x, rows, cols, q, scale_inv, pow2, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kFinalThreads)
    delayed_update_kernel(float* history, int len, int* pos, float fmax, float* scale) {
  delayed_update_body(history, len, pos, fmax, scale, blockIdx.x, gridDim.x);
}

// ---------------------------------------------------------------------------------------------
// Host side.

int grid_for(const void* kernel, long long work_blocks) {
  const long long cap = device_blocks(kernel, kThreads);
  return int(std::max<long long>(1, std::min(work_blocks, cap)));
}

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

void check_2d(const char* fn, const void* x, int rows, int cols, const void* q) {
  require(rows >= 0 && cols >= 0, fn, "negative dimension");
  require(cols % 8 == 0, fn, "cols must be a multiple of 8 (16-byte BF16 vectors), got " +
                                 std::to_string(cols));
  require(x != nullptr && q != nullptr, fn, "null input or output pointer");
  require(aligned16(x) && aligned16(q), fn, "input and output must be 16-byte aligned");
}

template <Fp8Kind K, int kMode, int kH, bool kDual = false>
void launch_transpose_h(const __nv_bfloat16* x, int rows, int cols, const float* src, uint8_t* q,
                        float* scale_inv, float* history, const int* pos, cudaStream_t s,
                        uint8_t* q_row = nullptr, float* scale_row = nullptr, bool pow2 = false) {
  const bool vec = (rows % 16) == 0;
  auto* k = vec ? transpose_kernel<K, kMode, kH, true, kDual> : transpose_kernel<K, kMode, kH, false, kDual>;
  const long long tiles =
      (long long)((rows + kTR - 1) / kTR) * ((cols + kTC * kH - 1) / (kTC * kH));
  require(tiles < (1ll << 31), "quantize (transposed)", "too many tiles");
  // One tile per block (not a persistent grid): the block scheduler balances the SMs, and a
  // new block's loads overlap the barriers and stores of the blocks finishing on its SM.
  k<<<int(std::max<long long>(1, tiles)), kThreads, 0, s>>>(x, rows, cols, src, q, scale_inv, history, pos,
                                                             q_row, scale_row, pow2);
}

// Dual output: 128-column tiles where a tile row must be a whole 1x128 block (kModeB1) or tile
// (kModeB128); 64-column tiles for the per-tensor modes.
template <Fp8Kind K, int kMode>
void launch_dual(const __nv_bfloat16* x, int rows, int cols, const float* src, uint8_t* q_row,
                 float* scale_row, uint8_t* q_t, float* scale_t, float* history, const int* pos,
                 cudaStream_t s, bool pow2) {
  constexpr int kH = (kMode == kModeB1 || kMode == kModeB128) ? 2 : 1;
  launch_transpose_h<K, kMode, kH, true>(x, rows, cols, src, q_t, scale_t, history, pos, s, q_row, scale_row, pow2);
  GS_CUDA_LAUNCH();
}

template <int kMode>
void dispatch_dual(Fp8Kind kind, const __nv_bfloat16* x, int rows, int cols, const float* src,
                   uint8_t* q_row, float* scale_row, uint8_t* q_t, float* scale_t, float* history,
                   const int* pos, cudaStream_t s, bool pow2 = false) {
  if (rows == 0 || cols == 0) return;
  if (kind == Fp8Kind::E4M3)
    launch_dual<Fp8Kind::E4M3, kMode>(x, rows, cols, src, q_row, scale_row, q_t, scale_t, history, pos, s, pow2);
  else
    launch_dual<Fp8Kind::E5M2, kMode>(x, rows, cols, src, q_row, scale_row, q_t, scale_t, history, pos, s, pow2);
}

void check_dual(const char* fn, const void* x, int rows, int cols, const void* q_row, const void* q_t,
                const void* scale_row, const void* scale_t) {
  check_2d(fn, x, rows, cols, q_row);
  require(q_t != nullptr && aligned16(q_t), fn, "transposed output must be non-null and 16-byte aligned");
  require(scale_row != nullptr && scale_t != nullptr, fn, "null scale output");
}

template <Fp8Kind K, int kMode>
void launch_transpose(const __nv_bfloat16* x, int rows, int cols, const float* src, uint8_t* q,
                      float* scale_inv, float* history, const int* pos, cudaStream_t s, bool pow2 = false) {
  // 128 x 64 tiles (128 x 128 for the 128x128 blocks): with one tile per block, 128-column
  // tiles for the other modes measured no faster on the H100.
  launch_transpose_h<K, kMode, kMode == kModeB128 ? 2 : 1>(x, rows, cols, src, q, scale_inv,
                                                           history, pos, s, nullptr, nullptr, pow2);
}

template <Fp8Kind K, bool kDelayed>
void launch_per_tensor(const __nv_bfloat16* x, int rows, int cols, bool transpose,
                       const float* src, uint8_t* q, float* scale_inv, float* history,
                       const int* pos, cudaStream_t s) {
  if (!transpose) {
    const size_t nchunks = size_t(rows) * size_t(cols) / 8;
    auto* k = cast_rowwise_kernel<K, kDelayed>;
    const long long work = (long long)((nchunks / 64 * 32 + kThreads - 1) / kThreads) + 1;
    const int grid = grid_for(reinterpret_cast<const void*>(k), work);
    k<<<grid, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(x), nchunks, src, q, scale_inv,
                                history, pos);
  } else {
    launch_transpose<K, kDelayed ? kModeDel : kModeCur>(x, rows, cols, src, q, scale_inv,
                                                        history, pos, s);
  }
  GS_CUDA_LAUNCH();
}

}  // namespace

namespace qk {

// Resident-block capacity of the whole device for a kernel (occupancy x SM count), cached.
int device_blocks(const void* kernel, int threads, size_t smem_dynamic) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int>, int> cache;
  int dev = 0;
  GS_CUDA(cudaGetDevice(&dev));
  const auto key = std::make_tuple(kernel, dev, threads);
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int per_sm = 0, sms = 0;
  GS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_dynamic));
  GS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int v = std::max(1, per_sm) * std::max(1, sms);
  std::lock_guard<std::mutex> lk(mu);
  cache[key] = v;
  return v;
}

size_t amax_blocks_needed(size_t n) {
  const size_t per_block = size_t(8) * kAmaxThreads;
  return std::max<size_t>(1, std::min<size_t>(kAmaxMaxBlocks, (n + per_block - 1) / per_block));
}

}  // namespace qk

// ---- per-tensor scaling -----------------------------------------------------------------------
size_t amax_workspace_bytes(size_t n) { return amax_blocks_needed(n) * sizeof(uint32_t); }

void amax_bf16(const __nv_bfloat16* x, size_t n, float* amax, void* workspace, cudaStream_t s) {
  require(amax != nullptr && workspace != nullptr, "amax_bf16", "null amax or workspace");
  require(n == 0 || x != nullptr, "amax_bf16", "null input");
  require((reinterpret_cast<uintptr_t>(workspace) & 3u) == 0, "amax_bf16",
          "workspace must be 4-byte aligned");
  const void* kp = reinterpret_cast<const void*>(amax_partial_kernel);
  const int grid = int(std::min<size_t>(amax_blocks_needed(n),
                                        size_t(device_blocks(kp, kAmaxThreads))));
  auto* partial = static_cast<uint32_t*>(workspace);
  amax_partial_kernel<<<grid, kAmaxThreads, 0, s>>>(x, n, partial);
  GS_CUDA_LAUNCH();

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(kFinalThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, amax_final_kernel,
                                           static_cast<const uint32_t*>(partial), grid, amax);
  if (e != cudaSuccess) {  // e.g. no programmatic launch on this stream: plain launch
    (void)cudaGetLastError();
    amax_final_kernel<<<1, kFinalThreads, 0, s>>>(partial, grid, amax);
    GS_CUDA_LAUNCH();
  }
}

void cast_fp8_current(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                      const float* amax, uint8_t* q, float* scale_inv, cudaStream_t s) {
  check_2d("cast_fp8_current", x, rows, cols, q);
  require(amax != nullptr && scale_inv != nullptr, "cast_fp8_current", "null amax/scale_inv");
  if (kind == Fp8Kind::E4M3)
    launch_per_tensor<Fp8Kind::E4M3, false>(x, rows, cols, transpose, amax, q, scale_inv,
                                            nullptr, nullptr, s);
  else
    launch_per_tensor<Fp8Kind::E5M2, false>(x, rows, cols, transpose, amax, q, scale_inv,
                                            nullptr, nullptr, s);
}

void cast_fp8_delayed(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                      const float* scale, uint8_t* q, float* scale_inv_out, float* history,
                      const int* pos, cudaStream_t s) {
  check_2d("cast_fp8_delayed", x, rows, cols, q);
  require(scale && scale_inv_out && history && pos, "cast_fp8_delayed", "null pointer argument");
  if (kind == Fp8Kind::E4M3)
    launch_per_tensor<Fp8Kind::E4M3, true>(x, rows, cols, transpose, scale, q, scale_inv_out,
                                           history, pos, s);
  else
    launch_per_tensor<Fp8Kind::E5M2, true>(x, rows, cols, transpose, scale, q, scale_inv_out,
                                           history, pos, s);
}

void delayed_scale_update(float* history, int hist_len, int* pos, Fp8Kind kind, float* scale,
                          cudaStream_t s) {
  require(hist_len >= 1, "delayed_scale_update", "hist_len must be >= 1");
  require(history && pos && scale, "delayed_scale_update", "null pointer argument");
  delayed_update_kernel<<<1, kFinalThreads, 0, s>>>(history, hist_len, pos, fp8_max(kind), scale);
  GS_CUDA_LAUNCH();
}

// ---- block scaling ----------------------------------------------------------------------------
void quantize_block_1x128(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                          uint8_t* q, float* scale_inv, cudaStream_t s, bool pow2) {
  check_2d("quantize_block_1x128", x, rows, cols, q);
  require(scale_inv != nullptr, "quantize_block_1x128", "null scale_inv");
  if (rows == 0 || cols == 0) return;
  const bool e4 = kind == Fp8Kind::E4M3;
  if (!transpose) {
    const long long units = (long long)rows * ((cols + 127) / 128);
    require(units < (1ll << 30), "quantize_block_1x128", "too many 1x128 blocks (>= 2^30)");
    // 8 units (4 per half-warp, 4 16-byte loads per lane) per warp, one group per warp: a
    // non-persistent grid measured faster than persistent ones (with or without prefetch).
    constexpr int kU = 4;
    auto* k = e4 ? block1x128_rowwise_kernel<Fp8Kind::E4M3, kU>
                 : block1x128_rowwise_kernel<Fp8Kind::E5M2, kU>;
    const long long groups = (units + 2 * kU - 1) / (2 * kU);
    const long long blocks = (groups + kThreads / 32 - 1) / (kThreads / 32);
    k<<<int(std::max<long long>(1, blocks)), kThreads, 0, s>>>(x, rows, cols, q, scale_inv, pow2);
  } else if (e4) {
    launch_transpose<Fp8Kind::E4M3, kModeB1>(x, rows, cols, nullptr, q, scale_inv, nullptr,
                                             nullptr, s, pow2);
  } else {
    launch_transpose<Fp8Kind::E5M2, kModeB1>(x, rows, cols, nullptr, q, scale_inv, nullptr,
                                             nullptr, s, pow2);
  }
  GS_CUDA_LAUNCH();
}

void quantize_block_128x128(const __nv_bfloat16* x, int rows, int cols, bool transpose,
                            Fp8Kind kind, uint8_t* q, float* scale_inv, cudaStream_t s, bool pow2) {
  check_2d("quantize_block_128x128", x, rows, cols, q);
  require(scale_inv != nullptr, "quantize_block_128x128", "null scale_inv");
  if (rows == 0 || cols == 0) return;
  const bool e4 = kind == Fp8Kind::E4M3;
  const long long tiles = (long long)((rows + 127) / 128) * ((cols + 127) / 128);
  if (!transpose) {
    auto* k = e4 ? block128_rowwise_kernel<Fp8Kind::E4M3> : block128_rowwise_kernel<Fp8Kind::E5M2>;
    // One tile per block: without a prefetch in the kernel, blocks that start while others
    // reduce and store keep the loads flowing (measured faster than a persistent grid).
    k<<<int(std::max<long long>(1, tiles)), kThreads, 0, s>>>(x, rows, cols, q, scale_inv, pow2);
  } else if (e4) {
    launch_transpose<Fp8Kind::E4M3, kModeB128>(x, rows, cols, nullptr, q, scale_inv, nullptr,
                                               nullptr, s, pow2);
  } else {
    launch_transpose<Fp8Kind::E5M2, kModeB128>(x, rows, cols, nullptr, q, scale_inv, nullptr,
                                               nullptr, s, pow2);
  }
  GS_CUDA_LAUNCH();
}

// ---- dual output (training mode) --------------------------------------------------------------
void cast_fp8_current_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, const float* amax,
                           uint8_t* q_row, float* scale_inv_row, uint8_t* q_t, float* scale_inv_t,
                           cudaStream_t s) {
  check_dual("cast_fp8_current_dual", x, rows, cols, q_row, q_t, scale_inv_row, scale_inv_t);
  require(amax != nullptr, "cast_fp8_current_dual", "null amax");
  dispatch_dual<kModeCur>(kind, x, rows, cols, amax, q_row, scale_inv_row, q_t, scale_inv_t, nullptr, nullptr, s);
}

void cast_fp8_delayed_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, const float* scale,
                           uint8_t* q_row, float* scale_inv_row, uint8_t* q_t, float* scale_inv_t,
                           float* history, const int* pos, cudaStream_t s) {
  check_dual("cast_fp8_delayed_dual", x, rows, cols, q_row, q_t, scale_inv_row, scale_inv_t);
  require(scale && history && pos, "cast_fp8_delayed_dual", "null pointer argument");
  dispatch_dual<kModeDel>(kind, x, rows, cols, scale, q_row, scale_inv_row, q_t, scale_inv_t, history, pos, s);
}

void quantize_block_1x128_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, uint8_t* q_row,
                               float* scale_inv_row, uint8_t* q_t, float* scale_inv_t, cudaStream_t s, bool pow2) {
  check_dual("quantize_block_1x128_dual", x, rows, cols, q_row, q_t, scale_inv_row, scale_inv_t);
  dispatch_dual<kModeB1>(kind, x, rows, cols, nullptr, q_row, scale_inv_row, q_t, scale_inv_t, nullptr, nullptr, s,
                         pow2);
}

void quantize_block_128x128_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, uint8_t* q_row,
                                 float* scale_inv_row, uint8_t* q_t, float* scale_inv_t, cudaStream_t s, bool pow2) {
  check_dual("quantize_block_128x128_dual", x, rows, cols, q_row, q_t, scale_inv_row, scale_inv_t);
  dispatch_dual<kModeB128>(kind, x, rows, cols, nullptr, q_row, scale_inv_row, q_t, scale_inv_t, nullptr, nullptr, s,
                           pow2);
}

}  // namespace gs::cuda

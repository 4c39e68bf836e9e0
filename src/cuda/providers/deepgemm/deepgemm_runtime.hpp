// DeepGEMM's sm90 FP8 kernels inside gemmscope, compiled per shape at run time with NVRTC from
// headers embedded in the binary, cached on disk, loaded and launched with the driver API.
//
// Narrow interface for a provider: `unavailable_reason()` (one line, empty when usable),
// `prepare()` (compile or load; outside any timed region; reports compile time and cache hits)
// and three launches on device pointers in DeepGEMM's layouts. Layout conversion from the
// project's quantized operands lives in deepgemm_layouts.cuh.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/providers/deepgemm_config.hpp"
#include "core/providers/jit_cache.hpp"
#include "cuda/providers/deepgemm/nvrtc_lib.hpp"

namespace gs::dg {

// What prepare() did, for the report: never inside a timed region.
struct PrepareInfo {
  bool cache_hit = false;     // loaded from the disk cache
  bool memory_hit = false;    // already loaded in this process
  double compile_seconds = 0; // NVRTC wall time (0 on a hit)
  std::string cache_path;     // the cubin file ("" when the cache is disabled)
  std::string cache_note;     // why a store failed, if it did
  Config config;
};

struct LoadedKernel;  // a CUmodule/CUfunction pair with its problem and config

// Operands (device pointers), all K-major ("NT"):
//  a   FP8 E4M3 [m, k]      sfa FP32 [ceil(k/128), align4(m)] (column-major 1x128 scales, TMA-aligned)
//  b   FP8 E4M3 [g*n, k]    sfb FP32 [g, ceil(n/128), ceil(k/128)] (128x128 scales, K-major)
//  d   BF16 [m, n]
//  m_indices (M-grouped): int32 [m], the expert of each row, -1 for padding rows
struct DenseArgs {
  const void* a = nullptr; const float* sfa = nullptr;
  const void* b = nullptr; const float* sfb = nullptr;
  void* d = nullptr;
  const int* m_indices = nullptr;
};
// Wgrad (1d1d kernel): d FP32 [m, n] += a[m, k] * b[n, k]^T with 1x128 scales on both:
//  sfa FP32 [ceil(k/128), align4(m)], sfb FP32 [ceil(k/128), align4(n)].
struct WgradArgs {
  const void* a = nullptr; const float* sfa = nullptr;
  const void* b = nullptr; const float* sfb = nullptr;
  float* d = nullptr;
};

// BF16 GEMM (sm90_bf16_gemm): d = a·bᵀ (BF16 out) or d += a·bᵀ (FP32, BF16_FP32). a is [m, k]
// when the problem's a_k_major, else [k, m]; b is [g*n, k] when b_k_major, else [g*k, n] (the
// experts' weights stacked for the M-grouped layout); d [m, n]; m_indices as DenseArgs.
// K-grouped (MN-major only): a [Σk, m], b [Σk, n], the experts one after another along K; d
// [experts*m, n]; ks: int32 per expert on the device (a multiple of 128; 0 skips the expert),
// sum_k = Σ ks.
struct Bf16Args {
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  const int* m_indices = nullptr;
  const int* ks = nullptr;
  int sum_k = 0;
};
// K-grouped contiguous Wgrad (1d1d, one launch): for each expert e with ks[e] > 0 (a multiple of
// 128; 0 skips the expert), d[e] FP32 [m, n] += a_e[m, ks[e]] · b_e[n, ks[e]]ᵀ. a, b: the experts'
// K-major blocks one after another (a_e at offset m·Σ_{j<e} ks[j]); sfa, sfb: their 1x128 scales
// [Σ ks/128, align4(m or n)], expert after expert; d: [experts·m, n]. ks: int32 on the device.
// tensor_maps: a device buffer of tensor_map_buffer_bytes() the kernel rewrites per expert.
struct KGroupedArgs {
  const void* a = nullptr; const float* sfa = nullptr;
  const void* b = nullptr; const float* sfb = nullptr;
  float* d = nullptr;
  const int* ks = nullptr;
  void* tensor_maps = nullptr;
};

class Runtime {
 public:
  static Runtime& get();
  Runtime(std::string cache_dir, std::string toolkit_include);
  ~Runtime();

  // Empty when DeepGEMM can run on the current device, else one line saying why not
  // (no NVRTC, no toolkit headers, no embedded headers, not sm90).
  std::string unavailable_reason() const;
  // DeepGEMM's set_num_sms: 0 restores the device's SM count; odd counts are rounded down.
  void set_num_sms(int n);
  int num_sms() const;

  // Compiles (or loads from disk/memory) the kernel for `p` (its num_sms is overwritten with
  // the runtime's). Throws std::runtime_error with NVRTC's log on a compile failure.
  const LoadedKernel& prepare(Problem p, PrepareInfo* info = nullptr);

  void launch_dense(const LoadedKernel& k, const DenseArgs& args, int m, cudaStream_t s) const;
  // k: the contraction of this launch (0: the problem's); another K only for a runtime_k kernel.
  void launch_wgrad(const LoadedKernel& k, const WgradArgs& args, int m, cudaStream_t s, int k_run = 0) const;

  void launch_bf16(const LoadedKernel& k, const Bf16Args& args, int m, cudaStream_t s) const;
  // ks_host: the same per-expert K as args.ks (the base tensor maps take the first non-empty one).
  void launch_k_grouped(const LoadedKernel& k, const KGroupedArgs& args, const std::vector<int>& ks_host,
                        cudaStream_t s) const;
  // Bytes of the global tensor-map buffer a K-grouped kernel needs (two 128-byte descriptors per CTA).
  static size_t tensor_map_buffer_bytes(const LoadedKernel& k);

  const jit::DiskCache& cache() const { return cache_; }
  int compiles() const { return compiles_; }  // NVRTC compilations done by this process

  // The cache key a problem compiles under (tests check it changes with each input).
  jit::CacheKey cache_key(const Problem& p, const Config& c) const;
  std::vector<std::string> compile_options() const;
  // NVRTC compile of one instantiation, no device needed (prepare() uses it on a cache miss).
  CompileResult compile(const Problem& p, const Config& c) const;

 private:
  jit::DiskCache cache_;
  std::string toolkit_include_;
  int num_sms_ = 0, device_sms_ = 0;
  uint64_t header_hash_ = 0;
  int compiles_ = 0;
  std::map<std::string, std::unique_ptr<LoadedKernel>> loaded_;
};

// $CUDA_HOME/include if it has cuda_bf16.h, else /usr/local/cuda/include if it does, else "".
std::string find_toolkit_include();

}  // namespace gs::dg

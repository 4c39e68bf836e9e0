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

#include "core/deepgemm_config.hpp"
#include "core/jit_cache.hpp"
#include "cuda/deepgemm/nvrtc_lib.hpp"

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

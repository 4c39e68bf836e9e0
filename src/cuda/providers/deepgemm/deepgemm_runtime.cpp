#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"

#include <cuda.h>  // driver API types only: every driver function is reached through cudart's entry points
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "core/gpu/arch_policy.hpp"
#include "core/util/error.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/deepgemm/embedded_headers.hpp"
#include "cuda/providers/deepgemm/nvrtc_lib.hpp"

namespace gs::dg {

struct LoadedKernel {
  Problem problem;
  Config config;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

namespace {

// DeepGEMM's headers include <utility> for std::integer_sequence; NVRTC's built-in std has
// forward/move but no integer_sequence, so this in-memory <utility> takes it from libcu++.
const char* kUtilityShim =
    "#pragma once\n#include <cuda/std/utility>\n"
    "namespace std { using cuda::std::integer_sequence; using cuda::std::make_integer_sequence;\n"
    "using cuda::std::index_sequence; using cuda::std::make_index_sequence; }\n";
// nvcc includes the device runtime API implicitly (cudaGridDependencySynchronize); NVRTC does not.
const char* kPrelude = "#include <cuda_device_runtime_api.h>\n";

struct Driver {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*tensor_map_encode_tiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  std::string why;

  Driver() {
    auto get = [&](auto& fn, const char* name) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult q{};
      if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess || !p) {
        cudaGetLastError();
        if (why.empty()) why = fmt::format("DeepGEMM unavailable: the driver lacks {}", name);
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get(module_load_data, "cuModuleLoadData");
    get(module_get_function, "cuModuleGetFunction");
    get(func_set_attribute, "cuFuncSetAttribute");
    get(launch_kernel_ex, "cuLaunchKernelEx");
    get(tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
    get(get_error_string, "cuGetErrorString");
  }
  static const Driver& get() {
    static Driver d;
    return d;
  }
  void check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* s = nullptr;
    if (get_error_string) get_error_string(r, &s);
    throw Unsupported(fmt::format("DeepGEMM: {} failed: {}", what, s ? s : std::to_string(static_cast<int>(r))));
  }
};

int align4(int x) { return (x + 3) / 4 * 4; }
int div_up(int a, int b) { return (a + b - 1) / b; }

CUtensorMapSwizzle swizzle_enum(int bytes) {
  switch (bytes) {
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

// A 2-D row-major tensor [outer, inner] (inner contiguous) tiled by [box_outer, box_inner].
// With a swizzle the inner box is one swizzle atom wide, as DeepGEMM's kernels expect.
CUtensorMap tensor_map_2d(const void* base, CUtensorMapDataType type, int elem_bytes, uint64_t inner, uint64_t outer,
                          uint64_t row_stride_elems, int box_inner, int box_outer, int swizzle_bytes) {
  const Driver& drv = Driver::get();
  if (swizzle_bytes > 16) box_inner = swizzle_bytes / elem_bytes;
  CUtensorMap m{};
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_stride_elems * static_cast<uint64_t>(elem_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t estr[2] = {1, 1};
  drv.check(drv.tensor_map_encode_tiled(&m, type, 2, const_cast<void*>(base), dims, strides, box, estr,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_enum(swizzle_bytes),
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            "cuTensorMapEncodeTiled");
  return m;
}

// Column-major (MN-major) scale factors [sf_k, align4(mn)]: box = block_mn x 1.
CUtensorMap sf_map(const float* sf, int mn, int k, int block_mn, int groups) {
  const uint64_t mn_aligned = static_cast<uint64_t>(align4(mn));
  return tensor_map_2d(sf, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, mn_aligned, static_cast<uint64_t>(div_up(k, 128)) * groups,
                       mn_aligned, block_mn, 1, 0);
}

void launch(const LoadedKernel& k, void** params, cudaStream_t s) {
  const Driver& drv = Driver::get();
  const Config& c = k.config;
  CUlaunchConfig lc{};
  lc.gridDimX = static_cast<unsigned>(c.num_sms);
  lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = static_cast<unsigned>(c.threads());
  lc.blockDimY = lc.blockDimZ = 1;
  lc.sharedMemBytes = static_cast<unsigned>(c.smem_bytes);
  lc.hStream = reinterpret_cast<CUstream>(s);
  CUlaunchAttribute attr[1]{};
  attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr[0].value.clusterDim.x = static_cast<unsigned>(c.cluster_size());
  attr[0].value.clusterDim.y = attr[0].value.clusterDim.z = 1;
  lc.attrs = attr;
  lc.numAttrs = 1;
  drv.check(drv.launch_kernel_ex(&lc, k.function, params, nullptr), "cuLaunchKernelEx");
}

}  // namespace

std::string find_toolkit_include() {
  std::vector<std::string> dirs;
  if (const char* h = std::getenv("CUDA_HOME"); h && *h) dirs.push_back(std::string(h) + "/include");
  if (const char* h = std::getenv("CUDA_PATH"); h && *h) dirs.push_back(std::string(h) + "/include");
  dirs.emplace_back("/usr/local/cuda/include");
  for (const auto& d : dirs) {
    std::error_code ec;
    if (std::filesystem::exists(d + "/cuda_bf16.h", ec) && std::filesystem::exists(d + "/cuda_fp8.h", ec)) return d;
  }
  return {};
}

Runtime& Runtime::get() {
  static Runtime r(jit::cache_dir(), find_toolkit_include());
  return r;
}

Runtime::Runtime(std::string cache_dir, std::string toolkit_include)
    : cache_(std::move(cache_dir)), toolkit_include_(std::move(toolkit_include)) {
  int count = 0;
  const EmbeddedHeader* h = embedded_headers(count);
  uint64_t hash = jit::fnv1a64(kUtilityShim);
  for (int i = 0; i < count; ++i) {
    hash = jit::fnv1a64(h[i].name, hash);
    hash = jit::fnv1a64(std::string(h[i].text, h[i].size), hash);
  }
  header_hash_ = hash;
}

Runtime::~Runtime() = default;  // modules stay loaded until the context goes

std::string Runtime::unavailable_reason() const {
  int count = 0;
  embedded_headers(count);
  if (count == 0)
    return "DeepGEMM unavailable: built without its headers (configure with GEMMSCOPE_DEEPGEMM_DIR and GEMMSCOPE_CUTLASS_DIR)";
  if (!Nvrtc::get().available()) return Nvrtc::get().why();
  if (toolkit_include_.empty())
    return "DeepGEMM unavailable: no CUDA toolkit headers for NVRTC (cuda_bf16.h, cuda_fp8.h) in $CUDA_HOME/include or "
           "/usr/local/cuda/include";
  if (!Driver::get().why.empty()) return Driver::get().why;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return "DeepGEMM unavailable: no usable CUDA device";
  }
  if (!ArchPolicy(major * 10 + minor).kernel_target())
    return fmt::format("DeepGEMM unavailable: its sm90 kernels need a {} GPU (this is sm_{}{})",
                       ArchPolicy::arch_kernels_target().family, major, minor);
  return {};
}

void Runtime::set_num_sms(int n) { num_sms_ = n > 0 ? n / 2 * 2 : 0; }

int Runtime::num_sms() const {
  if (num_sms_ > 0) return num_sms_;
  int dev = 0, sms = 0;
  GS_CUDA(cudaGetDevice(&dev));
  GS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms / 2 * 2;
}

std::vector<std::string> Runtime::compile_options() const {
  return {"-std=c++20", ArchPolicy::arch_kernels_target().nvrtc_arch_option(), "-default-device", "-DNDEBUG", "--device-int128",
          "--diag-suppress=39,161,174,177,186,940,1105",
          "-I" + toolkit_include_, "-I" + toolkit_include_ + "/cccl"};
}

jit::CacheKey Runtime::cache_key(const Problem& p, const Config& c) const {
  const Instantiation in = instantiation(p, c);
  jit::CacheKey key;
  key.kernel = in.kernel_name;
  key.source = std::string(kPrelude) + in.source + in.name_expression;
  key.commit = embedded_deepgemm_commit();
  key.header_hash = header_hash_;
  key.nvrtc_major = Nvrtc::get().major();
  key.nvrtc_minor = Nvrtc::get().minor();
  key.arch = ArchPolicy::arch_kernels_target().arch;
  key.options = compile_options();
  return key;
}

CompileResult Runtime::compile(const Problem& p, const Config& c) const {
  const Instantiation in = instantiation(p, c);
  int count = 0;
  const EmbeddedHeader* h = embedded_headers(count);
  std::vector<std::pair<std::string, const char*>> headers;
  for (int i = 0; i < count; ++i) headers.emplace_back(h[i].name, h[i].text);
  headers.emplace_back("utility", kUtilityShim);
  return Nvrtc::get().compile(std::string(kPrelude) + in.source, in.kernel_name + ".cu", headers, compile_options(),
                              in.name_expression);
}

const LoadedKernel& Runtime::prepare(Problem p, PrepareInfo* info) {
  p.num_sms = num_sms();
  if (auto why = unsupported_reason(p); !why.empty()) throw Unsupported(why);
  const Config c = best_config(p);
  const jit::CacheKey key = cache_key(p, c);
  PrepareInfo local;
  PrepareInfo& inf = info ? *info : local;
  inf = PrepareInfo{};
  inf.config = c;
  inf.cache_path = cache_.enabled() ? cache_.path_for(key) : "";
  const std::string mem_key = key.canonical();
  if (auto it = loaded_.find(mem_key); it != loaded_.end()) {
    inf.memory_hit = true;
    return *it->second;
  }
  // File layout of a cached entry: the lowered name, a newline, then the cubin.
  std::string lowered, cubin;
  if (auto hit = cache_.load(key)) {
    const auto nl = hit->find('\n');
    if (nl != std::string::npos) {
      lowered = hit->substr(0, nl);
      cubin = hit->substr(nl + 1);
      inf.cache_hit = true;
    }
  }
  if (!inf.cache_hit) {
    const CompileResult r = compile(p, c);
    ++compiles_;
    inf.compile_seconds = r.seconds;
    if (!r.ok)
      throw Unsupported(fmt::format("DeepGEMM: NVRTC failed to compile {} ({}): {}", key.kernel, c.describe(), r.log));
    lowered = r.lowered_name;
    cubin = r.cubin;
    std::string why;
    if (!cache_.store(key, lowered + "\n" + cubin, why)) inf.cache_note = why;
  }
  auto k = std::make_unique<LoadedKernel>();
  k->problem = p;
  k->config = c;
  const Driver& drv = Driver::get();
  drv.check(drv.module_load_data(&k->module, cubin.data()), "cuModuleLoadData");
  drv.check(drv.module_get_function(&k->function, k->module, lowered.c_str()), "cuModuleGetFunction");
  drv.check(drv.func_set_attribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c.smem_bytes),
            "cuFuncSetAttribute(max dynamic shared memory)");
  auto& slot = loaded_[mem_key];
  slot = std::move(k);
  return *slot;
}

void Runtime::launch_dense(const LoadedKernel& k, const DenseArgs& a, int m, cudaStream_t s) const {
  const Problem& p = k.problem;
  const Config& c = k.config;
  if (p.kernel != Kernel::FP8_1D2D) throw std::logic_error("launch_dense: not a 1d2d kernel");
  const int groups = p.layout == Layout::MGroupedContiguous ? p.num_groups : 1;
  if (m == 0) return;
  const CUtensorMap tm_a = tensor_map_2d(a.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, m, p.k, c.block_k, c.block_m, c.swizzle_a);
  const CUtensorMap tm_b = tensor_map_2d(a.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, static_cast<uint64_t>(p.n) * groups, p.k,
                                         c.block_k, c.block_n, c.swizzle_b);
  const CUtensorMap tm_d = tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.n, m, p.n, c.block_n, c.block_m, c.swizzle_cd);
  const CUtensorMap tm_sfa = sf_map(a.sfa, m, p.k, c.block_m, 1);
  float* sfb = const_cast<float*>(a.sfb);
  int* layout = const_cast<int*>(a.m_indices);
  uint32_t mm = static_cast<uint32_t>(m), nn = static_cast<uint32_t>(p.n), kk = static_cast<uint32_t>(p.k);
  void* params[] = {&sfb, &layout, &mm, &nn, &kk, const_cast<CUtensorMap*>(&tm_a), const_cast<CUtensorMap*>(&tm_b),
                    const_cast<CUtensorMap*>(&tm_d), const_cast<CUtensorMap*>(&tm_sfa)};
  launch(k, params, s);
}

void Runtime::launch_wgrad(const LoadedKernel& k, const WgradArgs& a, int m, cudaStream_t s, int k_run) const {
  Problem p = k.problem;
  const Config& c = k.config;
  if (p.kernel != Kernel::FP8_1D1D || p.layout != Layout::Normal) throw std::logic_error("launch_wgrad: not a dense 1d1d kernel");
  if (k_run > 0 && k_run != p.k) {
    if (!p.runtime_k) throw std::logic_error("launch_wgrad: another K needs a runtime_k kernel");
    if (k_run % 128 != 0) throw std::logic_error("launch_wgrad: K must be a multiple of 128");
    p.k = k_run;
  }
  if (m == 0) return;
  const CUtensorMap tm_a = tensor_map_2d(a.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, m, p.k, c.block_k, c.block_m, c.swizzle_a);
  const CUtensorMap tm_b = tensor_map_2d(a.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, p.n, p.k, c.block_k, c.block_n, c.swizzle_b);
  const CUtensorMap tm_sfa = sf_map(a.sfa, m, p.k, c.block_m, 1);
  const CUtensorMap tm_sfb = sf_map(a.sfb, p.n, p.k, c.block_n, 1);
  // FP32 output, unswizzled, stored (reduce-added) one 64-row warp group at a time.
  const CUtensorMap tm_d = tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, p.n, m, p.n, c.block_n, 64, 0);
  void* ga = const_cast<void*>(a.a);
  void* gb = const_cast<void*>(a.b);
  int* layout = nullptr;
  void* tm_buffer = nullptr;  // only the K-grouped layout rewrites descriptors in global memory
  uint32_t mm = static_cast<uint32_t>(m), nn = static_cast<uint32_t>(p.n), kk = static_cast<uint32_t>(p.k);
  void* params[] = {&ga, &gb, &layout, &tm_buffer, &mm, &nn, &kk, const_cast<CUtensorMap*>(&tm_a),
                    const_cast<CUtensorMap*>(&tm_b), const_cast<CUtensorMap*>(&tm_sfa), const_cast<CUtensorMap*>(&tm_sfb),
                    const_cast<CUtensorMap*>(&tm_d)};
  launch(k, params, s);
}

}  // namespace gs::dg

namespace gs::dg {

void Runtime::launch_bf16(const LoadedKernel& k, const Bf16Args& a, int m, cudaStream_t s) const {
  const Problem& p = k.problem;
  const Config& c = k.config;
  if (!is_bf16(p.kernel)) throw std::logic_error("launch_bf16: not a BF16 kernel");
  if (m == 0) return;
  if (p.layout == Layout::KGroupedContiguous) {
    if (a.sum_k == 0) return;  // no expert has tokens: nothing is written
    const uint64_t mm = static_cast<uint64_t>(p.m), nn = static_cast<uint64_t>(p.n), sk = static_cast<uint64_t>(a.sum_k);
    const uint64_t rows = mm * static_cast<uint64_t>(p.num_groups);
    const CUtensorMap tm_a = tensor_map_2d(a.a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, mm, sk, mm, c.block_m, c.block_k, c.swizzle_a);
    const CUtensorMap tm_b = tensor_map_2d(a.b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, nn, sk, nn, c.block_n, c.block_k, c.swizzle_b);
    const CUtensorMap tm_d = p.kernel == Kernel::BF16
                                 ? tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, nn, rows, nn, c.block_n, c.block_m, c.swizzle_cd)
                                 : tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, nn, rows, nn, c.block_n, c.block_m, 0);
    int* layout = const_cast<int*>(a.ks);
    uint32_t m32 = static_cast<uint32_t>(p.m), n32 = static_cast<uint32_t>(p.n), k32 = static_cast<uint32_t>(a.sum_k);
    void* params[] = {&layout, &m32, &n32, &k32, const_cast<CUtensorMap*>(&tm_a), const_cast<CUtensorMap*>(&tm_b),
                      const_cast<CUtensorMap*>(&tm_d)};
    launch(k, params, s);
    return;
  }
  const uint64_t groups = p.layout == Layout::MGroupedContiguous ? static_cast<uint64_t>(p.num_groups) : 1;
  const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t mm = static_cast<uint64_t>(m), nn = static_cast<uint64_t>(p.n), kk = static_cast<uint64_t>(p.k);
  // The box follows the kernel's TMA loads: (BLOCK_K, BLOCK_M) K-major, (BLOCK_M, BLOCK_K) MN-major.
  const CUtensorMap tm_a = p.a_k_major ? tensor_map_2d(a.a, bf16, 2, kk, mm, kk, c.block_k, c.block_m, c.swizzle_a)
                                       : tensor_map_2d(a.a, bf16, 2, mm, kk, mm, c.block_m, c.block_k, c.swizzle_a);
  const CUtensorMap tm_b = p.b_k_major
                               ? tensor_map_2d(a.b, bf16, 2, kk, nn * groups, kk, c.block_k, c.block_n, c.swizzle_b)
                               : tensor_map_2d(a.b, bf16, 2, nn, kk * groups, nn, c.block_n, c.block_k, c.swizzle_b);
  const CUtensorMap tm_d = p.kernel == Kernel::BF16
                               ? tensor_map_2d(a.d, bf16, 2, nn, mm, nn, c.block_n, c.block_m, c.swizzle_cd)
                               : tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, nn, mm, nn, c.block_n, c.block_m, 0);
  int* layout = const_cast<int*>(a.m_indices);
  uint32_t m32 = static_cast<uint32_t>(m), n32 = static_cast<uint32_t>(p.n), k32 = static_cast<uint32_t>(p.k);
  void* params[] = {&layout, &m32, &n32, &k32, const_cast<CUtensorMap*>(&tm_a), const_cast<CUtensorMap*>(&tm_b),
                    const_cast<CUtensorMap*>(&tm_d)};
  launch(k, params, s);
}

size_t Runtime::tensor_map_buffer_bytes(const LoadedKernel& k) {
  return static_cast<size_t>(k.config.num_sms) * 2 * sizeof(CUtensorMap);
}

void Runtime::launch_k_grouped(const LoadedKernel& k, const KGroupedArgs& a, const std::vector<int>& ks, cudaStream_t s) const {
  const Problem& p = k.problem;
  const Config& c = k.config;
  if (p.kernel != Kernel::FP8_1D1D || p.layout != Layout::KGroupedContiguous)
    throw std::logic_error("launch_k_grouped: not a K-grouped 1d1d kernel");
  if (static_cast<int>(ks.size()) != p.num_groups) throw std::logic_error("launch_k_grouped: one K per expert");
  int first = 0;
  uint64_t sum_k = 0;
  for (int x : ks) {
    if (x % 128 != 0 || x < 0) throw std::logic_error("launch_k_grouped: each expert's K must be a multiple of 128");
    if (first == 0) first = x;
    sum_k += static_cast<uint64_t>(x);
  }
  if (sum_k == 0) return;  // no expert has tokens: nothing is added
  if (!a.tensor_maps) throw std::logic_error("launch_k_grouped: no tensor-map buffer");
  const uint64_t mm = static_cast<uint64_t>(p.m), nn = static_cast<uint64_t>(p.n);
  // Base descriptors for the first expert with tokens; the kernel's TMA thread copies them to shared
  // memory, replaces the address, K extent and row stride per expert, and publishes each CTA's pair
  // in its slot of the global buffer (tensor_maps) to load through.
  const CUtensorMap tm_a = tensor_map_2d(a.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, first, mm, first, c.block_k, c.block_m, c.swizzle_a);
  const CUtensorMap tm_b = tensor_map_2d(a.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, first, nn, first, c.block_k, c.block_n, c.swizzle_b);
  const int sum_k_int = static_cast<int>(sum_k);
  const CUtensorMap tm_sfa = sf_map(a.sfa, p.m, sum_k_int, c.block_m, 1);
  const CUtensorMap tm_sfb = sf_map(a.sfb, p.n, sum_k_int, c.block_n, 1);
  const CUtensorMap tm_d = tensor_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, nn, mm * static_cast<uint64_t>(p.num_groups),
                                         nn, c.block_n, 64, 0);
  void* ga = const_cast<void*>(a.a);
  void* gb = const_cast<void*>(a.b);
  int* layout = const_cast<int*>(a.ks);
  void* tm_buffer = a.tensor_maps;
  uint32_t m32 = static_cast<uint32_t>(p.m), n32 = static_cast<uint32_t>(p.n), k32 = static_cast<uint32_t>(sum_k);
  void* params[] = {&ga, &gb, &layout, &tm_buffer, &m32, &n32, &k32, const_cast<CUtensorMap*>(&tm_a),
                    const_cast<CUtensorMap*>(&tm_b), const_cast<CUtensorMap*>(&tm_sfa), const_cast<CUtensorMap*>(&tm_sfb),
                    const_cast<CUtensorMap*>(&tm_d)};
  launch(k, params, s);
}

}  // namespace gs::dg

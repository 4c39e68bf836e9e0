#include "cuda/timing/kernel_trace.hpp"

#include <cuda_profiler_api.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "core/util/error.hpp"
#include "cuda/common/cuda_check.hpp"

#if GEMMSCOPE_HAVE_CUPTI
// Types and constants only: every CUPTI function is reached through dlsym.
#include <cupti_activity.h>
#include <cupti_version.h>
#endif

namespace gs::cuda {

std::string readable_kernel_name(const char* raw) {
  if (!raw) return "?";
  std::string name = raw;
  if (name.rfind("_Z", 0) == 0) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(raw, nullptr, nullptr, &status), std::free);
    if (status == 0 && d) name = d.get();
  }
  // Drop the parameter list: the ')' at the end and its matching '('.
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      else if (name[i] == '(' && --depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  return name;
}

#if GEMMSCOPE_HAVE_CUPTI

namespace {

using EnableFn = CUptiResult (*)(CUpti_ActivityKind);
using RegisterFn = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
using FlushFn = CUptiResult (*)(uint32_t);
using NextFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
using ResultStringFn = CUptiResult (*)(CUptiResult, const char**);
using VersionFn = CUptiResult (*)(uint32_t*);

struct Cupti {
  EnableFn enable = nullptr, disable = nullptr;
  RegisterFn register_callbacks = nullptr;
  FlushFn flush_all = nullptr;
  NextFn next_record = nullptr;
  ResultStringFn result_string = nullptr;
  VersionFn version = nullptr;
};

Cupti g_cupti;
std::mutex g_mu;
std::vector<KernelLaunch> g_launches;  // filled by the buffer-complete callback

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI wants 8-byte aligned buffers.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (!buffer) return;
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* rec = nullptr;
    while (g_cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      g_launches.push_back({readable_kernel_name(k->name), static_cast<double>(k->end - k->start)});
    }
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult r, const char* call) {
  const char* s = nullptr;
  if (g_cupti.result_string) g_cupti.result_string(r, &s);
  return fmt::format("{} failed: {}", call, s ? s : std::to_string(static_cast<int>(r)));
}

void* open_cupti(std::string& tried) {
  // The toolkit's CUPTI matching our headers' major version first, then the loader's path.
  const char* candidates[] = {"libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                              "/usr/local/cuda/lib64/libcupti.so.13", "libcupti.so",
                              "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so"};
  for (const char* c : candidates) {
    if (void* h = dlopen(c, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += tried.empty() ? c : std::string(", ") + c;
  }
  return nullptr;
}

}  // namespace

KernelTracer::KernelTracer() {
  std::string tried;
  void* h = open_cupti(tried);
  if (!h) {
    why_not_ = fmt::format("libcupti could not be loaded (tried {}); kernel records need CUPTI from the CUDA toolkit",
                           tried);
    return;
  }
  auto sym = [&](const char* name) { return dlsym(h, name); };
  g_cupti.enable = reinterpret_cast<EnableFn>(sym("cuptiActivityEnable"));
  g_cupti.disable = reinterpret_cast<EnableFn>(sym("cuptiActivityDisable"));
  g_cupti.register_callbacks = reinterpret_cast<RegisterFn>(sym("cuptiActivityRegisterCallbacks"));
  g_cupti.flush_all = reinterpret_cast<FlushFn>(sym("cuptiActivityFlushAll"));
  g_cupti.next_record = reinterpret_cast<NextFn>(sym("cuptiActivityGetNextRecord"));
  g_cupti.result_string = reinterpret_cast<ResultStringFn>(sym("cuptiGetResultString"));
  g_cupti.version = reinterpret_cast<VersionFn>(sym("cuptiGetVersion"));
  if (!g_cupti.enable || !g_cupti.disable || !g_cupti.register_callbacks || !g_cupti.flush_all ||
      !g_cupti.next_record || !g_cupti.version) {
    why_not_ = "libcupti lacks the activity API functions";
    return;
  }
  uint32_t v = 0;
  if (g_cupti.version(&v) != CUPTI_SUCCESS || v / 10000 != CUPTI_API_VERSION / 10000) {
    // The kernel record layout (CUpti_ActivityKernel10) is that of this major version.
    why_not_ = fmt::format("libcupti API version {} does not match the {} this build reads", v, CUPTI_API_VERSION);
    return;
  }
  if (const CUptiResult r = g_cupti.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    why_not_ = cupti_error(r, "cuptiActivityRegisterCallbacks");
    return;
  }
  available_ = true;
}

std::vector<KernelLaunch> KernelTracer::trace(cudaStream_t s, const std::function<void()>& fn) {
  if (!available_) throw Unsupported(why_not_);
  GS_CUDA(cudaStreamSynchronize(s));
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    g_launches.clear();
  }
  if (const CUptiResult r = g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS)
    throw Unsupported(cupti_error(r, "cuptiActivityEnable"));
  try {
    fn();
    if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      throw Unsupported(fmt::format("CUDA error while tracing: {}", cudaGetErrorString(e)));
  } catch (...) {
    g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    throw;
  }
  const CUptiResult fr = g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (fr != CUPTI_SUCCESS) throw Unsupported(cupti_error(fr, "cuptiActivityFlushAll"));
  const std::lock_guard<std::mutex> lock(g_mu);
  return std::move(g_launches);
}

#else  // built without CUPTI headers

KernelTracer::KernelTracer() { why_not_ = "this build has no CUPTI headers (kernel records need CUPTI)"; }

std::vector<KernelLaunch> KernelTracer::trace(cudaStream_t, const std::function<void()>&) {
  throw Unsupported(why_not_);
}

#endif

KernelTracer& KernelTracer::get() {
  static KernelTracer* t = new KernelTracer();  // never destroyed: CUPTI may call back at exit
  return *t;
}

CellKernels trace_cell(const GemmOptions& o, cudaStream_t s, const std::function<void()>& step) {
  CellKernels k;
  if (o.profile) {
    k.trace_note = "--profile: gemmscope's own CUPTI trace is off so that the profiler owns CUPTI";
    return k;
  }
  if (!o.trace_kernels || o.trace_iters < 1) {
    k.trace_note = "kernel tracing off";
    return k;
  }
  KernelTracer& t = KernelTracer::get();
  if (!t.available()) {
    k.trace_note = t.why_not();
    return k;
  }
  try {
    const std::vector<KernelLaunch> launches = t.trace(s, [&] {
      for (int i = 0; i < o.trace_iters; ++i) step();
    });
    k.traced = true;
    k.trace_iters = o.trace_iters;
    k.kernels = aggregate_launches(launches, o.trace_iters);
  } catch (const std::runtime_error& e) {
    k.trace_note = fmt::format("kernel trace failed: {}", e.what());
  }
  return k;
}

CellRange::CellRange(Mode m, const Gemm& g, Precision p) { nvtxRangePushA(cell_range_name(m, g, p).c_str()); }
CellRange::~CellRange() { nvtxRangePop(); }

ProfileBracket::ProfileBracket(bool on) : on_(on) {
  if (on_ && cudaProfilerStart() != cudaSuccess) {
    cudaGetLastError();
    on_ = false;
  }
}

void ProfileBracket::stop() {
  if (!on_) return;
  on_ = false;
  cudaProfilerStop();
}

}  // namespace gs::cuda

#include "cuda/providers/deepgemm/nvrtc_lib.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "core/gpu/arch_policy.hpp"

namespace gs::dg {

namespace {
// NVRTC's C ABI, declared here so the build needs no nvrtc.h (and no link to libnvrtc).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
}  // namespace

struct Nvrtc::Fns {
  nvrtcResult (*version)(int*, int*) = nullptr;
  const char* (*error_string)(nvrtcResult) = nullptr;
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  nvrtcResult (*destroy)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*add_name)(nvrtcProgram, const char*) = nullptr;
  nvrtcResult (*lowered)(nvrtcProgram, const char*, const char**) = nullptr;
};

std::vector<std::string> default_nvrtc_candidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("GEMMSCOPE_NVRTC"); p && *p) c.emplace_back(p);
  c.emplace_back("libnvrtc.so.13");
  if (const char* h = std::getenv("CUDA_HOME"); h && *h) c.emplace_back(std::string(h) + "/lib64/libnvrtc.so.13");
  c.emplace_back("/usr/local/cuda/lib64/libnvrtc.so.13");
  return c;
}

Nvrtc& Nvrtc::get() {
  static Nvrtc instance(default_nvrtc_candidates());
  return instance;
}

Nvrtc::Nvrtc(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& c : candidates) {
    lib_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_) break;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  if (!lib_) {
    why_ = fmt::format("DeepGEMM unavailable: NVRTC (libnvrtc.so.13) not found (tried {}); install the CUDA 13 NVRTC "
                       "runtime or set GEMMSCOPE_NVRTC", tried);
    return;
  }
  f_ = new Fns;
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name));
    if (!fn) { ok = false; why_ = fmt::format("DeepGEMM unavailable: libnvrtc lacks {}", name); }
  };
  sym(f_->version, "nvrtcVersion");
  sym(f_->error_string, "nvrtcGetErrorString");
  sym(f_->create, "nvrtcCreateProgram");
  sym(f_->destroy, "nvrtcDestroyProgram");
  sym(f_->compile, "nvrtcCompileProgram");
  sym(f_->log_size, "nvrtcGetProgramLogSize");
  sym(f_->log, "nvrtcGetProgramLog");
  sym(f_->cubin_size, "nvrtcGetCUBINSize");
  sym(f_->cubin, "nvrtcGetCUBIN");
  sym(f_->add_name, "nvrtcAddNameExpression");
  sym(f_->lowered, "nvrtcGetLoweredName");
  if (!ok) { dlclose(lib_); lib_ = nullptr; delete f_; f_ = nullptr; return; }
  f_->version(&major_, &minor_);
  if (major_ < 12) {
    why_ = fmt::format("DeepGEMM unavailable: NVRTC {}.{} is too old ({} kernels need 12.3 or newer)", major_, minor_,
                       ArchPolicy::arch_kernels_target().arch);
    dlclose(lib_); lib_ = nullptr; delete f_; f_ = nullptr;
  }
}

Nvrtc::~Nvrtc() {
  // The library stays loaded for the process lifetime: cubins it produced may still be in use.
  delete f_;
}

CompileResult Nvrtc::compile(const std::string& source, const std::string& name,
                             const std::vector<std::pair<std::string, const char*>>& headers,
                             const std::vector<std::string>& options, const std::string& name_expression) const {
  CompileResult r;
  if (!available()) { r.log = why_; return r; }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> hnames, htexts, opts;
  for (const auto& [n, t] : headers) { hnames.push_back(n.c_str()); htexts.push_back(t); }
  for (const auto& o : options) opts.push_back(o.c_str());
  nvrtcProgram prog = nullptr;
  nvrtcResult e = f_->create(&prog, source.c_str(), name.c_str(), static_cast<int>(hnames.size()), htexts.data(), hnames.data());
  if (e != 0) { r.log = fmt::format("nvrtcCreateProgram: {}", f_->error_string(e)); return r; }
  f_->add_name(prog, name_expression.c_str());
  e = f_->compile(prog, static_cast<int>(opts.size()), opts.data());
  size_t n = 0;
  f_->log_size(prog, &n);
  if (n > 1) { r.log.resize(n); f_->log(prog, r.log.data()); r.log.resize(n - 1); }
  if (e == 0) {
    size_t cn = 0;
    f_->cubin_size(prog, &cn);
    r.cubin.resize(cn);
    f_->cubin(prog, r.cubin.data());
    const char* lowered = nullptr;
    if (f_->lowered(prog, name_expression.c_str(), &lowered) == 0 && lowered) r.lowered_name = lowered;
    r.ok = !r.cubin.empty() && !r.lowered_name.empty();
    if (!r.ok && r.log.empty()) r.log = "NVRTC produced no cubin or no kernel name";
  } else if (r.log.empty()) {
    r.log = f_->error_string(e);
  }
  f_->destroy(&prog);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace gs::dg

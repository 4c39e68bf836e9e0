// NVRTC loaded at run time (dlopen libnvrtc.so.13): the toolkit ships no static NVRTC, and a
// node without it must still run every other provider, with one line saying why DeepGEMM cannot.
#pragma once
#include <string>
#include <vector>

namespace gs::dg {

struct CompileResult {
  bool ok = false;
  std::string cubin;        // the compiled machine code
  std::string lowered_name; // the kernel's mangled name, for cuModuleGetFunction
  std::string log;          // NVRTC's log (the error text when !ok)
  double seconds = 0;       // wall time of the compile
};

class Nvrtc {
 public:
  // The process-wide loader; `available()` false with `why()` when the library is absent.
  static Nvrtc& get();
  // Loads from an explicit path list (tests use a path that does not exist).
  explicit Nvrtc(const std::vector<std::string>& candidates);
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  bool available() const { return lib_ != nullptr; }
  const std::string& why() const { return why_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  // Compiles `source` (named `name`) with in-memory headers to a cubin for `options`' arch and
  // looks up the lowered name of `name_expression` (e.g. "&ns::kernel<1, 2>").
  CompileResult compile(const std::string& source, const std::string& name,
                        const std::vector<std::pair<std::string, const char*>>& headers,
                        const std::vector<std::string>& options, const std::string& name_expression) const;

 private:
  void* lib_ = nullptr;
  std::string why_;
  int major_ = 0, minor_ = 0;
  struct Fns;
  Fns* f_ = nullptr;
};

// The default candidates: $GEMMSCOPE_NVRTC if set, then libnvrtc.so.13, then $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64 copies of it.
std::vector<std::string> default_nvrtc_candidates();

}  // namespace gs::dg

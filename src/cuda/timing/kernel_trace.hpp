// Kernel-level instrumentation of a measured cell, outside its timed loop:
//  - CUPTI kernel activity (libcupti loaded with dlopen, so the binary runs where CUPTI is
//    absent; the cell then says why it has no kernel records),
//  - an NVTX range per cell (header-only NVTX3; free when no tool listens),
//  - cudaProfilerStart/Stop around the timed loop only (--profile), for
//    nsys --capture-range=cudaProfilerApi and ncu --profile-from-start off.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "core/results/kernels.hpp"
#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"

namespace gs::cuda {

// Process-wide (CUPTI's activity buffers are global). Loads libcupti on first use.
class KernelTracer {
 public:
  static KernelTracer& get();
  bool available() const { return available_; }
  const std::string& why_not() const { return why_not_; }  // set when !available()
  // Synchronizes `s`, records kernel activity while fn() enqueues work on it, synchronizes the
  // device and returns every kernel that ran in between (name demangled, GPU duration).
  // Throws std::runtime_error when CUPTI reports an error.
  std::vector<KernelLaunch> trace(cudaStream_t s, const std::function<void()>& fn);

 private:
  KernelTracer();
  bool available_ = false;
  std::string why_not_;
};

// The kernels of `o.trace_iters` calls of step() (after the timed loop), or a trace note saying
// why there are none (CUPTI missing, --profile, an error). Never throws for CUPTI problems.
CellKernels trace_cell(const GemmOptions& o, cudaStream_t s, const std::function<void()>& step);

// NVTX range "gemmscope/<mode>/<pass>/<op>/<precision>" for the scope of one cell's measurement.
class CellRange {
 public:
  CellRange(Mode m, const Gemm& g, Precision p);
  ~CellRange();
  CellRange(const CellRange&) = delete;
  CellRange& operator=(const CellRange&) = delete;
};

// --profile: cudaProfilerStart() at construction, cudaProfilerStop() at stop() or destruction
// (once); nothing when `on` is false.
class ProfileBracket {
 public:
  explicit ProfileBracket(bool on);
  void stop();
  ~ProfileBracket() { stop(); }
  ProfileBracket(const ProfileBracket&) = delete;
  ProfileBracket& operator=(const ProfileBracket&) = delete;

 private:
  bool on_;
};

// A demangled kernel name without its parameter list ("void ns::k<int>(float*)" -> "ns::k<int>").
std::string readable_kernel_name(const char* raw);

}  // namespace gs::cuda

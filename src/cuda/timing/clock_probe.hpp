// SM clock and clock-event reasons of a CUDA device through NVML, opened at run time
// (dlopen of the driver's libnvidia-ml.so.1): the binary keeps working, without clock samples,
// where NVML is missing. Used by the engine to sample each cell halfway through its timed loop.
#pragma once
#include <optional>
#include <string>

#include "core/results/results.hpp"

namespace gs::cuda {

class ClockProbe {
 public:
  explicit ClockProbe(int cuda_device);  // never throws; see available() / why()
  ~ClockProbe();
  ClockProbe(const ClockProbe&) = delete;
  ClockProbe& operator=(const ClockProbe&) = delete;
  bool available() const { return device_ != nullptr; }
  const std::string& why() const { return why_; }  // why not available
  std::optional<ClockSample> sample() const;       // nullopt when unavailable or a query fails

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  int max_sm_mhz_ = 0;
  std::string why_;
  // NVML entry points (C ABI; return 0 = NVML_SUCCESS).
  int (*clock_info_)(void*, int, unsigned int*) = nullptr;
  int (*reasons_)(void*, unsigned long long*) = nullptr;
  int (*temperature_)(void*, int, unsigned int*) = nullptr;  // optional
  int (*power_)(void*, unsigned int*) = nullptr;              // optional (milliwatts)
  int (*shutdown_)() = nullptr;
};

}  // namespace gs::cuda

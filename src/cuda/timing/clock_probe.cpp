#include "cuda/timing/clock_probe.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace gs::cuda {

namespace {
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}
}  // namespace

ClockProbe::ClockProbe(int cuda_device) {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    why_ = "libnvidia-ml.so.1 not found";
    return;
  }
  auto init = symbol<int (*)()>(lib_, "nvmlInit_v2");
  auto by_pci = symbol<int (*)(const char*, void**)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  auto max_clock = symbol<int (*)(void*, int, unsigned int*)>(lib_, "nvmlDeviceGetMaxClockInfo");
  clock_info_ = symbol<int (*)(void*, int, unsigned int*)>(lib_, "nvmlDeviceGetClockInfo");
  reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!reasons_) reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  shutdown_ = symbol<int (*)()>(lib_, "nvmlShutdown");
  temperature_ = symbol<int (*)(void*, int, unsigned int*)>(lib_, "nvmlDeviceGetTemperature");
  power_ = symbol<int (*)(void*, unsigned int*)>(lib_, "nvmlDeviceGetPowerUsage");
  if (!init || !by_pci || !max_clock || !clock_info_ || !reasons_ || !shutdown_) {
    why_ = "libnvidia-ml.so.1 lacks a needed entry point";
    return;
  }
  if (init() != 0) {
    why_ = "nvmlInit failed";
    shutdown_ = nullptr;
    return;
  }
  char bus[32] = {};
  void* dev = nullptr;
  unsigned int max_mhz = 0;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
    cudaGetLastError();
    why_ = "no PCI bus id for the CUDA device";
  } else if (by_pci(bus, &dev) != 0) {
    why_ = std::string("NVML does not know device ") + bus;
  } else if (max_clock(dev, kNvmlClockSm, &max_mhz) != 0) {
    why_ = "NVML cannot read the maximum SM clock";
  } else {
    device_ = dev;
    max_sm_mhz_ = static_cast<int>(max_mhz);
  }
}

ClockProbe::~ClockProbe() {
  if (shutdown_) shutdown_();
  if (lib_) dlclose(lib_);
}

std::optional<ClockSample> ClockProbe::sample() const {
  if (!device_) return std::nullopt;
  unsigned int mhz = 0;
  unsigned long long reasons = 0;
  if (clock_info_(device_, kNvmlClockSm, &mhz) != 0 || reasons_(device_, &reasons) != 0) return std::nullopt;
  ClockSample s;
  s.sm_mhz = static_cast<int>(mhz);
  s.max_sm_mhz = max_sm_mhz_;
  s.reasons = reasons;
  unsigned int t = 0, mw = 0;
  if (temperature_ && temperature_(device_, 0 /* NVML_TEMPERATURE_GPU */, &t) == 0) s.temp_c = static_cast<int>(t);
  if (power_ && power_(device_, &mw) == 0) s.power_w = mw / 1000.0;
  return s;
}

}  // namespace gs::cuda

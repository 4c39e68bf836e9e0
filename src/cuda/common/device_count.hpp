// How many CUDA devices this process sees (fleet mode, the NCCL collectives), and why a device
// cannot be used (the engine, make_engine).
#pragma once
#include <string>

namespace gs::cuda {

// The visible devices (CUDA_VISIBLE_DEVICES applies), or 0 with `why` set (no driver, no device).
int visible_device_count(std::string& why);

// Why CUDA device `device` cannot be used here: no driver library ("no NVIDIA driver found ..."),
// the runtime's own error, no device, or an index beyond the visible devices (named as --device);
// "" when it can.
std::string device_unavailable_reason(int device);

}  // namespace gs::cuda

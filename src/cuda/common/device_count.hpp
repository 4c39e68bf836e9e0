// How many CUDA devices this process sees (fleet mode, the NCCL collectives).
#pragma once
#include <string>

namespace gs::cuda {

// The visible devices (CUDA_VISIBLE_DEVICES applies), or 0 with `why` set (no driver, no device).
int visible_device_count(std::string& why);

}  // namespace gs::cuda

// The NCCL implementation of gs::CommEngine (core/collectives.hpp): one process, one communicator
// per group size over the first N local GPUs (ncclCommInitAll), each collective timed with CUDA
// events on every rank's stream (the slowest rank counts). libnccl.so.2 is loaded with dlopen, so
// the binary runs where NCCL is absent; then make_nccl_engine says why it cannot measure.
#pragma once
#include <memory>
#include <string>

#include "core/collectives.hpp"

namespace gs::cuda {

// An engine over the visible GPUs, or nullptr with `why` set (no NCCL library, no GPU, a failed
// communicator).
std::unique_ptr<CommEngine> make_nccl_engine(std::string& why);

}  // namespace gs::cuda

// The NCCL implementation of gs::CommEngine (core/node/collectives.hpp): one process, one communicator
// per group size over the first N local GPUs (ncclCommInitAll), or one rank per process under MPI, each collective timed with CUDA
// events on every rank's stream (the slowest rank counts). libnccl.so.2 is loaded with dlopen, so
// the binary runs where NCCL is absent; then make_nccl_engine says why it cannot measure.
#pragma once
#include <memory>
#include <string>

#include "core/node/collectives.hpp"
#include "core/node/process_group.hpp"

namespace gs::cuda {

// Whether this build has NCCL's types (nccl.h at build time); without them no engine is made.
bool nccl_built();
// Why this process cannot measure collectives at all: built without nccl.h, or libnccl.so.2 does
// not load (it is loaded once per process); "" when NCCL is there, so that an engine that then
// fails is about the GPUs or NCCL itself, not a missing optional library.
std::string nccl_unavailable_reason();

// An engine over the visible GPUs, or nullptr with `why` set (no NCCL library, no GPU, a failed
// communicator).
std::unique_ptr<CommEngine> make_nccl_engine(std::string& why);

// Under MPI: one rank per process, each on its node-local GPU (local rank = device), communicators
// over ranks 0..N-1 bootstrapped with ncclCommInitRank from a unique id rank 0 broadcasts through
// `pg`; each iteration's time is the slowest rank's (pg's maximum). Every rank must call it and then
// the engine's functions in the same order. nullptr with `why` on every rank when any rank cannot
// take part (no NCCL, no GPU, a local rank beyond its node's GPUs).
std::unique_ptr<CommEngine> make_nccl_engine(ProcessGroup& pg, std::string& why);

}  // namespace gs::cuda

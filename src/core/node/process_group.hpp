// The processes of one run started by a launcher (mpirun, srun): this process's rank, the world
// size, the node-local rank (which picks the GPU), its host, and the few collectives gemmscope needs
// (docs/node.md, "Several processes: MPI"). A pure interface: the implementation over the optional
// MPI plugin is the front end's (src/cli/mpi_plugin.*), the NCCL engine (src/cuda/comm/nccl_comm.*)
// bootstraps its communicators through it, and tests can fake it. Failures throw std::runtime_error.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace gs {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes of this host
  virtual std::string host() const = 0;
  virtual std::string library() const = 0;  // "Open MPI v4.1.4"
  // Every rank calls each of these, in the same order.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's string, in rank order, on `root`; elsewhere empty.
  virtual std::vector<std::string> gather(const std::string& mine, int root) = 0;
  // Element-wise maximum over the ranks, in place, on every rank (the slowest rank's time).
  virtual void max_in_place(std::vector<double>& values) = 0;
  virtual void barrier() = 0;
};

}  // namespace gs

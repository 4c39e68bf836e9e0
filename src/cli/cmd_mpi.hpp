// `gemmscope ... --mpi`, or any run started by an MPI launcher with more than one process
// (docs/node.md, "Several processes: MPI"): each rank measures its node-local GPU, --comm's NCCL
// communicators are bootstrapped through MPI, and rank 0 prints one report naming hosts and GPUs.
#pragma once

namespace gs::cli {

// Whether dispatch() hands this command line to run_mpi: --mpi given, or a launcher announced more
// than one process (mpi_plugin.hpp, launcher_world_size).
bool mpi_wanted(int argc, char** argv);

// The run of `run_main` (cli.cpp's single-process run) on every rank, with --device <local rank>,
// then the merge on rank 0. Exit 2 with one line when the plugin cannot be loaded (how to get it)
// or a flag cannot be combined with it; rank 0 returns the worst exit status of any rank.
int run_mpi(int argc, char** argv, int (*run_main)(int, char**));

}  // namespace gs::cli

// The optional MPI plugin (libgemmscope_mpi.so, src/mpi/gemmscope_mpi.h) seen from the front end:
// whether this process was started by an MPI launcher, loading the plugin with dlopen, and the
// gs::ProcessGroup over it (core/node/process_group.hpp). The binary never links MPI.
#pragma once
#include <memory>
#include <string>

#include "core/node/process_group.hpp"

namespace gs::cli {

// The world size a launcher announced in the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// PMIX_SIZE, MV2_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS: the first set), or 0 when none is.
int launcher_world_size();

// Where the plugin is looked for: $GEMMSCOPE_PLUGIN_DIR, then the running binary's folder.
std::string mpi_plugin_search_text();

// Loads the plugin and initializes MPI: a ProcessGroup, or nullptr with `why` set (plugin absent,
// libmpi.so.40 missing, another ABI version, MPI_Init failed).
std::unique_ptr<ProcessGroup> load_mpi(std::string& why);

// The process group of this run while run_mpi runs (cmd_mpi.cpp), else nullptr: --comm bootstraps
// NCCL through it.
ProcessGroup* current_process_group();
void set_current_process_group(ProcessGroup* pg);

// The one line `--mpi` without the plugin exits with.
std::string mpi_unavailable_message(const std::string& why);

}  // namespace gs::cli

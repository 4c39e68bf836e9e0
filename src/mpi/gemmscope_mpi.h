/* The C interface of libgemmscope_mpi.so, the optional MPI plugin (docs/node.md, docs/architecture.md).
 * gemmscope never links MPI: it dlopens this plugin (src/cli/mpi_plugin.cpp) when started under an MPI
 * launcher or with --mpi, and calls only the functions below. The plugin is the one place that includes
 * mpi.h; it is built when CMake finds MPI (FindMPI) and links only libmpi (C API).
 *
 * Every function returns 0 on success; on failure a non-zero value, and gs_mpi_last_error() says why.
 * Collectives are over MPI_COMM_WORLD and must be called by every rank in the same order. */
#ifndef GEMMSCOPE_MPI_H
#define GEMMSCOPE_MPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a signature below changes; the loader refuses a plugin of another version. */
#define GS_MPI_ABI_VERSION 1

int gs_mpi_abi_version(void);
/* MPI_Init_thread (FUNNELED) unless MPI is already initialized; the node-local rank from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). */
int gs_mpi_init(void);
int gs_mpi_rank(void);
int gs_mpi_size(void);
int gs_mpi_local_rank(void);
int gs_mpi_local_size(void);
/* MPI_Get_processor_name and MPI_Get_library_version (first line), NUL-terminated, cut to len. */
int gs_mpi_processor_name(char* buf, size_t len);
int gs_mpi_library_version(char* buf, size_t len);
/* MPI_Bcast of `bytes` bytes from `root`. */
int gs_mpi_bcast(void* buf, size_t bytes, int root);
/* Gathers every rank's byte string to `root`: there *out (allocated by the plugin, released with
 * gs_mpi_free) holds them back to back and lengths[i] (size entries, caller's) each rank's length;
 * elsewhere *out is NULL. The total must stay below 2 GiB. */
int gs_mpi_gather(const void* mine, size_t bytes, int root, char** out, size_t* lengths);
/* Element-wise maximum over all ranks, in place, on every rank. */
int gs_mpi_allreduce_max(double* values, size_t n);
int gs_mpi_barrier(void);
/* MPI_Abort(MPI_COMM_WORLD, code): ends every rank. */
void gs_mpi_abort(int code);
int gs_mpi_finalize(void);
void gs_mpi_free(void* p);
const char* gs_mpi_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

// libgemmscope_mpi.so: the C interface of gemmscope_mpi.h over MPI's C API (MPI_COMM_WORLD).
// Built only when CMake finds MPI; gemmscope loads it with dlopen (src/cli/mpi_plugin.cpp).
#include "mpi/gemmscope_mpi.h"

// MPI's C API only: no C++ bindings (they would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string g_error;
int g_rank = -1, g_size = 0, g_local_rank = -1, g_local_size = 0;
bool g_we_initialized = false;

int fail(const char* what, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) std::snprintf(msg, sizeof msg, "MPI error %d", rc);
  g_error = std::string(what) + ": " + msg;
  return rc == 0 ? 1 : rc;
}

void copy_out(const char* s, char* buf, size_t len) {
  if (!buf || len == 0) return;
  std::snprintf(buf, len, "%s", s);
}

}  // namespace

extern "C" {

int gs_mpi_abi_version(void) { return GS_MPI_ABI_VERSION; }

int gs_mpi_init(void) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return fail("MPI_Init_thread", rc);
    g_we_initialized = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (rc != MPI_SUCCESS) return fail("MPI_Comm_rank/size", rc);
  MPI_Comm local = MPI_COMM_NULL;
  rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return fail("MPI_Comm_split_type", rc);
  MPI_Comm_rank(local, &g_local_rank);
  MPI_Comm_size(local, &g_local_size);
  MPI_Comm_free(&local);
  return 0;
}

int gs_mpi_rank(void) { return g_rank; }
int gs_mpi_size(void) { return g_size; }
int gs_mpi_local_rank(void) { return g_local_rank; }
int gs_mpi_local_size(void) { return g_local_size; }

int gs_mpi_processor_name(char* buf, size_t len) {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int n = 0;
  const int rc = MPI_Get_processor_name(name, &n);
  if (rc != MPI_SUCCESS) return fail("MPI_Get_processor_name", rc);
  copy_out(name, buf, len);
  return 0;
}

int gs_mpi_library_version(char* buf, size_t len) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {};
  int n = 0;
  const int rc = MPI_Get_library_version(v, &n);
  if (rc != MPI_SUCCESS) return fail("MPI_Get_library_version", rc);
  char* nl = std::strpbrk(v, "\r\n,");
  if (nl) *nl = '\0';
  copy_out(v, buf, len);
  return 0;
}

int gs_mpi_bcast(void* buf, size_t bytes, int root) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    g_error = "gs_mpi_bcast: more than 2 GiB";
    return 1;
  }
  const int rc = MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail("MPI_Bcast", rc);
}

int gs_mpi_gather(const void* mine, size_t bytes, int root, char** out, size_t* lengths) {
  if (out) *out = nullptr;
  if (bytes > static_cast<size_t>(INT_MAX)) {
    g_error = "gs_mpi_gather: more than 2 GiB from one rank";
    return 1;
  }
  const int n = static_cast<int>(bytes);
  std::vector<int> counts(g_rank == root ? static_cast<size_t>(g_size) : 1, 0);
  int rc = MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return fail("MPI_Gather", rc);
  std::vector<int> displs(counts.size(), 0);
  long long total = 0;
  if (g_rank == root) {
    for (size_t i = 0; i < counts.size(); ++i) {
      displs[i] = static_cast<int>(total);
      total += counts[i];
      if (total > INT_MAX) {
        // Every rank must still take part in the Gatherv: send nothing, and report the failure.
        g_error = "gs_mpi_gather: more than 2 GiB in all";
        total = -1;
        break;
      }
    }
  }
  // Tell every rank whether the gather goes ahead, so that none waits for it alone.
  int ok = total >= 0;
  rc = MPI_Bcast(&ok, 1, MPI_INT, root, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return fail("MPI_Bcast", rc);
  if (!ok) return 1;
  char* buf = nullptr;
  if (g_rank == root) {
    buf = static_cast<char*>(std::malloc(static_cast<size_t>(total) + 1));
    if (!buf) {
      g_error = "gs_mpi_gather: out of memory";
      // Still take part; rank 0's buffer is required, so abort the world rather than hang it.
      MPI_Abort(MPI_COMM_WORLD, 70);
      return 1;
    }
  }
  rc = MPI_Gatherv(mine, n, MPI_BYTE, buf, counts.data(), displs.data(), MPI_BYTE, root, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    std::free(buf);
    return fail("MPI_Gatherv", rc);
  }
  if (g_rank == root) {
    for (size_t i = 0; i < counts.size(); ++i) lengths[i] = static_cast<size_t>(counts[i]);
    if (out) *out = buf;
    else std::free(buf);
  }
  return 0;
}

int gs_mpi_allreduce_max(double* values, size_t n) {
  if (n > static_cast<size_t>(INT_MAX)) {
    g_error = "gs_mpi_allreduce_max: too many values";
    return 1;
  }
  const int rc = MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail("MPI_Allreduce", rc);
}

int gs_mpi_barrier(void) {
  const int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail("MPI_Barrier", rc);
}

void gs_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int gs_mpi_finalize(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || !g_we_initialized) return 0;
  const int rc = MPI_Finalize();
  return rc == MPI_SUCCESS ? 0 : fail("MPI_Finalize", rc);
}

void gs_mpi_free(void* p) { std::free(p); }

const char* gs_mpi_last_error(void) { return g_error.c_str(); }

}  // extern "C"

// Loading libgemmscope_mpi.so (mpi_plugin.hpp).
#include "cli/mpi_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/io/input_file.hpp"
#include "core/util/text_util.hpp"
#include "mpi/gemmscope_mpi.h"

namespace gs::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPluginName = "libgemmscope_mpi.so";

ProcessGroup* g_current = nullptr;

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return fs::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

struct Api {
  decltype(&gs_mpi_abi_version) abi_version = nullptr;
  decltype(&gs_mpi_init) init = nullptr;
  decltype(&gs_mpi_rank) rank = nullptr;
  decltype(&gs_mpi_size) size = nullptr;
  decltype(&gs_mpi_local_rank) local_rank = nullptr;
  decltype(&gs_mpi_processor_name) processor_name = nullptr;
  decltype(&gs_mpi_library_version) library_version = nullptr;
  decltype(&gs_mpi_bcast) bcast = nullptr;
  decltype(&gs_mpi_gather) gather = nullptr;
  decltype(&gs_mpi_allreduce_max) allreduce_max = nullptr;
  decltype(&gs_mpi_barrier) barrier = nullptr;
  decltype(&gs_mpi_finalize) finalize = nullptr;
  decltype(&gs_mpi_free) free = nullptr;
  decltype(&gs_mpi_last_error) last_error = nullptr;
};

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup(void* handle, Api api) : handle_(handle), api_(api) {
    rank_ = api_.rank();
    size_ = api_.size();
    local_rank_ = api_.local_rank();
    char buf[512] = {};
    if (api_.processor_name(buf, sizeof buf) == 0) host_ = printable(buf);
    if (host_.empty()) {
      char h[256] = {};
      ::gethostname(h, sizeof h - 1);
      host_ = printable(h);
    }
    char v[512] = {};
    if (api_.library_version(v, sizeof v) == 0) library_ = clip_text(printable(v), 120);
  }
  ~MpiGroup() override { api_.finalize(); }  // the handle stays open: MPI may have threads left
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string host() const override { return host_; }
  std::string library() const override { return library_; }
  void broadcast(void* data, size_t bytes, int root) override { check(api_.bcast(data, bytes, root), "broadcast"); }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    std::vector<size_t> lengths(static_cast<size_t>(size_), 0);
    char* out = nullptr;
    check(api_.gather(mine.data(), mine.size(), root, &out, lengths.data()), "gather");
    std::vector<std::string> all;
    if (rank_ != root) return all;
    size_t off = 0;
    for (size_t len : lengths) {
      all.emplace_back(out + off, len);
      off += len;
    }
    api_.free(out);
    return all;
  }
  void max_in_place(std::vector<double>& values) override {
    check(api_.allreduce_max(values.data(), values.size()), "maximum over the ranks");
  }
  void barrier() override { check(api_.barrier(), "barrier"); }

 private:
  void check(int rc, const char* what) const {
    if (rc != 0) throw std::runtime_error(fmt::format("MPI {}: {}", what, api_.last_error()));
  }
  void* handle_;
  Api api_;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_, library_;
};

}  // namespace

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end && *end == '\0' && n > 0 && n < INT_MAX) return static_cast<int>(n);
  }
  return 0;
}

std::string mpi_plugin_search_text() {
  const char* dir = std::getenv("GEMMSCOPE_PLUGIN_DIR");
  std::string where = dir && *dir ? fmt::format("$GEMMSCOPE_PLUGIN_DIR ({})", printable(dir)) : "$GEMMSCOPE_PLUGIN_DIR (unset)";
  return fmt::format("{} or next to the binary ({})", clip_text(where, 200), clip_text(printable(exe_dir()), 200));
}

std::string mpi_unavailable_message(const std::string& why) {
  return fmt::format("--mpi: {}. Multi-process runs need {}: build gemmscope where CMake finds MPI (Debian: "
                     "libopenmpi-dev) and put the plugin in {}",
                     why, kPluginName, mpi_plugin_search_text());
}

std::unique_ptr<ProcessGroup> load_mpi(std::string& why) {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("GEMMSCOPE_PLUGIN_DIR"); dir && *dir)
    candidates.push_back((fs::path(dir) / kPluginName).string());
  if (const std::string d = exe_dir(); !d.empty()) candidates.push_back((fs::path(d) / kPluginName).string());
  void* handle = nullptr;
  std::string errors;
  for (const std::string& c : candidates) {
    std::error_code ec;
    if (!fs::exists(c, ec)) continue;
    // RTLD_GLOBAL: Open MPI's own components, loaded later by libmpi, look up its symbols globally.
    handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle) break;
    const char* e = ::dlerror();
    errors = fmt::format("{} cannot be loaded: {}", c, e ? printable(e) : "unknown error");
  }
  if (!handle) {
    why = errors.empty() ? fmt::format("{} not found", kPluginName) : clip_text(errors, 400);
    return nullptr;
  }
  Api api;
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (!fn && ok) {
      ok = false;
      why = fmt::format("{} has no {}", kPluginName, name);
    }
  };
  sym(api.abi_version, "gs_mpi_abi_version");
  sym(api.init, "gs_mpi_init");
  sym(api.rank, "gs_mpi_rank");
  sym(api.size, "gs_mpi_size");
  sym(api.local_rank, "gs_mpi_local_rank");
  sym(api.processor_name, "gs_mpi_processor_name");
  sym(api.library_version, "gs_mpi_library_version");
  sym(api.bcast, "gs_mpi_bcast");
  sym(api.gather, "gs_mpi_gather");
  sym(api.allreduce_max, "gs_mpi_allreduce_max");
  sym(api.barrier, "gs_mpi_barrier");
  sym(api.finalize, "gs_mpi_finalize");
  sym(api.free, "gs_mpi_free");
  sym(api.last_error, "gs_mpi_last_error");
  if (!ok) return nullptr;
  if (api.abi_version() != GS_MPI_ABI_VERSION) {
    why = fmt::format("{} has interface version {}, this binary needs {}", kPluginName, api.abi_version(),
                      GS_MPI_ABI_VERSION);
    return nullptr;
  }
  if (api.init() != 0) {
    why = fmt::format("MPI could not start: {}", clip_text(printable(api.last_error()), 300));
    return nullptr;
  }
  return std::make_unique<MpiGroup>(handle, api);
}

ProcessGroup* current_process_group() { return g_current; }
void set_current_process_group(ProcessGroup* pg) { g_current = pg; }

}  // namespace gs::cli

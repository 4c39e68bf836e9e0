// gemmscope_mpi_check: the MPI plugin's collectives through gemmscope's own loader
// (src/cli/mpi_plugin.cpp), run by tests/core/node/test_mpi.cpp as
//   mpirun -np N gemmscope_mpi_check        (GEMMSCOPE_PLUGIN_DIR names the plugin's folder)
// Rank 0 prints "mpi-check ok: N ranks ..." when every check passed, else the first failure; every
// rank exits non-zero on a failure it saw.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/mpi_plugin.hpp"
#include "core/node/rank_results.hpp"

namespace {

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "mpi-check: rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main() {
  std::string why;
  std::unique_ptr<gs::ProcessGroup> pg = gs::cli::load_mpi(why);
  if (!pg) {
    std::fprintf(stderr, "mpi-check: %s\n", why.c_str());
    return 3;
  }
  const int rank = pg->rank(), size = pg->size();
  try {
    if (size < 2) return fail(rank, "expected at least 2 ranks, got " + std::to_string(size));
    // Broadcast: 128 bytes from rank 0, as an NCCL unique id travels.
    unsigned char id[128];
    for (int i = 0; i < 128; ++i) id[i] = rank == 0 ? static_cast<unsigned char>(i * 7 + 3) : 0;
    pg->broadcast(id, sizeof id, 0);
    for (int i = 0; i < 128; ++i)
      if (id[i] != static_cast<unsigned char>(i * 7 + 3)) return fail(rank, "broadcast: byte " + std::to_string(i) + " differs");
    // Element-wise maximum: rank r contributes r at index 0 and -r at index 1.
    std::vector<double> v = {static_cast<double>(rank), -static_cast<double>(rank), 0.5};
    pg->max_in_place(v);
    if (v[0] != size - 1 || v[1] != 0 || v[2] != 0.5) return fail(rank, "maximum over the ranks is wrong");
    pg->barrier();
    // Gather: strings of different lengths (rank 1's empty), then real rank reports and their merge.
    const std::string mine = rank == 1 ? std::string() : std::string(static_cast<size_t>(1000 * (rank + 1)), static_cast<char>('a' + rank % 26));
    const std::vector<std::string> all = pg->gather(mine, 0);
    gs::RankReport me;
    me.rank = rank;
    me.host = pg->host();
    me.local_rank = pg->local_rank();
    me.device = pg->local_rank();
    me.output = "output of rank " + std::to_string(rank) + "\n";
    const std::vector<std::string> reports = pg->gather(gs::encode_rank_report(me), 0);
    if (rank != 0) {
      if (!all.empty() || !reports.empty()) return fail(rank, "a rank other than the root received the gather");
      return 0;
    }
    if (static_cast<int>(all.size()) != size) return fail(rank, "gather: wrong number of strings");
    for (int r = 0; r < size; ++r) {
      const std::string expect = r == 1 ? std::string() : std::string(static_cast<size_t>(1000 * (r + 1)), static_cast<char>('a' + r % 26));
      if (all[static_cast<size_t>(r)] != expect) return fail(rank, "gather: rank " + std::to_string(r) + "'s string differs");
    }
    std::vector<gs::RankReport> decoded;
    for (int r = 0; r < size; ++r) decoded.push_back(gs::decode_rank_report(reports[static_cast<size_t>(r)], r));
    const gs::MergedRanks m = gs::merge_rank_reports(decoded);
    if (!m.failures.empty() || m.hosts.empty() || decoded[1].output != "output of rank 1\n")
      return fail(rank, "merged rank reports are wrong");
    std::printf("mpi-check ok: %d ranks, %zu host(s), local ranks of rank 0: %d, %s\n", size, m.hosts.size(),
                pg->local_rank(), pg->library().c_str());
  } catch (const std::exception& e) {
    return fail(rank, e.what());
  }
  return 0;
}

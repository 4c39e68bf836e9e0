// The one scanner of the commands that hand their command line on to worker runs (--all-gpus,
// MPI): cli/argv_scan.hpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/argv_scan.hpp"
#include "core/util/error.hpp"

namespace {

struct Argv {
  std::vector<std::string> words;
  std::vector<char*> ptrs;
  explicit Argv(std::vector<std::string> w) : words(std::move(w)) {
    for (std::string& s : words) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(words.size()); }
  char** argv() { return ptrs.data(); }
};

const gs::cli::WorkerScan kFleet{"--all-gpus", {"--device", "--comm"}, "--all-gpus (every GPU is measured)"};
const gs::cli::WorkerScan kMpi{"--mpi", {"--all-gpus"}, "MPI (each rank its GPU)", /*takes_comm_json=*/true};

}  // namespace

TEST(ArgvScan, TakesItsOwnFlagsAndPassesTheRest) {
  Argv a({"gemmscope", "--all-gpus", "-q", "--model", "llama-3-8b", "--json=f.json", "--fleet-threshold", "5%",
          "--comm-json", "c.json"});
  const gs::cli::WorkerArgs f = gs::cli::scan_worker_args(a.argc(), a.argv(), kFleet);
  EXPECT_EQ(f.json, "f.json");
  EXPECT_DOUBLE_EQ(f.threshold, 0.05);
  EXPECT_TRUE(f.comm_json.empty());  // not the fleet's own: passed on
  EXPECT_EQ(f.pass, (std::vector<std::string>{"--model", "llama-3-8b", "--comm-json", "c.json"}));
  Argv m({"gemmscope", "--mpi", "--comm", "--comm-json", "c.json", "--quiet"});
  const gs::cli::WorkerArgs g = gs::cli::scan_worker_args(m.argc(), m.argv(), kMpi);
  EXPECT_EQ(g.comm_json, "c.json");
  EXPECT_EQ(g.pass, std::vector<std::string>{"--comm"});
  EXPECT_TRUE(gs::cli::has_flag(m.argc(), m.argv(), "--mpi"));
  EXPECT_FALSE(gs::cli::has_flag(m.argc(), m.argv(), "--all-gpus"));
}

TEST(ArgvScan, RefusesWhatTheCommandCannotCombine) {
  for (const char* bad : {"--device", "--device=1", "--comm"}) {
    Argv a({"gemmscope", "--all-gpus", bad});
    try {
      gs::cli::scan_worker_args(a.argc(), a.argv(), kFleet);
      ADD_FAILURE() << bad;
    } catch (const gs::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot be combined with --all-gpus (every GPU is measured)"), std::string::npos)
          << e.what();
    }
  }
  Argv empty({"gemmscope", "--mpi", "--json", ""});
  EXPECT_THROW(gs::cli::scan_worker_args(empty.argc(), empty.argv(), kMpi), gs::UsageError);
  Argv missing({"gemmscope", "--mpi", "--json"});
  EXPECT_THROW(gs::cli::scan_worker_args(missing.argc(), missing.argv(), kMpi), gs::UsageError);
}

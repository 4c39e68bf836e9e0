// Several processes under MPI: the rank reports and their merge (core/node/rank_results.hpp), the MPI
// plugin's collectives under a real `mpirun -np 2` (tests/mpi/mpi_check.cpp), the whole binary
// under mpirun, and the refusals of --mpi (no plugin, flags it cannot take).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/model/model_config.hpp"
#include "core/node/rank_results.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;
namespace fs = std::filesystem;

namespace {

class FixedEngine : public gs::test::FakeEngineBase {
 public:
  explicit FixedEngine(double ms) : ms_(ms) {}
  Cell measure(const Gemm&, Precision, Mode, const std::string&) override {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms_;
    s.iters = 10;
    Cell c = Cell::measured(s);
    c.clock = ClockSample{1755, 1980, 0};
    return c;
  }

 private:
  double ms_;
};

nlohmann::json measured_json(double ms) {
  RunRequest q;
  q.plan = build_model_plan(default_config());
  q.precisions = {Precision::BF16};
  q.modes = {Mode::Training};
  FixedEngine e(ms);
  return to_json(run(e, q));
}

RankReport report(int rank, const std::string& host, std::optional<nlohmann::json> run, int status = 0) {
  RankReport r;
  r.rank = rank;
  r.host = host;
  r.local_rank = rank % 2;
  r.device = rank % 2;
  r.status = status;
  r.error = status ? "bad flag" : "";
  r.output = "text of rank " + std::to_string(rank);
  r.run = std::move(run);
  return r;
}

// An executable on PATH, or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const fs::path cand = fs::path(p.substr(start, end == std::string::npos ? std::string::npos : end - start)) / name;
    std::error_code ec;
    if (fs::exists(cand, ec) && ::access(cand.c_str(), X_OK) == 0) return cand.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// The mpirun command prefix for 2 ranks, or "" (with `why`) when this machine cannot run it.
std::string mpirun_2(std::string& why) {
#ifndef GS_MPI_PLUGIN
  why = "this build has no MPI plugin (CMake found no MPI, or GEMMSCOPE_MPI=OFF)";
  return "";
#else
  const std::string mpirun = on_path("mpirun");
  if (mpirun.empty()) {
    why = "mpirun is not on PATH (Debian: openmpi-bin)";
    return "";
  }
  // vader's single-copy mechanism needs ptrace rights containers often lack.
  return "GEMMSCOPE_PLUGIN_DIR=" + fs::path(GS_MPI_PLUGIN).parent_path().string() +
         " OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 " + mpirun +
         " -np 2 --allow-run-as-root --oversubscribe";
#endif
}

}  // namespace

TEST(MpiRanks, ReportRoundTrip) {
  const RankReport r = report(1, "host-b", measured_json(0.5), 0);
  const RankReport back = decode_rank_report(encode_rank_report(r), 1);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.host, "host-b");
  EXPECT_EQ(back.device, 1);
  EXPECT_EQ(back.output, "text of rank 1");
  ASSERT_TRUE(back.run.has_value());
  EXPECT_EQ(*back.run, *r.run);
  const RankReport none = decode_rank_report(encode_rank_report(report(0, "h", std::nullopt)), 0);
  EXPECT_FALSE(none.run.has_value());
}

TEST(MpiRanks, MalformedReportsRefused) {
  EXPECT_THROW(decode_rank_report("not json", 0), UsageError);
  EXPECT_THROW(decode_rank_report("{}", 0), UsageError);
  EXPECT_THROW(decode_rank_report("[1,2]", 0), UsageError);
  const std::string good = encode_rank_report(report(2, "h", std::nullopt));
  EXPECT_THROW(decode_rank_report(good, 1), UsageError);  // says it is rank 2
  nlohmann::json j = nlohmann::json::parse(good);
  j["host"] = 7;
  EXPECT_THROW(decode_rank_report(j.dump(), 2), UsageError);
  j = nlohmann::json::parse(good);
  j.erase("status");
  EXPECT_THROW(decode_rank_report(j.dump(), 2), UsageError);
}

TEST(MpiRanks, MergeNamesHostsRanksAndGpus) {
  // Ranks 0, 1 on host-a, 2, 3 on host-b; rank 3 is slower by 10%.
  std::vector<RankReport> rs = {report(0, "host-a", measured_json(1.0)), report(1, "host-a", measured_json(1.0)),
                                report(2, "host-b", measured_json(1.0)), report(3, "host-b", measured_json(1.1))};
  const MergedRanks m = merge_rank_reports(rs);
  ASSERT_EQ(m.runs.size(), 4u);
  EXPECT_TRUE(m.failures.empty());
  EXPECT_EQ(m.worst_status, 0);
  EXPECT_EQ(m.hosts, (std::vector<std::string>{"host-a", "host-b"}));
  EXPECT_EQ(m.runs[2].label.rfind("rank 2: GPU 0 (", 0), 0u) << m.runs[2].label;
  EXPECT_NE(m.runs[2].label.find(") on host-b"), std::string::npos) << m.runs[2].label;
  EXPECT_EQ(m.run_ranks, (std::vector<int>{0, 1, 2, 3}));
  const FleetSummary s = summarize_fleet(m.runs, 0.05);
  ASSERT_EQ(s.slow.size(), 1u);
  EXPECT_EQ(s.slow[0].gpu, 3u);
  nlohmann::json j = fleet_to_json(m.runs, s);
  annotate_fleet_json(j, m, "Open MPI v4.1.4", 4);
  EXPECT_EQ(j["gpus"][3]["rank"], 3);
  EXPECT_EQ(j["gpus"][3]["host"], "host-b");
  EXPECT_EQ(j["launcher"]["ranks"], 4);
  EXPECT_EQ(j["launcher"]["hosts"].size(), 2u);
  // compare, report and plot read it as any fleet file.
  EXPECT_EQ(fleet_from_json(nlohmann::json::parse(j.dump()), "mpi.json").size(), 4u);
}

TEST(MpiRanks, FailuresAndRanksWithoutResults) {
  std::vector<RankReport> rs = {report(0, "a", std::nullopt), report(1, "a", std::nullopt, 2)};
  MergedRanks m = merge_rank_reports(rs);
  EXPECT_TRUE(m.runs.empty());
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_NE(m.failures[0].find("rank 1 on a: exit 2: bad flag"), std::string::npos) << m.failures[0];
  EXPECT_EQ(m.worst_status, 2);
  // A result that cannot be read is a failure (70), not a lost rank.
  rs = {report(0, "a", measured_json(1.0)), report(1, "a", nlohmann::json{{"schema", "nope"}})};
  m = merge_rank_reports(rs);
  EXPECT_EQ(m.runs.size(), 1u);
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_EQ(m.worst_status, 70);
  // Out of order or missing ranks.
  rs = {report(1, "a", std::nullopt), report(0, "a", std::nullopt)};
  EXPECT_THROW(merge_rank_reports(rs), UsageError);
  EXPECT_THROW(merge_rank_reports({}), UsageError);
}

TEST(MpiCli, RefusalsWithoutALauncher) {
  const fs::path dir = gs::test::scratch_dir("mpi_cli");
  // Flags that cannot be combined with MPI are refused before any plugin is loaded.
  for (const char* flag : {"--all-gpus", "--device 1", "--dry-run", "--csv x.csv"}) {
    const gs::test::Out o = gs::test::run_gemmscope(std::string("--mpi --model llama-3-8b ") + flag, dir);
    EXPECT_EQ(o.rc, 2) << flag << ": " << o.err;
    EXPECT_NE(o.err.find("cannot be combined with MPI"), std::string::npos) << o.err;
  }
  // Without the plugin: one line saying how to get multi-process runs. The binary is copied where no
  // plugin lies next to it.
  const fs::path lone = dir / "lone";
  fs::create_directories(lone);
  fs::copy_file(GS_BINARY, lone / "gemmscope", fs::copy_options::overwrite_existing);
  const gs::test::Out o = gs::test::run_shell(
      "env -u GEMMSCOPE_PLUGIN_DIR " + (lone / "gemmscope").string() + " --mpi --model llama-3-8b", dir);
  EXPECT_EQ(o.rc, 2) << o.err;
  EXPECT_NE(o.err.find("libgemmscope_mpi.so not found"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("GEMMSCOPE_PLUGIN_DIR"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("libopenmpi-dev"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  // Started by a launcher of 2 processes without the plugin: refused too, never two runs on one GPU.
  const gs::test::Out l = gs::test::run_shell(
      "env -u GEMMSCOPE_PLUGIN_DIR OMPI_COMM_WORLD_SIZE=2 " + (lone / "gemmscope").string() + " --model llama-3-8b", dir);
  EXPECT_EQ(l.rc, 2) << l.err;
  EXPECT_NE(l.err.find("libgemmscope_mpi.so"), std::string::npos) << l.err;
  // A launcher of one process: the ordinary run.
  const gs::test::Out one = gs::test::run_shell(
      "env -u GEMMSCOPE_PLUGIN_DIR OMPI_COMM_WORLD_SIZE=1 " + (lone / "gemmscope").string() + " --model llama-3-8b --dry-run", dir);
  EXPECT_EQ(one.rc, 0) << one.err;
  fs::remove_all(lone);
}

TEST(MpiPlugin, CollectivesUnderMpirun) {
  std::string why;
  const std::string mpirun = mpirun_2(why);
  if (mpirun.empty()) GTEST_SKIP() << why;
  const fs::path dir = gs::test::scratch_dir("mpi_plugin");
  const gs::test::Out o = gs::test::run_shell(mpirun + " " + GS_MPI_CHECK, dir);
  EXPECT_EQ(o.rc, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("mpi-check ok: 2 ranks, 1 host(s)"), std::string::npos) << o.out << o.err;
}

TEST(MpiPlugin, BinaryUnderMpirun) {
  std::string why;
  const std::string mpirun = mpirun_2(why);
  if (mpirun.empty()) GTEST_SKIP() << why;
  const fs::path dir = gs::test::scratch_dir("mpi_binary");
  // No GPU is visible (run_shell): the collectives' sizes, gathered on rank 0, printed once.
  const fs::path cj = dir / "comm.json";
  const gs::test::Out o = gs::test::run_shell(mpirun + " " + GS_BINARY +
                                                  " --model llama-3-8b --tensor-parallel 2 --comm-only --comm-json " +
                                                  cj.string(),
                                              dir);
  EXPECT_EQ(o.rc, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("MPI: 2 ranks on 1 host"), std::string::npos) << o.out << o.err;
  EXPECT_NE(o.out.find("all-gather"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("collectives not measured"), std::string::npos) << o.out;
  // One report, from rank 0: its lines appear once.
  const size_t first = o.out.find("MPI: 2 ranks");
  EXPECT_EQ(o.out.find("MPI: 2 ranks", first + 1), std::string::npos) << o.out;
  const size_t table = o.out.find("collectives not measured");
  EXPECT_EQ(o.out.find("collectives not measured", table + 1), std::string::npos) << o.out;
  EXPECT_TRUE(fs::exists(cj));
  fs::remove(cj);
}

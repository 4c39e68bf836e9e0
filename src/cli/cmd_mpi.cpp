// Several processes under MPI (cmd_mpi.hpp). Each rank runs the ordinary single-process run
// in-process with --device <local rank> --json <scratch> --quiet, its standard output captured;
// then every rank's report (core/node/rank_results.hpp) is gathered to rank 0, which prints its own
// report (the GEMMs of its GPU and, with --comm, the collectives over every rank), then the fleet
// summary of all ranks, and writes --json as a fleet file naming hosts and ranks.
#include "cli/cmd_mpi.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/mpi_plugin.hpp"
#include "cli/argv_scan.hpp"
#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/node/rank_results.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

namespace fs = std::filesystem;

namespace {

// The MPI command line (argv_scan.hpp): every rank gets the rest; --comm-json is rank 0's.
WorkerArgs parse(int argc, char** argv) {
  return scan_worker_args(argc, argv,
                          {"--mpi",
                           {"--all-gpus", "--device", "--csv", "-o", "--output", "--dry-run", "--accuracy-only"},
                           "MPI (each rank measures its node-local GPU; --json FILE holds every rank's run)",
                           /*takes_comm_json=*/true});
}

// Standard output into `path` while alive.
class StdoutToFile {
 public:
  explicit StdoutToFile(const fs::path& path) {
    std::cout.flush();
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved_ < 0 || fd < 0) throw std::runtime_error(fmt::format("cannot capture a rank's output: {}", std::strerror(errno)));
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
  }
  ~StdoutToFile() {
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  StdoutToFile(const StdoutToFile&) = delete;
  StdoutToFile& operator=(const StdoutToFile&) = delete;

 private:
  int saved_ = -1;
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string read_text(const fs::path& p) {
  try {
    return read_input_file(p.string(), "a rank's output");
  } catch (const UsageError&) {
    return "";
  }
}

}  // namespace

bool mpi_wanted(int argc, char** argv) { return has_flag(argc, argv, "--mpi") || launcher_world_size() > 1; }

int run_mpi(int argc, char** argv, int (*run_main)(int, char**)) {
  const WorkerArgs f = parse(argc, argv);
  std::string why;
  std::unique_ptr<ProcessGroup> pg = load_mpi(why);
  if (!pg) throw UsageError(mpi_unavailable_message(why));
  const int rank = pg->rank(), size = pg->size();
  // The outputs are rank 0's: checked there, and every rank stops together when one is refused.
  int refused = 0;
  std::string refusal;
  if (rank == 0) {
    try {
      if (!f.json.empty()) check_output_path(f.json, "--json");
      if (!f.comm_json.empty()) check_output_path(f.comm_json, "--comm-json");
      check_distinct_files({{f.json, "--json"}, {f.comm_json, "--comm-json"}},
                           run_inputs(argc, argv, find_gpu_spec_file().value_or("")));
    } catch (const UsageError& e) {
      refused = 1;
      refusal = e.what();
    }
  }
  pg->broadcast(&refused, sizeof refused, 0);
  if (refused) {
    if (rank == 0) throw UsageError(refusal);
    return 2;
  }

  char tmpl[] = "/tmp/gemmscope_rank_XXXXXX";
  const char* dir_c = ::mkdtemp(tmpl);
  if (!dir_c) throw std::runtime_error(fmt::format("cannot create a scratch folder: {}", std::strerror(errno)));
  const fs::path dir = dir_c;
  const fs::path json = dir / "run.json", out = dir / "out.txt";

  RankReport me;
  me.rank = rank;
  me.host = pg->host();
  me.local_rank = pg->local_rank();
  me.device = pg->local_rank();
  std::vector<std::string> args = {argv[0]};
  args.insert(args.end(), f.pass.begin(), f.pass.end());
  for (const std::string& s : {std::string("--device"), std::to_string(me.device), std::string("--json"), json.string(),
                               std::string("--quiet")})
    args.push_back(s);
  if (rank == 0 && !f.comm_json.empty()) {
    args.push_back("--comm-json");
    args.push_back(f.comm_json);
  }
  std::vector<char*> av;
  for (std::string& s : args) av.push_back(s.data());
  av.push_back(nullptr);
  set_current_process_group(pg.get());
  {
    StdoutToFile capture(out);
    try {
      me.status = run_main(static_cast<int>(av.size() - 1), av.data());
    } catch (const UsageError& e) {
      me.status = 2;
      me.error = clip_text(e.what(), kMaxMessageBytes);
    } catch (const std::exception& e) {
      me.status = 70;
      me.error = clip_text(e.what(), kMaxMessageBytes);
    }
  }
  set_current_process_group(nullptr);
  me.output = read_text(out);
  if (me.status == 0) {
    std::error_code ec;
    if (fs::exists(json, ec)) {
      try {
        me.run = read_json_file(json.string(), "the rank's result");
      } catch (const UsageError& e) {
        me.status = 70;
        me.error = e.what();
      }
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (rank != 0 && me.status != 0) fmt::print(stderr, "gemmscope: rank {}: {}\n", rank, me.error);

  const std::vector<std::string> all = pg->gather(encode_rank_report(me), 0);
  if (rank != 0) return me.status;

  std::vector<RankReport> reports;
  for (int r = 0; r < size; ++r) reports.push_back(decode_rank_report(all.at(static_cast<size_t>(r)), r));
  const MergedRanks m = merge_rank_reports(reports);
  std::string text = reports[0].output;
  text += fmt::format("\nMPI: {} ranks on {} host{} ({}), {}; one rank per node-local GPU\n", size,
                      m.hosts.size(), m.hosts.size() == 1 ? "" : "s", clip_text(join(m.hosts, ", "), 300),
                      pg->library().empty() ? "MPI" : pg->library());
  print_stdout(text);  // rank 0's report first, whatever follows
  std::fflush(stdout);
  text.clear();
  if (!m.runs.empty() && m.failures.empty()) {
    const FleetSummary s = summarize_fleet(m.runs, f.threshold);
    text += render_fleet_text(s);
    text += "  ranks start their runs together; cells are not synchronised between GPUs\n";
    if (!f.json.empty()) {
      nlohmann::json j = fleet_to_json(m.runs, s);
      annotate_fleet_json(j, m, pg->library(), size);
      write_file_atomic(f.json, json_text(j, 2) + "\n");
    }
  }
  print_stdout(text);
  if (m.runs.empty() && m.failures.empty() && !f.json.empty())
    fmt::print(stderr, "gemmscope: --json not written: no rank timed GEMMs (--comm-only writes --comm-json)\n");
  if (!m.failures.empty()) {
    print_error("gemmscope: ", fmt::format("MPI: {} of {} ranks failed: {}", m.failures.size(), size, join(m.failures, "; ")));
    return m.worst_status == 2 ? 2 : (m.worst_status == 0 ? 70 : m.worst_status);
  }
  return 0;
}

}  // namespace gs::cli

// `gemmscope ... --all-gpus`: the same run on every visible GPU at once, one worker process per GPU
// (CUPTI, NVML and the engine hold process-wide state), then the fleet summary (core/node/fleet.hpp).
// Each worker is this binary with the same flags plus --device I --json <scratch>/gpu<I>.json;
// all are started back to back before any is waited for.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/argv_scan.hpp"
#include "cli/console.hpp"
#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/report/report.hpp"
#include "core/util/text_util.hpp"
#ifdef GEMMSCOPE_WITH_CUDA
#include "cuda/common/device_count.hpp"
#endif

extern char** environ;

namespace gs::cli {

namespace fs = std::filesystem;

namespace {

// --all-gpus's command line (argv_scan.hpp): every GPU gets the rest, --quiet.
WorkerArgs parse(int argc, char** argv) {
  return scan_worker_args(argc, argv,
                          {"--all-gpus",
                           {"--device", "--csv", "-o", "--output", "--dry-run", "--accuracy-only", "--comm", "--comm-only"},
                           "--all-gpus (every GPU is measured; --json FILE holds every GPU's run)"});
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find the running binary (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

pid_t spawn_worker(const std::string& exe, const std::vector<std::string>& args, const fs::path& out,
                   const fs::path& err) {
  std::vector<char*> av;
  av.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& s : args) av.push_back(const_cast<char*>(s.c_str()));
  av.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start a worker: {}", std::strerror(rc)));
  return pid;
}

std::string first_line(const fs::path& p) {
  std::string text;
  try {
    text = read_input_file(p.string(), "worker output");
  } catch (const UsageError&) {
    return "";
  }
  const size_t nl = text.find('\n');
  return clip_text(printable(text.substr(0, nl)), 400);
}

}  // namespace

int run_fleet(int argc, char** argv) {
  const WorkerArgs f = parse(argc, argv);
  if (!f.json.empty()) {
    check_output_path(f.json, "--json");
    check_distinct_files({{f.json, "--json"}}, run_inputs(argc, argv, find_gpu_spec_file().value_or("")));
  }
  std::string why;
  int gpus = 0;
#ifdef GEMMSCOPE_WITH_CUDA
  gpus = cuda::visible_device_count(why);
#else
  why = "this build has no CUDA backend";
#endif
  if (gpus < 1) throw UsageError(fmt::format("--all-gpus needs a GPU: {}", why));
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "this host");
  char tmpl[] = "/tmp/gemmscope_fleet_XXXXXX";
  const char* dir_c = ::mkdtemp(tmpl);
  if (!dir_c) throw std::runtime_error(fmt::format("cannot create a scratch folder: {}", std::strerror(errno)));
  const fs::path dir = dir_c;
  const std::string exe = self_exe();
  fmt::print(stderr, "gemmscope: fleet mode: starting {} workers, one per GPU, at once\n", gpus);
  std::vector<pid_t> pids;
  for (int g = 0; g < gpus; ++g) {
    std::vector<std::string> args = f.pass;
    for (const std::string& s : {std::string("--device"), std::to_string(g), std::string("--json"),
                                 (dir / fmt::format("gpu{}.json", g)).string(), std::string("--quiet")})
      args.push_back(s);
    pids.push_back(spawn_worker(exe, args, dir / fmt::format("gpu{}.txt", g), dir / fmt::format("gpu{}.err", g)));
  }
  std::vector<int> status(pids.size(), -1);
  for (size_t g = 0; g < pids.size(); ++g) {
    int st = 0;
    while (::waitpid(pids[g], &st, 0) < 0 && errno == EINTR) {
    }
    status[g] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
  std::vector<FleetRun> runs;
  std::string failed;
  int worst = 0;
  for (size_t g = 0; g < pids.size(); ++g) {
    if (status[g] != 0) {
      failed += fmt::format("{}GPU {}: exit {}: {}", failed.empty() ? "" : "; ", g, status[g],
                            first_line(dir / fmt::format("gpu{}.err", g)));
      worst = std::max(worst, status[g]);
      continue;
    }
    const fs::path json = dir / fmt::format("gpu{}.json", g);
    RunResult r = from_json(read_json_file(json.string(), "worker result"), json.string());
    const std::string name = r.device ? r.device->name : "?";
    runs.push_back({fmt::format("GPU {} ({}) on {}", g, name, printable(host)), std::move(r)});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!failed.empty()) {
    print_error("gemmscope: ", fmt::format("fleet mode: {} of {} workers failed: {}", pids.size() - runs.size(),
                                           pids.size(), failed));
    return worst == 2 ? 2 : 70;
  }
  const FleetSummary s = summarize_fleet(runs, f.threshold);
  std::string text = render_fleet_text(s);
  text += "  workers start together; cells are not synchronised between GPUs (each runs the same cells in the "
          "same order)\n";
  if (!f.json.empty()) write_file_atomic(f.json, json_text(fleet_to_json(runs, s), 2) + "\n");
  print_stdout(text);
  return 0;
}

}  // namespace gs::cli

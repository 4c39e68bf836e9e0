// `gemmscope plot`: runs tools/gemmscope_plot.py (installed next to the binary) with the first
// Python that can import matplotlib. Processes are started with posix_spawn and an argv array:
// no shell is involved, so file names are passed through verbatim.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/io/embedded_data.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/recipes/modes.hpp"
#include "core/io/output_paths.hpp"
#include "core/io/temp_files.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/util/text_util.hpp"

extern char** environ;

namespace gs::cli {

namespace {

constexpr const char* kMatplotlibMissing =
    "matplotlib is not installed: apt-get install python3-matplotlib (or pip install matplotlib)";

// Runs argv[0] (searched on PATH when it has no '/'), waits, returns its exit status; -1 when it
// could not be started; 128 + signal when it was killed. quiet: stdout/stderr go to /dev/null.
int spawn_and_wait(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  forward_signals_to(pid);  // a fatal signal that removes our temporary files ends the child too
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      forward_signals_to(0);
      return -1;
    }
  }
  forward_signals_to(0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

bool readable_file(const std::string& p) { return !p.empty() && access(p.c_str(), R_OK) == 0; }

// A script is run only when it is a readable regular file: a FIFO would hang the interpreter's
// open, a folder gives Python's own message.
bool regular_readable_file(const std::string& p) {
  struct stat st {};
  return readable_file(p) && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// What a chart file is now (device, inode, modification time), or nothing: a renderer that
// exits 0 must have replaced it (the script renames a new file over it).
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  FileStamp f;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return f;
  f.exists = true;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.mtime = st.st_mtim;
  return f;
}

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

std::optional<std::string> find_chart_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GEMMSCOPE_PYTHON"); env && *env) candidates.emplace_back(env);
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  for (const std::string& py : candidates) {
    if (spawn_and_wait({py, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"}, true) == 0)
      return py;
  }
  return std::nullopt;
}

std::optional<std::string> find_chart_script() {
  if (const char* env = std::getenv("GEMMSCOPE_PLOT_SCRIPT"); env && *env) {
    if (regular_readable_file(env)) return std::string(env);
    return std::nullopt;
  }
  if (const std::string dir = exe_dir(); !dir.empty() && regular_readable_file(dir + "/gemmscope_plot.py"))
    return dir + "/gemmscope_plot.py";
#ifdef GS_SOURCE_DIR
  if (regular_readable_file(std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py"))
    return std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";
#endif
  return std::nullopt;
}

std::optional<std::string> find_data_file(const std::string& name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env && *env) {
    if (readable_file(env)) return std::string(env);
    // A file named and missing is an error, never the built-in copy in its place.
    throw UsageError(fmt::format("{} names {}, which does not exist or cannot be read (unset it to use {} next to the "
                                 "binary, or the built-in copy)",
                                 env_var, clip_text(env), name));
  }
  if (const std::string dir = exe_dir(); !dir.empty() && readable_file(dir + "/" + name)) return dir + "/" + name;
  return std::nullopt;
}

nlohmann::json load_data_json(const std::string& name, const char* env_var, const std::string& what, std::string& where) {
  if (const std::optional<std::string> path = find_data_file(name, env_var)) {
    where = clip_text(*path);
    return read_json_file(*path, what);
  }
  const std::optional<std::string_view> text = embedded_data(name);
  if (!text) throw std::logic_error(name + " is not built into this binary (CMakeLists.txt: GS_EMBEDDED_DATA)");
  where = embedded_data_name(name);
  return parse_json_text(*text, where);
}

std::optional<std::string> find_gpu_spec_file() { return find_data_file("gpus.json", "GEMMSCOPE_GPU_SPECS"); }

GpuDb load_gpu_spec_db() {
  std::string where;
  const nlohmann::json doc = load_data_json("gpus.json", "GEMMSCOPE_GPU_SPECS", "GPU spec file", where);
  return parse_gpu_db(doc, where);
}

int render_chart(const std::string& json_path, const std::string& out_path, const std::vector<std::string>& extra_args) {
  const auto script = find_chart_script();
  if (!script) {
    if (const char* env = std::getenv("GEMMSCOPE_PLOT_SCRIPT"); env && *env) {
      struct stat st {};
      const bool exists = ::stat(env, &st) == 0;
      print_error("gemmscope plot: error: ",
                  fmt::format("GEMMSCOPE_PLOT_SCRIPT names {}, which {} (unset it to use the gemmscope_plot.py next to "
                              "the binary)",
                              clip_text(env, 120),
                              !exists                ? "does not exist or cannot be read"
                              : S_ISDIR(st.st_mode)  ? "is a directory"
                              : !S_ISREG(st.st_mode) ? "is not a regular file"
                                                     : "cannot be read"));
    } else
      fmt::print(stderr,
                 "gemmscope plot: error: the chart renderer gemmscope_plot.py was not found next to the gemmscope "
                 "binary (set GEMMSCOPE_PLOT_SCRIPT to its path)\n");
    return kChartUnavailable;
  }
  const auto python = find_chart_python();
  if (!python) {
    print_error("gemmscope plot: error: ", kMatplotlibMissing);
    return kChartUnavailable;
  }
  std::vector<std::string> args = {*python, *script, json_path, "-o", out_path};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const FileStamp before = stamp_of(out_path);
  const int rc = spawn_and_wait(args, false);
  if (rc < 0) {
    print_error("gemmscope plot: error: ", fmt::format("could not run {}", clip_text(*python, 120)));
    return kChartUnavailable;
  }
  // Success is a chart on disk, not an exit status: an interpreter that is not Python
  // (GEMMSCOPE_PYTHON=true) exits 0 having written nothing.
  if (rc == 0) {
    const FileStamp after = stamp_of(out_path);
    if (!after.exists || after == before) {
      print_error("gemmscope plot: error: ",
                  fmt::format("{} {} exited 0 but wrote no chart {} (is GEMMSCOPE_PYTHON a Python with matplotlib?)",
                              clip_text(*python, 80), clip_text(*script, 80), clip_text(out_path, 80)));
      return kChartUnavailable;
    }
  }
  return rc;
}

namespace {

// --kind in any case; an unknown kind is refused with a suggestion, as every enum value is.
std::string chart_kind(const std::string& typed) {
  static const std::vector<std::string> kinds = {"auto", "model", "shapes", "sweep", "modes", "roofline", "experts", "step", "fleet"};
  const std::string k = ascii_lower(typed);
  if (std::find(kinds.begin(), kinds.end(), k) != kinds.end()) return k;
  throw UsageError(fmt::format("--kind must be auto, model, shapes, sweep, modes, roofline, experts, step or fleet, got '{}'{}",
                               clip_text(typed, 80), did_you_mean(typed, kinds)));
}

}  // namespace

int run_plot(int argc, char** argv) {
  CLI::App app{"Draw a chart from a gemmscope result JSON.\n"
               "Kinds: model (stacked per-layer bars per precision), shapes (grouped TFLOP/s bars),\n"
               "sweep (latency / TFLOP/s / speedup vs size), modes (training / per-gemm vs pre-quantized speedup),\n"
               "roofline (achieved TFLOP/s vs arithmetic intensity under the GPU's datasheet roofs),\n"
               "experts (MoE: rows per expert, busiest EP rank, grouped expert GEMM time per precision),\n"
               "step (the whole training step per precision, its breakdown stacked).\n"
               "Exit status: 0 written, 2 bad input, 3 no Python with matplotlib, 74 stdout not writable.",
               "gemmscope plot"};
  std::string result, out, baseline, mode, kind = "auto";
  app.add_option("result", result, "result JSON written by gemmscope --json")->required();
  app.add_option("-o,--output", out, "chart file: .png, .svg or .pdf")->required();
  app.add_option("--baseline", baseline, "precision the speedups are taken against (default BF16)");
  add_mode_option(app, mode, "mode to chart: training, per-gemm or pre-quantized (default training when present, else per-gemm)");
  app.add_option("--kind", kind, "chart kind: auto (default: from the JSON), model, shapes, sweep, modes, roofline, experts, step, fleet")
      ->capture_default_str();
  app.allow_extras();  // unknown options: reject_extras() names them with a suggestion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_parse_error("gemmscope plot", e);
    return kChartBadInput;
  }
  try {
    reject_extras(app);
    reject_empty_values(app);
    kind = chart_kind(kind);
    if (!mode.empty()) mode = to_string(mode_from_string(mode));            // case-insensitive, old names too
    if (!baseline.empty()) baseline = to_string(precision_from_string(baseline));
    check_chart_path(out, "-o");  // the same rule as `gemmscope -o`
    check_output_path(out, "-o");
    check_distinct_files({{out, "-o"}}, {{result, "result file"}});
  } catch (const UsageError& e) {
    print_error("gemmscope plot: error: ", e.what());
    return kChartBadInput;
  }
  // The chart script gets a temporary copy written here, never the file itself: a fleet file's
  // per-GPU chart document (core/node/fleet.hpp), or a result validated by the result reader
  // (from_json, the one schema) with the numbers the charts draw written by this version
  // (with_derived_fields: totals, per-kind breakdowns, routing), and for a roofline chart of a file
  // without one the roofline from the GPU spec database. A file that cannot be read as JSON goes
  // to the script as it is, which names the problem.
  // The copy is the user's result: created 0600 (mkostemp) and written in place, and removed on
  // every way out (TempFile: a return, an exception, SIGINT, SIGTERM, SIGHUP, ...).
  std::string chart_input = result;
  std::optional<TempFile> temp;
  const auto write_temp = [&](const nlohmann::json& doc) {
    const std::string text = json_text(doc) + "\n";
    const int fd = create_guarded(
        [](std::string& name) {
          char tmpl[] = "/tmp/gemmscope-plot-XXXXXX";
          const int f = ::mkostemp(tmpl, O_CLOEXEC);
          name = tmpl;
          return f;
        },
        temp);
    if (fd < 0) throw UsageError(fmt::format("cannot create a temporary file for the chart: {}", std::strerror(errno)));
    int err = write_all(fd, text);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) throw UsageError(fmt::format("cannot write a temporary copy of the result for the chart: {}", std::strerror(err)));
    chart_input = temp->name();
  };
  {
    nlohmann::json doc;
    bool fleet = false, read = false;
    try {
      doc = read_json_file(result, "result JSON");
      read = true;
      fleet = is_fleet_json(doc);
    } catch (const UsageError&) {
      // not read here: the script reads the file and names the problem
    }
    try {
      if (fleet || kind == "fleet") {
        if (!fleet)
          throw UsageError(fmt::format("--kind fleet needs a fleet file (gemmscope --all-gpus --json, or MPI); {} is not one",
                                       clip_text(result, 120)));
        if (kind != "auto" && kind != "fleet")
          throw UsageError(fmt::format("{} is a fleet file: its chart is --kind fleet (per GPU)", clip_text(result, 120)));
        write_temp(fleet_chart_json(summarize_fleet(fleet_from_json(doc, result), fleet_threshold(doc))));
        kind = "fleet";
      } else if (read) {
        const RunResult r = from_json(doc, result);
        nlohmann::json chart = with_derived_fields(std::move(doc), r);
        if (kind == "roofline" && chart.is_object() && !chart.contains("roofline")) {
          std::optional<GpuDb> db;
          const RooflineContext ctx = r.dry_run ? RooflineContext{nullptr, "a dry run has no times"} : local_roofline(r, db);
          chart["roofline"] = roofline_json(r, ctx);
        }
        write_temp(chart);
      }
    } catch (const UsageError& e) {
      print_error("gemmscope plot: error: ", e.what());
      return kChartBadInput;  // the temporary copy, if any, is removed on the way out
    }
  }
  std::vector<std::string> extra;
  if (!baseline.empty()) extra.insert(extra.end(), {"--baseline", baseline});
  if (!mode.empty()) extra.insert(extra.end(), {"--mode", mode});
  extra.insert(extra.end(), {"--kind", kind});
  // Messages about the input name the user's file, not the temporary copy.
  if (chart_input != result) extra.insert(extra.end(), {"--name", result.substr(result.rfind('/') + 1)});
  return render_chart(chart_input, out, extra);  // then `temp` is removed
}

}  // namespace gs::cli

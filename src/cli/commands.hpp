// Subcommands of the gemmscope CLI that live outside cli.cpp.
//
// cli.cpp dispatches `gemmscope plot ...` and `gemmscope compare ...` here with the subcommand
// name as argv[0]: run_plot(argc - 1, argv + 1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/analysis/priors.hpp"
#include "core/analysis/roofline.hpp"

namespace gs::cli {

// Exit status of the chart commands (the same numbers as tools/gemmscope_plot.py).
inline constexpr int kChartOk = 0;
inline constexpr int kChartBadInput = 2;    // missing file, not JSON, wrong schema, dry run, bad option
inline constexpr int kChartUnavailable = 3; // no Python with matplotlib, or gemmscope_plot.py not found

// `gemmscope plot RESULT.json -o OUT.{png,svg,pdf} [--baseline P] [--mode M] [--kind K]`
int run_plot(int argc, char** argv);

// `gemmscope report RESULT.json`: the text report of the run, rendered from its JSON.
// Exit status: 0 printed, 2 bad input.
int run_report(int argc, char** argv);

// `gemmscope compare A.json B.json [--threshold 5%|0.05] [--markdown] [--mode M]`
// Exit status: 0 no regression, 1 regressions found, 2 bad input (any problem in either file);
// main() turns an internal error into 70 and a failed write of the report to stdout into 74.
int run_compare(int argc, char** argv);

// Renders `json_path` into `out_path` (type from its extension) with tools/gemmscope_plot.py;
// `extra_args` are passed on (e.g. {"--baseline", "FP8Current", "--kind", "modes"}). The child's
// stdout/stderr are the caller's. Returns the script's exit status (0 ok, 2 bad input), or
// kChartUnavailable when no interpreter can import matplotlib or the script is not found (a
// one-line message is printed on stderr then).
int render_chart(const std::string& json_path, const std::string& out_path,
                 const std::vector<std::string>& extra_args = {});

// The first interpreter among $GEMMSCOPE_PYTHON, `python3` on PATH, /usr/bin/python3 that can
// import matplotlib (with the Agg backend), or nullopt.
std::optional<std::string> find_chart_python();

// $GEMMSCOPE_PLOT_SCRIPT, else gemmscope_plot.py next to the running binary, else
// <source dir>/tools/gemmscope_plot.py when the build defines GS_SOURCE_DIR; nullopt if none exists.
std::optional<std::string> find_chart_script();

// `gemmscope predict [RUN.json] --gpu NAME [--json OUT] ...` (cmd_predict.cpp). Exit 0, or 2 on bad
// input (unknown GPU, a run without measurements, no spec database).
int run_predict(int argc, char** argv);

// `gemmscope [run flags] --all-gpus [--fleet-threshold 3%] [--json FLEET.json]` (cmd_fleet.cpp): the
// run on every visible GPU at once, one worker process each, then the fleet summary. `argv` is the
// whole command line. Exit 0, 2 on bad input (no GPU, a refused flag), 70 when a worker failed.
int run_fleet(int argc, char** argv);

// `gemmscope layouts --model M --gpus N --global-batch B [--gpu G] [--cluster C] [--top K]`
// (cmd_layouts.cpp): the fastest fitting parallel layouts, predicted. Exit 0, or 2 on bad input.
int run_layouts(int argc, char** argv);

// A data file of gemmscope (data/): $ENV_VAR when set (UsageError when it names no readable file),
// else `name` next to the running binary (the build copies data/ there); nullopt if neither.
std::optional<std::string> find_data_file(const std::string& name, const char* env_var);
// Its JSON: the file find_data_file finds (read as `what`, through core/io/input_file.hpp), else
// the copy built into the binary (core/io/embedded_data.hpp). `where` names which, for messages.
nlohmann::json load_data_json(const std::string& name, const char* env_var, const std::string& what, std::string& where);
// The GPU spec database: find_data_file("gpus.json", "GEMMSCOPE_GPU_SPECS").
std::optional<std::string> find_gpu_spec_file();
// The database: that file, else the copy of data/gpus.json built into the binary. A malformed file
// is a UsageError.
GpuDb load_gpu_spec_db();
// The published GEMM priors (data/priors.json; core/analysis/priors.hpp) against `db`:
// load_data_json("priors.json", "GEMMSCOPE_PRIORS"); `predict` and the parallel step read them.
PriorDb load_priors(const GpuDb& db);

// The roofline context of a measured run's own GPU: the spec database (load_gpu_spec_db; kept in
// `storage`) and the entry matching r.device's name, or a note saying why there is none (unknown
// GPU). A database file that exists but is malformed is a UsageError.
RooflineContext local_roofline(const RunResult& r, std::optional<GpuDb>& storage);

}  // namespace gs::cli

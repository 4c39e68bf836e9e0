// gemmscope's command line as a library: the tiny main.cpp, the CPU tests and the flag fuzzer
// (tests/fuzz/fuzz_flags.cpp) all call gemmscope_main().
#pragma once
#include <string>

#include "core/model/model_config.hpp"
#include "core/run/runner.hpp"
#include "core/run/settings.hpp"

namespace CLI {
class App;
}

namespace gs::cli {

// The whole command: subcommands (plot, compare, report, predict), --all-gpus, MPI, or a run.
// Returns the exit status: 0 ok, 1 regressions (compare only), 2 bad input, 3 no chart renderer
// (plot, -o), 70 internal error, 74 the report could not be written to stdout. Prints to
// stdout and stderr; never exits the process.
int gemmscope_main(int argc, char** argv);

// The run-settings registry's options of help group `group` ("Measurement", "Recipes",
// "Kernels"), bound to CLI11: each records the text it was given under the setting's
// "section.key" in `given`, for apply_settings() (core/run/settings.hpp). Settings the CLI
// places itself (Setting::placed_by_cli) are left to add_setting_flag.
void add_setting_options(CLI::App& app, GivenSettings& given, const std::string& group);
// One flag of the registry by its first name ("--mode", or a shortcut such as "--pre-quantize"),
// in its setting's help group; a shortcut records "" under its first name.
void add_setting_flag(CLI::App& app, GivenSettings& given, const std::string& first_name);

// The flags that say what a run times, shared by a measured run and `gemmscope predict`: the model
// (--model, --config, every model field: sizes, batch, --tp, --ep, MoE and MLA), or --shapes /
// --sweep; and the registry's settings (the precisions, --mode, the recipe options, ...).
struct PlanFlags {
  ModelOverrides model;
  std::string config_path, preset, shapes, sweep_spec;
  bool sweep = false, list_models = false;
  GivenSettings settings;
};
// Model and shape flags (help groups "Model", "Batch", "Parallelism", "MoE and MLA", "Shapes").
void add_plan_shape_flags(CLI::App& app, PlanFlags& f);
// The precisions and --pre-quantize (help group "Precisions"); --mode ("Measurement").
void add_plan_precision_flags(CLI::App& app, PlanFlags& f);
// --list-models: one line per model preset.
void print_model_presets();
// Whether any model or shape flag was given (a run file brings its own plan).
bool any_plan_shape_flag(const PlanFlags& f);
// The plan and every registry setting of `f`, with the rules a measured run applies (mutually
// exclusive flags, defaults of the plan's kind). UsageError with the flag's message.
RunRequest build_plan_request(const PlanFlags& f);

}  // namespace gs::cli

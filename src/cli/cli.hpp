// gemmscope's command line as a library: the tiny main.cpp, the CPU tests and the flag fuzzer
// (tests/fuzz/fuzz_flags.cpp) all call gemmscope_main().
#pragma once
#include <string>

#include "core/model/model_config.hpp"
#include "core/run/settings.hpp"

namespace CLI {
class App;
}

namespace gs::cli {

// The model flags every command that plans a model takes: --model, --config and the model fields
// (core/model/model_fields.cpp), --gated-mlp, --routing, --capacity-factor.
struct ModelFlags {
  ModelOverrides model;
  std::string config_path, preset;
};
void add_model_flags(CLI::App& app, ModelFlags& f);
// The model they describe: a preset, a config.json or the default config, with the flags on top
// (UsageError for --config with --model, or a bad value).
ModelConfig model_from_flags(const ModelFlags& f, uint64_t routing_seed);

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

}  // namespace gs::cli

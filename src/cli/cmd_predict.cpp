// `gemmscope predict`: predicted GEMM times on another GPU (core/analysis/predict.hpp), from a measured
// run or from the datasheet alone. Also the spec-database lookup the measured run's roofline uses.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/model/model_config.hpp"
#include "core/io/output_paths.hpp"
#include "core/analysis/predict.hpp"
#include "core/report/report.hpp"
#include "core/util/printer.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

namespace {

GpuDb load_db() {
  const auto path = find_gpu_spec_file();
  if (!path)
    throw UsageError("predict needs the GPU spec database gpus.json (next to the gemmscope binary, data/gpus.json in "
                     "the source tree, or $GEMMSCOPE_GPU_SPECS), and none was found");
  return read_gpu_db_file(*path);
}

std::vector<Mode> modes_of(const std::string& given, bool model) {
  const std::string mode = ascii_lower(given);  // names in any case, as everywhere
  if (mode.empty() || mode == "all")
    return model ? std::vector<Mode>{Mode::PerGemm, Mode::Training, Mode::PreQuantized}
                 : std::vector<Mode>{Mode::PerGemm, Mode::PreQuantized};
  // "both": the default quantizing mode (training for models, per-gemm for shapes) + pre-quantized.
  if (mode == "both") return {model ? Mode::Training : Mode::PerGemm, Mode::PreQuantized};
  const Mode m = mode_from_string(mode);
  if (m == Mode::Training && !model) throw UsageError("--mode training needs a model plan");
  return {m};
}

}  // namespace

RooflineContext local_roofline(const RunResult& r, std::optional<GpuDb>& storage) {
  RooflineContext ctx;
  const auto path = find_gpu_spec_file();
  if (!path) {
    ctx.note = "no GPU spec database found (gpus.json next to the binary, data/gpus.json in the source tree, or "
               "$GEMMSCOPE_GPU_SPECS): no roofline or % of peak";
    return ctx;
  }
  storage = read_gpu_db_file(*path);
  if (!r.device) {
    ctx.note = "no device: no roofline";
    return ctx;
  }
  ctx.spec = storage->match_device(r.device->name);
  if (!ctx.spec)
    ctx.note = fmt::format("GPU '{}' is not in the GPU spec database ({}): no roofline or % of peak (known: {})",
                           clip_text(r.device->name, 80), clip_text(*path), storage->known_keys());
  return ctx;
}

int run_predict(int argc, char** argv) {
  CLI::App app{"PREDICT GEMM times on a GPU from a measured run on another GPU and both datasheets, or from the\n"
               "target's datasheet alone (no RUN.json: the plan comes from --model/--config/--shapes, default the 5B\n"
               "config). Every number it prints is a prediction. Model: docs/predict.md.\n"
               "Exit status: 0 ok, 2 bad input, 70 internal error, 74 stdout not writable.",
               "gemmscope predict"};
  std::string run_path, gpu, source_gpu, json_out, mode, preset, config, shapes;
  bool list = false;
  app.add_option("RUN", run_path, "measured result JSON (gemmscope --json); omit for a datasheet-only prediction");
  app.add_option("--gpu", gpu, "target GPU: a key of the spec database (B300, H200, ...) or a device name");
  app.add_option("--source-gpu", source_gpu, "the run's GPU when its device name is not in the database");
  app.add_option("--json", json_out, "write the predicted result JSON here (gemmscope compare reads it)");
  app.add_option("--mode", mode, "datasheet-only: training | per-gemm | pre-quantized | both | all (default all; old names autocast-shared, "
                 "autocast accepted)");
  app.add_option("--model", preset, "datasheet-only: model preset (see gemmscope --list-models)");
  app.add_option("--config", config, "datasheet-only: Hugging Face config.json");
  app.add_option("--shapes", shapes, "datasheet-only: 'MxKxN,...'");
  app.add_flag("--list-gpus", list, "list the GPUs of the spec database and exit");
  app.allow_extras();  // unknown options: reject_extras() names them with a suggestion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    print_parse_error("gemmscope predict", e);
    return 2;
  }
  try {
    reject_extras(app);
    reject_empty_values(app);
    const GpuDb db = load_db();
    if (list) {
      // One row per GPU, no header line; each width holds the space after its column.
      print::Table t({{"GPU", print::Align::Left, 15}, {"Name", print::Align::Left, 63}, {"Datasheet", print::Align::Left, 0}},
                     print::Table::Layout::Fixed);
      for (const GpuSpec& s : db.gpus) {
        std::string peaks;
        for (PeakFormat f : kAllPeakFormats)
          if (s.peak(f)) peaks += fmt::format(" {} {:.0f}", to_string(f), s.peak(f)->value);
        t.add_row({s.key, s.name,
                   fmt::format("cc {}.{}, {:.0f} GB/s, TFLOP/s:{}", s.cc_major, s.cc_minor, s.bandwidth_gbs->value, peaks)});
      }
      const std::string text = print::render_table(t, print::Format::Text);
      print_stdout(text);
      return 0;
    }
    if (gpu.empty()) throw UsageError(fmt::format("--gpu is required (known: {})", db.known_keys()));
    const GpuSpec& target = db.find(gpu);
    if (!json_out.empty()) {
      check_output_path(json_out, "--json");
      check_distinct_files({{json_out, "--json"}},
                           {{run_path, "run file"}, {config, "--config file"}, {find_gpu_spec_file().value_or(""), "GPU spec database"}});
    }
    Prediction pr;
    if (!run_path.empty()) {
      if (!preset.empty() || !config.empty() || !shapes.empty() || !mode.empty())
        throw UsageError("--model, --config, --shapes and --mode apply to a datasheet-only prediction (no RUN.json); "
                         "a run is predicted with its own plan and modes");
      const RunResult run = from_json(read_json_file(run_path), run_path);
      if (run.dry_run || run.modes.empty())
        throw UsageError(fmt::format("{} has no measurements to predict from ({})", clip_text(run_path),
                                     run.dry_run ? "a dry run or plan only" : "no timed modes"));
      const GpuSpec* source = nullptr;
      if (!source_gpu.empty()) source = &db.find(source_gpu);
      else if (run.device) source = db.match_device(run.device->name);
      if (!source)
        throw UsageError(fmt::format("the GPU of {} ('{}') is not in the spec database; name it with --source-gpu "
                                     "(known: {})",
                                     clip_text(run_path), run.device ? clip_text(run.device->name, 80) : "none", db.known_keys()));
      pr = predict_from_run(run, run_path, *source, target);
    } else {
      if (!source_gpu.empty()) throw UsageError("--source-gpu needs a RUN.json");
      if ((!preset.empty()) + (!config.empty()) + (!shapes.empty()) > 1)
        throw UsageError("--model, --config and --shapes are mutually exclusive");
      Plan plan = !shapes.empty() ? build_shapes_plan(shapes)
                  : !config.empty() ? build_model_plan(load_hf_config(config))
                  : !preset.empty() ? build_model_plan(find_preset(preset).config)
                                    : build_model_plan(default_config());
      const std::vector<Mode> modes = modes_of(mode, plan.model_mode);
      pr = predict_datasheet_only(plan, modes, RecipeOptions{}, target);
    }
    const std::string text = render_prediction_text(pr);
    // The file first: a failed write (a full disk) is said before the report is printed.
    if (!json_out.empty()) write_file_atomic(json_out, json_text(prediction_json(pr), 2) + "\n");
    print_stdout(text);
    return 0;
  } catch (const UsageError& e) {
    print_error("gemmscope predict: error: ", e.what());
    return 2;
  }
}

}  // namespace gs::cli

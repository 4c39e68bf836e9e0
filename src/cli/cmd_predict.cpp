// `gemmscope predict`: predicted GEMM times on another GPU (core/analysis/predict.hpp), from a measured
// run or from the datasheet alone. Also the spec-database lookup the measured run's roofline uses.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli.hpp"
#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/analysis/bands.hpp"
#include "core/analysis/priors.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/model/model_config.hpp"
#include "core/io/output_paths.hpp"
#include "core/analysis/predict.hpp"
#include "core/report/report.hpp"
#include "core/run/settings.hpp"
#include "core/util/printer.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

PriorDb load_priors(const GpuDb& db) {
  std::string where;
  const nlohmann::json doc = load_data_json("priors.json", "GEMMSCOPE_PRIORS", "priors file", where);
  return parse_priors(doc, where, db);
}

namespace {

// The measured prediction errors (data/predict_errors.json): named by the environment, next to the
// binary, in the source tree, or the copy built into the binary.
ErrorSet load_errors(const std::string& given) {
  if (!given.empty()) return read_error_set_file(given);
  std::string where;
  const nlohmann::json doc = load_data_json("predict_errors.json", "GEMMSCOPE_PREDICT_ERRORS", "prediction-error file", where);
  return parse_error_set(doc, where);
}

// `predict --list-priors`: per format, generation and size class, the prior and its points.
void print_priors(const PriorDb& priors) {
  print::Table t({{"Format", print::Align::Left, 10},
                  {"Generation", print::Align::Left, 15},
                  {"Size class", print::Align::Left, 24},
                  {"Prior", print::Align::Right, 8},
                  {"Points", print::Align::Right, 8},
                  {"At x", print::Align::Right, 8}},
                 print::Table::Layout::Fixed);
  t.add_header();
  std::vector<std::string> archs;
  for (const PriorPoint& p : priors.points)
    if (std::find(archs.begin(), archs.end(), p.arch) == archs.end()) archs.push_back(p.arch);
  for (PriorFormat f : kAllPriorFormats)
    for (const std::string& a : archs)
      for (const ClassPrior& c : class_priors(priors, f, a))
        t.add_row({to_string(f), a, fmt::format("{} ({})", size_class_name(c.size_class), size_class_range(c.size_class)),
                   fmt::format("{:.1f}%", 100 * c.fraction), std::to_string(c.points.size()), fmt::format("{:.2f}", c.x_center)});
  t.add_note(fmt::format("{} published points, each with its source in {}. x = arithmetic intensity / ridge point "
                         "of the format on the GPU (docs/predict.md, \"Priors\").",
                         priors.points.size(), priors.path));
  const std::string text = print::render_table(t, print::Format::Text);
  print_stdout(text);
}

}  // namespace

RooflineContext local_roofline(const RunResult& r, std::optional<GpuDb>& storage) {
  RooflineContext ctx;
  storage = load_gpu_spec_db();
  if (!r.device) {
    ctx.note = "no device: no roofline";
    return ctx;
  }
  ctx.spec = storage->match_device(r.device->name);
  if (!ctx.spec)
    ctx.note = fmt::format("GPU '{}' is not in the GPU spec database ({}): no roofline or % of peak (known: {})",
                           clip_text(r.device->name, 80), clip_text(storage->path), storage->known_keys());
  return ctx;
}

int run_predict(int argc, char** argv) {
  CLI::App app{"PREDICT GEMM times on a GPU from a measured run on another GPU and both datasheets, or from the\n"
               "target's datasheet alone (no RUN.json, or --datasheet-only: the plan comes from the same model, batch,\n"
               "layout and precision flags a measured run takes, default the 5B config). Every number it prints is a\n"
               "prediction. Model: docs/predict.md.\n"
               "Exit status: 0 ok, 2 bad input, 70 internal error, 74 stdout not writable.",
               "gemmscope predict"};
  std::string run_path, gpu, source_gpu, json_out, band_errors;
  bool list = false, list_priors = false, datasheet_only = false;
  cli::PlanFlags plan;
  app.add_option("RUN", run_path, "measured result JSON (gemmscope --json); omit for a datasheet-only prediction");
  app.add_option("--gpu", gpu, "target GPU: a key of the spec database (B300, H200, ...) or a device name");
  app.add_option("--source-gpu", source_gpu, "the run's GPU when its device name is not in the database");
  app.add_option("--json", json_out, "write the predicted result JSON here (gemmscope compare reads it)");
  app.add_flag("--datasheet-only", datasheet_only, "with RUN.json: predict the run's plan from the target's datasheet and "
               "the priors alone (the run's measurements unused)");
  app.add_option("--band-errors", band_errors, "the measured prediction errors the bands come from (default "
                 "predict_errors.json next to the binary; bench/validate_predict.py passes leave-one-out files)");
  app.add_flag("--list-gpus", list, "list the GPUs of the spec database and exit");
  app.add_flag("--list-priors", list_priors, "list the per-format efficiency priors (format, generation, size class) and exit");
  // The same plan flags as a measured run (cli.hpp): model, batch, layout, shapes, precisions,
  // modes and the recipe settings, from the settings registry.
  cli::add_plan_shape_flags(app, plan);
  cli::add_plan_precision_flags(app, plan);
  cli::add_setting_flag(app, plan.settings, "--mode");
  cli::add_setting_options(app, plan.settings, "Recipes");
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
    const GpuDb db = load_gpu_spec_db();
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
    const PriorDb priors = load_priors(db);
    if (list_priors) {
      print_priors(priors);
      return 0;
    }
    if (plan.list_models) {
      cli::print_model_presets();
      return 0;
    }
    if (gpu.empty()) throw UsageError(fmt::format("--gpu is required (known: {})", db.known_keys()));
    const GpuSpec& target = db.find(gpu);
    if (!json_out.empty()) {
      check_output_path(json_out, "--json");
      std::vector<NamedFile> inputs = {{run_path, "run file"},
                                       {plan.config_path, "--config file"},
                                       {find_gpu_spec_file().value_or(""), "GPU spec database"},
                                       {find_data_file("priors.json", "GEMMSCOPE_PRIORS").value_or(""), "priors file"},
                                       {band_errors, "--band-errors file"},
                                       {find_data_file("predict_errors.json", "GEMMSCOPE_PREDICT_ERRORS").value_or(""),
                                        "prediction errors file"}};
      if (plan.model.moe.routing && plan.model.moe.routing->size() > 5 && iequals(plan.model.moe.routing->substr(0, 5), "file:"))
        inputs.push_back({plan.model.moe.routing->substr(5), "--routing file"});
      check_distinct_files({{json_out, "--json"}}, inputs);
    }
    const ErrorSet errors = load_errors(band_errors);
    const PredictData data{&priors, &errors};
    Prediction pr;
    if (!run_path.empty()) {
      if (cli::any_plan_shape_flag(plan))
        throw UsageError("the model, batch, layout and shape flags describe a plan, and a run brings its own: predict "
                         "another plan from the datasheet (no RUN.json), or measure it");
      const RunResult run = from_json(read_json_file(run_path), run_path);
      // The columns and modes: the run's, or those named by the precision and mode flags.
      RunRequest req;
      req.plan = run.plan;
      apply_settings(plan.settings, req);
      const bool precisions_given = std::any_of(plan.settings.begin(), plan.settings.end(), [](const auto& kv) {
        return kv.first == "precisions" || kv.first.rfind("--no-", 0) == 0 || kv.first == "--bf16-only";
      });
      const std::vector<Precision> cols = precisions_given ? req.precisions : std::vector<Precision>{};
      if (datasheet_only) {
        const bool modes_given = plan.settings.count("modes") || plan.settings.count("--pre-quantize");
        pr = predict_datasheet_only(run.plan, modes_given ? req.modes : run.modes, run.recipe_options, target, data, cols);
      } else {
        if (plan.settings.count("modes") || plan.settings.count("--pre-quantize"))
          throw UsageError("--mode applies to a datasheet-only prediction: a run is predicted in the modes it measured");
        if (run.dry_run || run.modes.empty())
          throw UsageError(fmt::format("{} has no measurements to predict from ({})", clip_text(run_path),
                                       run.dry_run ? "a dry run or plan only" : "no timed modes"));
        const GpuSpec* source = nullptr;
        if (!source_gpu.empty()) source = &db.find(source_gpu);
        else if (run.device) source = db.match_device(run.device->name);
        if (!source)
          throw UsageError(fmt::format("the GPU of {} ('{}') is not in the spec database; name it with --source-gpu "
                                       "(known: {})",
                                       clip_text(run_path), run.device ? clip_text(run.device->name, 80) : "none",
                                       db.known_keys()));
        pr = predict_from_run(run, run_path, *source, target, data, cols);
      }
    } else {
      if (!source_gpu.empty()) throw UsageError("--source-gpu needs a RUN.json");
      if (datasheet_only) throw UsageError("--datasheet-only needs a RUN.json (without one the prediction is datasheet-only)");
      const RunRequest req = cli::build_plan_request(plan);
      pr = predict_datasheet_only(req.plan, req.modes, req.options.recipe, target, data, req.precisions);
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

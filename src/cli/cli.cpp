// gemmscope's command line as a library (cli/cli.hpp): the options, the run request, the
// dispatch to the subcommands. main.cpp, the tests and the flag fuzzer call gemmscope_main().
#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <signal.h>
#include <unistd.h>
#include <vector>

#include "cli/argv_scan.hpp"
#include "cli/cli_util.hpp"
#include "cli/cmd_comm.hpp"
#include "cli/cmd_mpi.hpp"
#include "cli/cmd_parallel.hpp"
#include "core/parallel/parallel_records.hpp"
#include "core/node/comm_records.hpp"
#include "core/node/comm_step.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/model/model_config.hpp"
#include "core/model/model_fields.hpp"
#include "core/io/output_paths.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "core/run/settings.hpp"
#include "core/run/step_context.hpp"
#include "core/plan/step_model.hpp"
#include "core/report/report_whole_step.hpp"
#include "core/step/step_plan.hpp"
#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"
#if __has_include("cli/commands.hpp")
#include "cli/commands.hpp"
#define GS_HAVE_SUBCOMMANDS 1
#endif
#ifdef GEMMSCOPE_WITH_CUDA
#include "cuda/engine_cuda.hpp"
#endif

namespace {

using namespace gs;

// The plan flags (cli.hpp) and the run's own.
struct Options : gs::cli::PlanFlags {
  bool dry_run = false, quiet = false;
  bool verify_dgrad = false;  // the seed's early flag; a no-op here (Dgrad is always measured)
  std::string out_chart, out_json, out_csv, out_trace;
  int64_t device = 0;
  bool kernels = false;  // --kernels: print the kernel table (core/results/kernels.hpp, docs/kernels.md)
  std::string comm_json;  // --comm-json (the collectives' settings are the registry's: cmd_comm.hpp)
  bool all_gpus = false;         // never set here: dispatch() hands --all-gpus to cmd_fleet.cpp
  std::string fleet_threshold;   // idem
  bool mpi = false;              // never set here: dispatch() hands --mpi to cmd_mpi.cpp
};

// The first of CLI11's comma-separated option names: "--hidden_size,--hidden-size" -> "--hidden_size".
std::string first_name(const char* names) {
  const std::string s = names;
  return s.substr(0, s.find(','));
}

// Integer and number options take their text and parse it as plain decimal (text_util.hpp):
// CLI11's own conversion detects bases (010 = 8, 0x200 = 512) and accepts nan/inf.
// `Dst` is int64_t, or std::optional<int64_t> for model fields that are unset unless given.
template <class Dst>
CLI::Option* add_int(CLI::App& app, const char* names, Dst& dst, const char* help) {
  const std::string flag = first_name(names);
  return app.add_option_function<std::string>(names, [&dst, flag](const std::string& v) { dst = parse_decimal_int(v, flag); },
                                              help)
      ->type_name("INT");
}

// One flag of setting `s`: its own (`key` its path; a value unless a Flag) or a shortcut (`key` its
// first name; a value when it has a type name).
void bind_flag(CLI::App& app, GivenSettings& given, const Setting& s, const std::string& flags, const std::string& help,
               const std::string& type_name, bool takes_value, const std::string& key) {
  if (!takes_value) {
    app.add_flag_callback(flags, [&given, key] { given[key] = ""; }, help)->group(s.group);
    return;
  }
  const Setting* sp = &s;
  if (s.bare && key == s.path()) {  // its value may be left out: bare, it means s.bare
    CLI::Option* opt = app.add_option_function<std::vector<std::string>>(
        flags, [&given, key, sp](const std::vector<std::string>& v) { given[key] = v.empty() || v[0].empty() ? *sp->bare : v[0]; },
        help);
    opt->expected(0, 1)->group(s.group);
    if (!type_name.empty()) opt->type_name(type_name);
    return;
  }
  CLI::Option* opt = app.add_option_function<std::string>(
      flags,
      [&given, key, sp](const std::string& v) {
        if (sp->type == SettingType::Int) parse_decimal_int(v, sp->first_flag());
        if (sp->type == SettingType::Uint) parse_decimal_uint(v, sp->first_flag());
        if (sp->type == SettingType::Number) parse_decimal_number(v, sp->first_flag());
        given[key] = v;
      },
      help);
  opt->group(s.group);
  if (!type_name.empty()) opt->type_name(type_name);
}

void bind_setting_flags(CLI::App& app, GivenSettings& given, const Setting& s) {
  if (!s.flags.empty()) bind_flag(app, given, s, s.flags, s.help, s.type_name, s.type != SettingType::Flag, s.path());
  for (const SettingFlag& f : s.shortcuts) {
    const std::string first = f.flags.substr(0, f.flags.find(','));
    bind_flag(app, given, s, f.flags, f.help, f.type_name, !f.type_name.empty(), first);
  }
}

}  // namespace

// The registry's settings of help group `group` as CLI11 options (core/run/settings.hpp): each stores
// the text it was given in `given`; numbers are checked for their syntax as they are parsed (as
// every integer option is), values against their names and ranges by apply_settings().
void gs::cli::add_setting_options(CLI::App& app, GivenSettings& given, const std::string& group) {
  for (const Setting& s : run_settings())
    if (s.group == group && !s.placed_by_cli) bind_setting_flags(app, given, s);
}

void gs::cli::add_setting_flag(CLI::App& app, GivenSettings& given, const std::string& first_name) {
  for (const Setting& s : run_settings()) {
    if (!s.flags.empty() && s.first_flag() == first_name) {
      bind_flag(app, given, s, s.flags, s.help, s.type_name, s.type != SettingType::Flag, s.path());
      return;
    }
    for (const SettingFlag& f : s.shortcuts)
      if (f.flags.substr(0, f.flags.find(',')) == first_name) {
        bind_flag(app, given, s, f.flags, f.help, f.type_name, !f.type_name.empty(), first_name);
        return;
      }
  }
  throw std::logic_error("no run-setting flag " + first_name);
}

namespace {

// --routing and --capacity-factor: text and a decimal, not in the model-field table.
void add_moe_text_options(CLI::App& app, cli::PlanFlags& o) {
  app.add_option_function<std::string>(
         "--routing", [&o](const std::string& v) { o.model.moe.routing = v; },
         "balanced | random (seeded, default) | lognormal:SIGMA | hot:FRACTION | file:PATH (JSON list of per-expert "
         "token counts)")
      ->type_name("KIND")
      ->group("MoE and MLA");
  app.add_option_function<std::string>(
         "--capacity-factor",
         [&o](const std::string& v) {
           const double f = parse_decimal_number(v, "--capacity-factor");
           if (!(f > 0) || f > 1e6) throw UsageError("--capacity-factor must be a positive number");
           o.model.moe.capacity_factor = f;
         },
         "Drop tokens over ceil(F x assignments / experts) per expert (reported)")
      ->type_name("F")
      ->group("MoE and MLA");
}

void add_model_options(CLI::App& app, cli::PlanFlags& o) {
  // The integer fields' flags, in --help order (core/model/model_fields.cpp). --q-lora-rank also
  // takes 'none'; --routing and --capacity-factor come before it.
  for (const ModelField& f : model_fields()) {
    if (f.plain_flag) {
      add_int(app, f.flags, f.given(o.model), f.help)->group(f.group);
      continue;
    }
    add_moe_text_options(app, o);
    app.add_option_function<std::string>(
           f.flags,
           [&o, &f](const std::string& v) {
             std::optional<int64_t>& dst = f.given(o.model);
             if (iequals(v, "none")) { dst = 0; return; }
             const int64_t r = parse_decimal_int(v, f.first_flag());
             if (r <= 0) throw UsageError(fmt::format("{} must be > 0 (or 'none' for a plain q projection), got {}", f.first_flag(), r));
             dst = r;
           },
           f.help)
        ->type_name("INT|none")
        ->group(f.group);
  }
  // Two flags, each with its own help line (one CLI11 flag with a '!' negation renders as
  // "--gated-mlp,--gated_mlp,--no-gated-mlp{false}").
  CLI::Option* gated = app.add_flag_callback("--gated-mlp,--gated_mlp", [&o] { o.model.gated_mlp = true; },
                                             "Gated MLP (SwiGLU/GeGLU): MLP-up N = 2 x intermediate")
                           ->group("Model");
  CLI::Option* plain = app.add_flag_callback("--no-gated-mlp,--no_gated_mlp", [&o] { o.model.gated_mlp = false; },
                                             "Plain MLP: overrides a preset or config.json that gates")
                           ->group("Model");
  // Both given: an error after parsing (CLI11's excludes() would add "Excludes: ..." to the help).
  app.final_callback([gated, plain] {
    if (gated->count() > 0 && plain->count() > 0) throw UsageError("--gated-mlp and --no-gated-mlp are mutually exclusive");
  });
  app.add_option("--config", o.config_path, "Hugging Face config.json (flags override its values)")->group("Model");
  app.add_option("--model", o.preset, "Model preset (see --list-models)")->group("Model");
  app.add_flag("--list-models", o.list_models, "List model presets and exit")->group("Model");
}

// --sweep-sizes "512,1024,...": square sizes N only (an MxKxN item is refused even when M = K = N).
std::vector<int64_t> sweep_sizes(const std::string& spec) {
  if (spec.empty()) return {256, 512, 1024, 2048, 4096, 8192, 16384};
  int index = 0;
  for (const std::string& item : split_list(spec)) {
    ++index;
    if (item.find_first_of("xX") != std::string::npos)
      throw UsageError(fmt::format("--sweep-sizes takes square sizes N (e.g. 512,1024), got item {} '{}'", index, clip_text(item, 80)));
  }
  std::vector<int64_t> out;
  for (const Gemm& g : build_shapes_plan(spec, "--sweep-sizes").gemms) out.push_back(g.m);
  return out;
}

// --seed as given (the routing draws of a model plan need it before the plan exists), else the default.
uint64_t seed_of(const cli::PlanFlags& o) {
  const Setting& s = find_setting("timing.seed");
  const auto it = o.settings.find(s.path());
  const SettingValue v = it != o.settings.end() ? setting_from_text(s, it->second) : s.dflt;
  return static_cast<uint64_t>(std::get<int64_t>(v));
}

// --step-context as given (a model plan follows its framework's layout rules before the run's
// settings are applied), else the model plans' default.
StepContextKind step_context_of(const cli::PlanFlags& o) {
  const Setting& s = find_setting("timing.step_context");
  const auto it = o.settings.find(s.path());
  const SettingValue v = it != o.settings.end() ? setting_from_text(s, it->second) : s.dflt;
  return step_context_from_string(std::get<std::string>(v));
}

}  // namespace

bool gs::cli::any_plan_shape_flag(const PlanFlags& o) {
  return o.model.any_model_field() || o.model.micro_batch_size || o.model.sequence_length || o.model.tensor_parallel ||
         o.model.vocab_divisible_by || o.model.moe.expert_parallel || o.model.moe.routing || o.model.moe.capacity_factor ||
         o.model.gated_mlp || !o.config_path.empty() || !o.preset.empty() || !o.shapes.empty() || o.sweep ||
         !o.sweep_spec.empty();
}

void gs::cli::add_plan_shape_flags(CLI::App& app, PlanFlags& o) {
  add_model_options(app, o);
  app.add_option("--shapes", o.shapes, "Explicit GEMMs 'MxKxN,...' or square sizes '1024,2048' (no model flags)")->group("Shapes");
  app.add_flag("--sweep", o.sweep, "Square sweep 256..16384 (or --sweep-sizes)")->group("Shapes");
  app.add_option("--sweep-sizes", o.sweep_spec, "Sizes for --sweep, e.g. '512,1024,4096'")->group("Shapes");
}

void gs::cli::add_plan_precision_flags(CLI::App& app, PlanFlags& o) {
  for (const char* f : {"--precisions", "--no-bf16", "--no-fp8-current", "--no-fp8-delayed", "--no-fp8-block", "--no-fp8",
                        "--bf16-only", "--no-fp4"})
    cli::add_setting_flag(app, o.settings, f);  // the precisions (core/run/settings.cpp)
  cli::add_setting_flag(app, o.settings, "--pre-quantize");
}

void gs::cli::print_model_presets() {
  for (const Preset& p : presets()) {
    const ModelConfig& c = p.config;
    fmt::print("{:<15} hidden={} intermediate={} heads={}/{} layers={} vocab={} batch={}x{}  {}\n", p.name, c.hidden_size,
               c.intermediate_size, c.num_attention_heads, c.kv_heads(), c.num_hidden_layers, c.vocab_size,
               c.micro_batch_size, c.sequence_length, p.description);
  }
}

RunRequest gs::cli::build_plan_request(const PlanFlags& o) {
  RunRequest req;
  const bool model_flags = o.model.any_model_field() || o.model.micro_batch_size || o.model.sequence_length ||
                           o.model.tensor_parallel || o.model.vocab_divisible_by || o.model.moe.expert_parallel ||
                           o.model.moe.routing || o.model.moe.capacity_factor || !o.config_path.empty() || !o.preset.empty();
  if (!o.shapes.empty() && o.sweep) throw UsageError("--shapes and --sweep are mutually exclusive");
  if (!o.sweep_spec.empty() && !o.sweep) throw UsageError("--sweep-sizes needs --sweep");
  if ((!o.shapes.empty() || o.sweep) && model_flags)
    throw UsageError(fmt::format("{} is mutually exclusive with model flags (--hidden_size, --config, --model, ...)",
                                 o.sweep ? "--sweep" : "--shapes"));
  if (!o.config_path.empty() && !o.preset.empty()) throw UsageError("--config and --model are mutually exclusive");
  if (!o.shapes.empty()) {
    req.plan = build_shapes_plan(o.shapes);
  } else if (o.sweep) {
    req.plan = build_shapes_plan(sweep_sizes(o.sweep_spec));
  } else {
    ModelConfig c = !o.config_path.empty() ? load_hf_config(o.config_path)
                    : !o.preset.empty()    ? find_preset(o.preset).config
                                           : default_config();
    if (o.config_path.empty() && o.preset.empty() && o.model.any_model_field()) {
      // A model from flags keeps the default config's batch only where no batch flag was given,
      // and says so (the header prints where each batch number came from).
      c.name = "custom";
      c.micro_batch_from = c.sequence_from = "default of codonfm-5b, the default config";
    }
    apply_overrides(c, o.model);
    c.moe.routing_seed = seed_of(o);  // routing draws are reproducible by --seed
    c.layout = layout_framework(step_context_of(o));  // Megatron-LM's or PyTorch's layout rules
    req.plan = build_model_plan(c);
  }
  // The run's settings (core/run/settings.hpp): given, or the default of the plan's kind; the
  // rules between them (--bf16-only and --precisions, --pre-quantize and --mode, ...) are theirs.
  apply_settings(o.settings, req);
  return req;
}

namespace {

RunRequest build_request(const Options& o, std::optional<cli::ParallelSetup>* parallel = nullptr) {
  RunRequest req = cli::build_plan_request(o);
  // The parallel step (cmd_parallel.cpp): the plan becomes one rank's.
  std::optional<cli::ParallelSetup> ps = cli::prepare_parallel(
      req, ModelGiven{o.model.tensor_parallel, o.model.moe.expert_parallel, o.model.micro_batch_size});
  if (parallel) *parallel = std::move(ps);
  if (o.device < 0) throw UsageError(fmt::format("--device must be >= 0, got {}", o.device));
  if (o.device > std::numeric_limits<int>::max()) throw UsageError(fmt::format("--device {} is too large", o.device));
  req.options.timing.step_gap_ms_per_gflop = step_gap_ms_per_gflop(req.plan, req.options.timing.step_other_ms);
  req.options.step_model = step_work_model(req.plan, req.options.timing.step_context_kind);
  // The whole step's settings are checked before anything runs (core/step/step_plan.hpp refuses what
  // makes no sense together).
  if (req.plan.model_mode && !req.modes.empty() && !req.precisions.empty())
    (void)build_step_plan(req.plan, req.options.timing.step_context_kind, req.step, req.precisions.front(),
                          req.modes.front(), req.options.recipe);
  req.options.device = static_cast<int>(o.device);
  return req;
}

// Output paths are checked before any measurement so a long run never ends in an unwritable or
// clobbered file: each must be writable (output_paths.hpp), no two outputs may be one file, and
// no output may be a file the run reads (--config, a --routing file, the GPU spec database).
// Without --json, -o X also writes its results to X.json.
void check_outputs(const Options& o, const RunRequest& req) {
  if (!o.out_chart.empty()) check_chart_path(o.out_chart, "-o");
  const std::string implicit_json = !o.out_chart.empty() && o.out_json.empty() ? o.out_chart + ".json" : "";
  std::vector<NamedFile> outs;
  if (!o.out_json.empty()) outs.push_back({o.out_json, "--json"});
  if (!o.out_csv.empty()) outs.push_back({o.out_csv, "--csv"});
  if (!o.out_trace.empty()) outs.push_back({o.out_trace, "--trace"});
  if (!o.out_chart.empty()) outs.push_back({o.out_chart, "-o"});
  if (!implicit_json.empty()) outs.push_back({implicit_json, fmt::format("the results JSON of -o {}", clip_text(o.out_chart, 80))});
  for (const char* key : {"parallel.json", "parallel.trace"})
    if (const auto it = o.settings.find(key); it != o.settings.end())
      outs.push_back({it->second, find_setting(key).first_flag()});
  if (!o.comm_json.empty()) outs.push_back({o.comm_json, "--comm-json"});  // checked writable by check_comm_json
  for (const NamedFile& x : outs)
    if (x.what != "--comm-json") check_output_path(x.path, x.what);
  std::vector<NamedFile> ins;
  if (!o.config_path.empty()) ins.push_back({o.config_path, "--config file"});
  if (req.plan.routing && req.plan.routing->spec.kind == RoutingKind::File)
    ins.push_back({req.plan.routing->spec.path, "--routing file"});
#ifdef GS_HAVE_SUBCOMMANDS
  if (const auto db = cli::find_gpu_spec_file()) ins.push_back({*db, "GPU spec database"});
#endif
  check_distinct_files(outs, ins);
}

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0) {}
  void operator()(size_t done, size_t total, const std::string& what) {
    if (!enabled_) return;
    std::string line = fmt::format("[{}/{}] {}", done, total, what);
    if (tty_) fmt::print(stderr, "\r\033[K{}", line);
    else fmt::print(stderr, "{}\n", line);
    if (tty_ && done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  }
 private:
  bool enabled_, tty_;
};

int run_main(int argc, char** argv) {
  Options o;
  CLI::App app{"gemmscope: where a transformer's training GEMM time goes, per precision, on this GPU"};
  app.set_version_flag("--version", std::string("gemmscope ") + GEMMSCOPE_VERSION);
  app.footer("Subcommands: 'gemmscope plot RESULT.json -o chart.png', 'gemmscope compare A.json B.json',\n"
             "'gemmscope report RESULT.json' (the text report of a saved run),\n"
             "'gemmscope predict RUN.json --gpu B300' (predicted times on another GPU; --list-gpus),\n"
             "'gemmscope layouts --model M --gpus N --global-batch B' (the fastest parallel layouts).\n"
             "With no arguments: the seed's 5B config (codonfm-5b) in training mode on GPU 0.");
  cli::add_plan_shape_flags(app, o);
  cli::add_plan_precision_flags(app, o);
  app.add_flag("--verify-dgrad", o.verify_dgrad, "Accepted for scripts written for the seed tool's first version: Dgrad is always "
                                 "measured, never estimated as 2 x Fprop")
      ->group("Measurement");
  cli::add_setting_flag(app, o.settings, "--mode");
  cli::add_setting_options(app, o.settings, "Measurement");  // --num-warmup, --l2, --seed, ... (core/run/settings.cpp)
  add_int(app, "--device", o.device, "CUDA device index (default 0)")->group("Measurement");
  cli::add_comm_options(app, o.settings, o.comm_json);
  cli::add_setting_options(app, o.settings, "Parallel step");  // --layout, --cluster, --gpus, ... (docs/parallel.md)
  // Handled by dispatch() before this parser (cmd_fleet.cpp); declared here for --help.
  app.add_flag("--all-gpus", o.all_gpus, "Run on every visible GPU at once, one worker each; the fleet summary (docs/node.md)")
      ->group("Node");
  app.add_option("--fleet-threshold", o.fleet_threshold, "With --all-gpus: name GPUs slower than the median by more than this (3%)")
      ->group("Node");
  // Handled by dispatch() (cmd_mpi.cpp), which passes every other flag to each rank's run.
  app.add_flag("--mpi", o.mpi, "One rank per GPU under mpirun/srun (automatic under a launcher); needs libgemmscope_mpi.so (docs/node.md)")
      ->group("Node");
  cli::add_setting_flag(app, o.settings, "--grouped");
  cli::add_setting_options(app, o.settings, "Recipes");  // --fp8-format, --amax-history, ...
  cli::add_setting_options(app, o.settings, "Step");     // --recompute, --param-storage, ... (core/step/step_options.hpp)
  app.add_flag("--kernels", o.kernels, "Print the kernels each cell ran (CUPTI), their times and the cuBLASLt algorithm")
      ->group("Kernels");
  cli::add_setting_options(app, o.settings, "Kernels");  // --algo, --num-sms, --profile
  cli::add_setting_flag(app, o.settings, "--provider");
  for (const char* f : {"--accuracy", "--accuracy-only", "--dist"}) cli::add_setting_flag(app, o.settings, f);
  app.add_flag("--dry-run", o.dry_run, "Print the plan (FLOPs, bytes); touch no GPU")->group("Output");
  app.add_option("-o,--output", o.out_chart, "Chart file (.png/.svg/.pdf)")->group("Output");
  app.add_option("--json", o.out_json, "Write the result JSON here")->group("Output");
  app.add_option("--csv", o.out_csv, "Write one CSV row per (mode, GEMM, precision, provider)")->group("Output");
  app.add_option("--trace", o.out_trace,
                 "Write the predicted whole step as a Chrome trace (Perfetto, chrome://tracing): one process per "
                 "precision, one track per stream (GPU, host)")
      ->group("Output");
  app.add_flag("-q,--quiet", o.quiet, "No progress on stderr")->group("Output");

  app.allow_extras();  // unknown options: reject_extras() names them with a suggestion
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    cli::print_error("gemmscope: ", std::string(e.what()) + " (see --help)");
    return 2;
  }
  cli::reject_extras(app);
  cli::reject_empty_values(app);
  if (o.list_models) {
    cli::print_model_presets();
    return 0;
  }
  std::optional<cli::ParallelSetup> parallel;
  RunRequest req = build_request(o, &parallel);
  cli::check_comm_json(req.comm, o.comm_json);
  check_outputs(o, req);
  // The layout's collectives (cmd_comm.cpp), before any GEMM is timed: a layout this node cannot
  // run is refused first. --comm-only stops there.
  std::string comm_text;
  CommResult comm_result;
  if (req.comm.enabled()) {
    comm_text = cli::comm_section(req.plan, req.comm, o.comm_json, !o.dry_run, &comm_result);
    if (req.comm.only) {
      cli::print_stdout(comm_text);
      return 0;
    }
  }

  RunResult result;
  bool measured = false;
  if (o.dry_run) {
    result = plan_only(req);
    result.dry_run_requested = true;
    result.why_not_measured = "--dry-run";
  } else {
    std::string why_not;
#ifdef GEMMSCOPE_WITH_CUDA
    std::string why;
    std::unique_ptr<Engine> engine = cuda::make_engine(req.options, why);
    if (engine) {
      Progress progress(!o.quiet);
      result = run(*engine, req, [&](size_t d, size_t t, const std::string& w) { progress(d, t, w); });
      measured = true;
    } else {
      why_not = "no GPU: " + why;
      if (!parallel)
        fmt::print(stderr, "gemmscope: no GPU measurement: {}. Printing the plan instead; measuring needs a CUDA GPU.\n", why);
    }
#else
    why_not = "this build has no CUDA backend";
    if (!parallel)
      fmt::print(stderr, "gemmscope: this build has no CUDA backend; printing the plan instead (measuring needs a CUDA build and a GPU).\n");
#endif
    if (!measured) {  // exit 0 with the plan, but never dressed up as a requested dry run
      result = plan_only(req);
      result.why_not_measured = why_not;
    }
  }
  // Roofline and % of peak of a measured run on its own GPU (data/gpus.json); a database that
  // cannot be read becomes a note, never a lost measurement.
  nlohmann::json roofline;
  std::string roofline_text;
#ifdef GS_HAVE_SUBCOMMANDS
  if (measured) {
    std::optional<GpuDb> db;
    RooflineContext ctx;
    try {
      ctx = cli::local_roofline(result, db);
    } catch (const UsageError& e) {
      ctx = {nullptr, fmt::format("the GPU spec database cannot be used ({}): no roofline", e.what())};
    }
    roofline = roofline_json(result, ctx);
    roofline_text = render_roofline_text(result, ctx);
    // MFU and HFU against the device's datasheet peak (dense BF16).
    if (result.step && ctx.spec && ctx.spec->peak(PeakFormat::BF16))
      set_step_peak(*result.step, {ctx.spec->peak(PeakFormat::BF16)->value,
                                   fmt::format("{}, {}", ctx.spec->name, ctx.spec->peak(PeakFormat::BF16)->source)});
  }
#endif
  // The collectives in the same document: records of kind "collective" and the "comm" block.
  if (req.comm.enabled()) add_collective_records(result, comm_result);
  const auto result_json = [&] {
    nlohmann::json j = to_json(result);
    if (!roofline.is_null()) j["roofline"] = roofline;
    if (req.comm.enabled()) j["comm"] = comm_block_json(comm_result, result.plan);
    return json_text(j, 2) + "\n";
  };
  // With the parallel step, an unmeasured run prints the step alone (predicted), a measured one
  // the GEMM report and then the step built from it.
  // The step is in the result document too: its records and its section (core/parallel/parallel_records.hpp).
  ParallelReport parallel_step;
  if (parallel && !measured) {
    const std::string text = cli::parallel_section(*parallel, req, nullptr, nullptr, &parallel_step);
    add_parallel_step_records(result, parallel_step);
    if (!o.out_json.empty()) write_file_atomic(o.out_json, result_json());
    cli::print_stdout(comm_text + text);
    std::fflush(stdout);
    return 0;
  }
  // No formatting error of one output may lose a measurement: the report is rendered apart from
  // the files, and whichever of them fails, the other is still produced before the error.
  std::string report;
  std::exception_ptr report_error;
  try {
    report = measured ? render_text(result) + roofline_text : render_plan_text(result);
    if (measured && o.kernels) report += render_kernel_table(result);
    else if (measured) report += render_autotune_table(result);
    report += comm_text;
    if (measured && req.comm.enabled()) report += render_layer_comm(comm_result, result);  // core/node/comm_step.hpp
    if (parallel) {
      report += "\n" + cli::parallel_section(*parallel, req, &result, req.comm.enabled() ? &comm_result : nullptr, &parallel_step);
      add_parallel_step_records(result, parallel_step);
    }
  } catch (...) {
    report_error = std::current_exception();
  }
  // The files before the report: a write that fails (a full disk) is the run's error, said
  // before anything is printed; a measured run still prints its report, so no measurement is lost.
  try {
    if (!o.out_json.empty()) write_file_atomic(o.out_json, result_json());
    if (!o.out_csv.empty() && measured) write_file_atomic(o.out_csv, render_csv(result));
    if (!o.out_trace.empty() && measured) write_file_atomic(o.out_trace, step_trace_text(result));
  } catch (...) {
    if (measured && !report_error) {
      cli::print_stdout(report);
      std::fflush(stdout);
    }
    throw;
  }
  if (report_error) std::rethrow_exception(report_error);
  cli::print_stdout(report);
  std::fflush(stdout);
  if (!o.out_csv.empty() && !measured) fmt::print(stderr, "gemmscope: --csv skipped: nothing was measured\n");
  if (!o.out_trace.empty() && !measured) fmt::print(stderr, "gemmscope: --trace skipped: nothing was measured\n");
  if (!o.out_chart.empty()) {
    if (!measured) {
      fmt::print(stderr, "gemmscope: -o skipped: nothing was measured to chart\n");
    } else {
#ifdef GS_HAVE_SUBCOMMANDS
      std::string json_path = o.out_json;
      if (json_path.empty()) {
        json_path = o.out_chart + ".json";
        write_file_atomic(json_path, result_json());
      }
      const int rc = cli::render_chart(json_path, o.out_chart, {});
      if (rc != 0) {  // the measurement is kept: say where, and fail with the chart's status
        fmt::print(stderr, "gemmscope: drawing the chart {} failed (exit status {}); the results are in {}\n",
                   clip_text(o.out_chart, 120), rc, clip_text(json_path, 120));
        return rc;
      }
#endif
    }
  }
  return 0;
}

}  // namespace

// Exit status: 0 ok, 1 regressions (compare only), 2 bad input, 3 no chart renderer (plot, -o),
// 70 internal error, 74 the report could not be written to stdout.
constexpr int kExitInternalError = 70;
constexpr int kExitStdoutError = 74;  // EX_IOERR

namespace {

int dispatch(int argc, char** argv) {
  try {
#ifdef GS_HAVE_SUBCOMMANDS
    if (argc > 1 && std::string(argv[1]) == "plot") return gs::cli::run_plot(argc - 1, argv + 1);
    if (argc > 1 && std::string(argv[1]) == "compare") return gs::cli::run_compare(argc - 1, argv + 1);
    if (argc > 1 && std::string(argv[1]) == "report") return gs::cli::run_report(argc - 1, argv + 1);
    if (argc > 1 && std::string(argv[1]) == "predict") return gs::cli::run_predict(argc - 1, argv + 1);
    if (argc > 1 && std::string(argv[1]) == "layouts") return gs::cli::run_layouts(argc - 1, argv + 1);
    if (gs::cli::mpi_wanted(argc, argv)) return gs::cli::run_mpi(argc, argv, run_main);
    if (gs::cli::has_flag(argc, argv, "--all-gpus")) return gs::cli::run_fleet(argc, argv);
    // A first word that is no option and no subcommand: a mistyped subcommand (gemmscope takes no
    // positional arguments), named with the nearest subcommand.
    if (argc > 1 && argv[1][0] != '-' && argv[1][0] != '\0') {
      const std::string word = argv[1];
      const std::string hint = gs::did_you_mean(word, {"plot", "compare", "report", "predict", "layouts"});
      if (!hint.empty())
        throw gs::UsageError(fmt::format("unknown subcommand '{}'{} (subcommands: plot, compare, report, predict, layouts)",
                                         gs::clip_text(word, 80), hint));
    }
#endif
    return run_main(argc, argv);
  } catch (const gs::UsageError& e) {  // messages may quote file contents: one line, no control characters
    // Values in messages are cut where they are quoted; the whole line is bounded here as well.
    gs::cli::print_error("gemmscope: ", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Not the user's input: 70 (EX_SOFTWARE), apart from compare's 1 = "regressions found".
    gs::cli::print_error("gemmscope: internal error: ", e.what());
    return kExitInternalError;
  }
}

}  // namespace

int gs::cli::gemmscope_main(int argc, char** argv) {
  // A report or file beyond `ulimit -f`: the write fails with EFBIG and is reported ("error
  // writing to stdout: File too large", exit 74; a file's "cannot write ...", exit 2), instead of
  // SIGXFSZ's default, a silent end with status 153. An ignored or handled SIGXFSZ stays so.
  struct sigaction xfsz {};
  if (::sigaction(SIGXFSZ, nullptr, &xfsz) == 0 && xfsz.sa_handler == SIG_DFL && !(xfsz.sa_flags & SA_SIGINFO))
    ::signal(SIGXFSZ, SIG_IGN);
  const int rc = dispatch(argc, argv);
  // A report that did not reach stdout (a full disk, /dev/full, a closed descriptor) is not a
  // success: check the stream state and the final flush.
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (!flushed || std::ferror(stdout) || !std::cout) {
    if (rc == 0 || rc == 1) {
      fmt::print(stderr, "gemmscope: error writing to stdout{}\n", err ? fmt::format(": {}", std::strerror(err)) : "");
      return kExitStdoutError;
    }
  }
  return rc;
}

// gemmscope: transformer config -> GEMM plan -> measurements on the local GPU -> reports.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli/cli_util.hpp"
#include "core/error.hpp"
#include "core/model_config.hpp"
#include "core/output_paths.hpp"
#include "core/plan.hpp"
#include "core/report.hpp"
#include "core/runner.hpp"
#include "core/text_util.hpp"
#if __has_include("cli/commands.hpp")
#include "cli/commands.hpp"
#define GS_HAVE_SUBCOMMANDS 1
#endif
#ifdef GEMMSCOPE_WITH_CUDA
#include "cuda/engine_cuda.hpp"
#endif

namespace {

using namespace gs;

struct Options {
  ModelOverrides model;
  std::string config_path, preset, shapes, mode = "autocast", sweep_spec;
  bool no_producer_amax = false;
  bool sweep = false, list_models = false, dry_run = false, pre_quantize = false, quiet = false;
  bool verify_dgrad = false;  // the seed's early flag; a no-op here (Dgrad is always measured)
  bool accuracy = false, accuracy_only = false;
  bool mode_given = false;  // --mode was on the command line (o.mode alone cannot tell the default)
  std::string dist = "normal";
  bool no_bf16 = false, no_fp8_current = false, no_fp8_delayed = false, no_fp8_block = false, no_mxfp8 = false,
       no_fp4 = false;
  std::string precisions;
  std::string out_chart, out_json, out_csv;
  std::string fp8_format = "hybrid", fp8_accum = "auto", timing = "cuda-events";
  std::string grouped = "streams:4";
  std::string l2;  // --l2; empty: cold for --shapes/--sweep, warm for model plans
  bool nvfp4_no_2d = false, nvfp4_no_rht = false, nvfp4_no_sr = false;
  int64_t warmup = 10, iters = 100, amax_history = 1024, device = 0, repeats = 1;
  double gpu_warmup = 5.0;
  uint64_t seed = 1234;
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

void add_model_options(CLI::App& app, Options& o) {
  auto i64 = [&](const char* names, std::optional<int64_t>& dst, const char* help) {
    add_int(app, names, dst, help)->group("Model");
  };
  i64("--hidden_size,--hidden-size", o.model.hidden_size, "Hidden size");
  i64("--intermediate_size,--intermediate-size", o.model.intermediate_size, "MLP intermediate size");
  i64("--num_attention_heads,--num-attention-heads", o.model.num_attention_heads, "Attention heads");
  i64("--num_key_value_heads,--num-key-value-heads", o.model.num_key_value_heads, "KV heads for GQA/MQA (default: = heads)");
  i64("--head_dim,--head-dim", o.model.head_dim, "Head dimension (default: hidden / heads)");
  i64("--num_hidden_layers,--num-hidden-layers", o.model.num_hidden_layers, "Transformer layers");
  i64("--micro_batch_size,--micro-batch-size", o.model.micro_batch_size, "Micro-batch size");
  i64("--sequence_length,--sequence-length,--seq_length", o.model.sequence_length, "Sequence length");
  i64("--vocab_size,--vocab-size", o.model.vocab_size, "Vocabulary size: adds the LM-head GEMMs (once per step)");
  i64("--tensor-parallel,--tensor_parallel,--tp", o.model.tensor_parallel, "Tensor-parallel degree (per-rank shapes)");
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

std::vector<Precision> chosen_precisions(const Options& o) {
  std::vector<Precision> out;
  if (!o.precisions.empty()) {
    for (const std::string& item : split_list(o.precisions)) {
      const Precision p = precision_from_string(item);  // an empty item is "unknown precision ''"
      for (Precision q : out)
        if (q == p) throw UsageError(fmt::format("--precisions lists {} twice", item));
      out.push_back(p);
    }
    return out;
  }
  for (Precision p : kAllPrecisions) {
    if ((p == Precision::BF16 && o.no_bf16) || (p == Precision::FP8Current && o.no_fp8_current) ||
        (p == Precision::FP8Delayed && o.no_fp8_delayed) || (p == Precision::FP8Block && o.no_fp8_block) ||
        (p == Precision::MXFP8 && o.no_mxfp8) || (p == Precision::NVFP4 && o.no_fp4))
      continue;
    out.push_back(p);
  }
  if (out.empty()) throw UsageError("every precision is disabled; nothing to measure");
  return out;
}

// --sweep-sizes "512,1024,...": square sizes N only (an MxKxN item is refused even when M = K = N).
std::vector<int64_t> sweep_sizes(const std::string& spec) {
  if (spec.empty()) return {256, 512, 1024, 2048, 4096, 8192, 16384};
  int index = 0;
  for (const std::string& item : split_list(spec)) {
    ++index;
    if (item.find_first_of("xX") != std::string::npos)
      throw UsageError(fmt::format("--sweep-sizes takes square sizes N (e.g. 512,1024), got item {} '{}'", index, item));
  }
  std::vector<int64_t> out;
  for (const Gemm& g : build_shapes_plan(spec, "--sweep-sizes").gemms) out.push_back(g.m);
  return out;
}

constexpr int64_t kMaxIters = 100000;  // --num-iters, --num-warmup

// --grouped serial | streams:N -> EngineOptions::grouped_streams (0 = serial).
int grouped_streams(const std::string& v) {
  if (v == "serial") return 0;
  const std::string prefix = "streams:";
  if (v.rfind(prefix, 0) == 0) {
    const std::string num = v.substr(prefix.size());
    const int64_t n = num.empty() || num.find_first_not_of("0123456789") != std::string::npos ? -1
                      : num.size() > 3                                                     ? 1000
                                                                                           : std::stoll(num);
    if (n >= 1 && n <= 64) return static_cast<int>(n);
  }
  throw UsageError(fmt::format("--grouped must be serial or streams:N with N in 1..64, got '{}'", v));
}


RunRequest build_request(const Options& o) {
  RunRequest req;
  const bool model_flags = o.model.any_model_field() || o.model.micro_batch_size || o.model.sequence_length ||
                           o.model.tensor_parallel || !o.config_path.empty() || !o.preset.empty();
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
    if (o.config_path.empty() && o.preset.empty() && o.model.any_model_field()) c.name = "custom";
    apply_overrides(c, o.model);
    req.plan = build_model_plan(c);
  }
  req.precisions = chosen_precisions(o);
  if (o.accuracy_only && (o.mode_given || o.pre_quantize))
    throw UsageError(fmt::format("--accuracy-only times nothing: {} does not apply (use --accuracy to time and measure "
                                 "accuracy)",
                                 o.mode_given ? "--mode" : "--pre-quantize"));
  if (o.pre_quantize && o.mode_given && o.mode != "pre-quantized")
    throw UsageError(fmt::format("--pre-quantize conflicts with --mode {} (--pre-quantize means --mode pre-quantized)", o.mode));
  std::string mode = o.pre_quantize ? "pre-quantized" : o.mode;
  if (mode == "both") req.modes = {Mode::Autocast, Mode::PreQuantized};
  else if (mode == "all" && req.plan.model_mode) req.modes = {Mode::Autocast, Mode::AutocastShared, Mode::PreQuantized};
  else if (mode == "all") req.modes = {Mode::Autocast, Mode::PreQuantized};  // shapes: nothing to share
  else if (mode == "autocast" || mode == "autocast-shared" || mode == "pre-quantized") req.modes = {mode_from_string(mode)};
  else throw UsageError(fmt::format("--mode must be autocast, autocast-shared, pre-quantized, both or all, got '{}'", mode));
  if (!req.plan.model_mode && req.modes.front() == Mode::AutocastShared)
    throw UsageError("--mode autocast-shared needs a model plan: it shares quantized tensors between the Fprop, "
                     "Dgrad and Wgrad of a layer, and --shapes/--sweep GEMMs stand alone (use autocast)");
  if (o.warmup < 0) throw UsageError("--num-warmup must be >= 0");
  if (o.warmup > kMaxIters) throw UsageError(fmt::format("--num-warmup must be <= {}", kMaxIters));
  if (o.iters < 1) throw UsageError("--num-iters must be >= 1");
  if (o.iters > kMaxIters) throw UsageError(fmt::format("--num-iters must be <= {}", kMaxIters));
  if (!(o.gpu_warmup >= 0 && o.gpu_warmup <= 600)) throw UsageError("--gpu-warmup must be between 0 and 600 seconds");
  if (o.amax_history < 1 || o.amax_history > 1024) throw UsageError("--amax-history must be between 1 and 1024");
  if (o.device < 0) throw UsageError(fmt::format("--device must be >= 0, got {}", o.device));
  if (o.device > std::numeric_limits<int>::max()) throw UsageError(fmt::format("--device {} is too large", o.device));
  if (o.timing != "cuda-events") throw UsageError("--timing: only 'cuda-events' is implemented");
  if (o.repeats < 1 || o.repeats > 1000) throw UsageError(fmt::format("--repeats must be between 1 and 1000, got {}", o.repeats));
  if (o.repeats > 1 && o.accuracy_only) throw UsageError("--repeats repeats timed cells: --accuracy-only times nothing");
  req.options.grouped_streams = grouped_streams(o.grouped);
  req.options.timing = {"cuda-events", static_cast<int>(o.warmup), static_cast<int>(o.iters), o.gpu_warmup,
                        static_cast<int>(o.repeats)};
  if (!o.l2.empty() && o.l2 != "warm" && o.l2 != "cold")
    throw UsageError(fmt::format("--l2 must be warm or cold, got '{}'", o.l2));
  // Standalone shapes default to a cold L2: a GEMM of a training step finds its weight (read once
  // per step) and most of its activations in HBM, not in the L2 a back-to-back loop leaves warm.
  // Model plans keep the layer's own loop warm, as validated against a training step.
  req.options.timing.l2 = !o.l2.empty() ? o.l2 : req.plan.model_mode ? "warm" : "cold";
  req.options.seed = o.seed;
  req.options.device = static_cast<int>(o.device);
  RecipeOptions& r = req.options.recipe;
  if (o.fp8_format == "hybrid") r.fp8_format = Fp8Format::Hybrid;
  else if (o.fp8_format == "e4m3") r.fp8_format = Fp8Format::E4M3;
  else throw UsageError(fmt::format("--fp8-format must be e4m3 or hybrid, got '{}'", o.fp8_format));
  if (o.fp8_accum == "auto") r.fp8_accum = Accumulation::Auto;
  else if (o.fp8_accum == "fast") r.fp8_accum = Accumulation::Fast;
  else if (o.fp8_accum == "split") r.fp8_accum = Accumulation::Split;
  else throw UsageError(fmt::format("--fp8-accum must be auto, fast or split, got '{}'", o.fp8_accum));
  r.amax_history_len = static_cast<int>(o.amax_history);
  r.nvfp4_2d_weights = !o.nvfp4_no_2d;
  r.nvfp4_rht = !o.nvfp4_no_rht;
  r.nvfp4_stochastic_rounding = !o.nvfp4_no_sr;
  r.producer_amax = !o.no_producer_amax;
  req.accuracy = o.accuracy;
  req.accuracy_only = o.accuracy_only;
  req.dist = dist_from_string(o.dist);
  if (o.dist != "normal" && !o.accuracy && !o.accuracy_only)
    throw UsageError("--dist applies to --accuracy / --accuracy-only");
  return req;
}

// Output paths are checked before any measurement so a long run never ends in an unwritable or
// clobbered file: each must be writable (output_paths.hpp), and no two outputs may be one file.
// Without --json, -o X also writes its results to X.json.
void check_outputs(const Options& o) {
  if (!o.out_chart.empty()) check_chart_path(o.out_chart, "-o");
  const std::string implicit_json = !o.out_chart.empty() && o.out_json.empty() ? o.out_chart + ".json" : "";
  struct Out {
    std::string path, what;
  };
  std::vector<Out> outs;
  if (!o.out_json.empty()) outs.push_back({o.out_json, "--json"});
  if (!o.out_csv.empty()) outs.push_back({o.out_csv, "--csv"});
  if (!o.out_chart.empty()) outs.push_back({o.out_chart, "-o"});
  if (!implicit_json.empty()) outs.push_back({implicit_json, fmt::format("the results JSON of -o {}", o.out_chart)});
  for (const Out& x : outs) check_output_path(x.path, x.what);
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = i + 1; j < outs.size(); ++j)
      if (same_output_path(outs[i].path, outs[j].path))
        throw UsageError(fmt::format("{} {} and {} {} are the same file", outs[i].what, printable(outs[i].path),
                                     outs[j].what, printable(outs[j].path)));
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
  app.footer("Subcommands: 'gemmscope plot RESULT.json -o chart.png', 'gemmscope compare A.json B.json'.\n"
             "With no arguments: the seed's 5B config (codonfm-5b) in autocast mode on GPU 0.");
  add_model_options(app, o);
  app.add_option("--shapes", o.shapes, "Explicit GEMMs 'MxKxN,...' or square sizes '1024,2048' (no model flags)")->group("Shapes");
  app.add_flag("--sweep", o.sweep, "Square sweep 256..16384 (or --sweep-sizes)")->group("Shapes");
  app.add_option("--sweep-sizes", o.sweep_spec, "Sizes for --sweep, e.g. '512,1024,4096'")->group("Shapes");
  app.add_option("--precisions", o.precisions, "Comma list, e.g. BF16,FP8Current (overrides --no-*)")->group("Precisions");
  app.add_flag("--no-bf16", o.no_bf16, "Skip BF16")->group("Precisions");
  app.add_flag("--no-fp8-current", o.no_fp8_current, "Skip FP8 current scaling")->group("Precisions");
  app.add_flag("--no-fp8-delayed", o.no_fp8_delayed, "Skip FP8 delayed scaling")->group("Precisions");
  app.add_flag("--no-fp8-block", o.no_fp8_block, "Skip FP8 block scaling")->group("Precisions");
  app.add_flag("--no-fp8,--no-mxfp8", o.no_mxfp8, "Skip MXFP8 (the seed's --no-fp8)")->group("Precisions");
  app.add_flag("--no-fp4,--no-nvfp4", o.no_fp4, "Skip NVFP4")->group("Precisions");
  app.add_flag("--pre-quantize", o.pre_quantize, "Time the GEMM kernel only (= --mode pre-quantized)")->group("Measurement");
  app.add_flag("--verify-dgrad", o.verify_dgrad, "Accepted for scripts written for the seed tool's first version: Dgrad is always "
                                 "measured, never estimated as 2 x Fprop")
      ->group("Measurement");
  CLI::Option* mode_opt = app.add_option("--mode", o.mode,
                 "autocast | autocast-shared (each tensor quantized once per step, as TE) | pre-quantized | "
                 "both (autocast + pre-quantized) | all")
      ->group("Measurement");
  add_int(app, "--num-warmup", o.warmup, "Warmup iterations per GEMM, 0..100000 (default 10)")->group("Measurement");
  add_int(app, "--num-iters", o.iters, "Timed iterations per GEMM, 1..100000 (default 100)")->group("Measurement");
  app.add_option("--l2", o.l2,
                 "warm | cold: flush the L2 between timed iterations (outside the samples); default cold for "
                 "--shapes/--sweep, warm for model plans")
      ->group("Measurement");
  add_int(app, "--repeats", o.repeats,
          "Measure every cell N times, interleaved GEMM-major; per-layer totals and speedups get a median and a 95% "
          "interval (N >= 3), 1..1000 (default 1)")
      ->group("Measurement");
  app.add_option_function<std::string>(
         "--gpu-warmup", [&o](const std::string& v) { o.gpu_warmup = parse_decimal_number(v, "--gpu-warmup"); },
         "Seconds of BF16 GEMMs to settle clocks first, 0..600 (default 5)")
      ->type_name("SECONDS")
      ->group("Measurement");
  app.add_option("--timing", o.timing, "Timing method: cuda-events")->group("Measurement");
  add_int(app, "--device", o.device, "CUDA device index (default 0)")->group("Measurement");
  app.add_option("--grouped", o.grouped,
                 "Grouped (MoE expert) GEMMs: serial | streams:N, per-expert GEMMs over N streams (default streams:4, "
                 "as TE GroupedLinear)")
      ->group("Measurement");
  app.add_option_function<std::string>(
         "--seed", [&o](const std::string& v) { o.seed = parse_decimal_uint(v, "--seed"); },
         "Seed for the random operands, 0..2^64-1 (default 1234)")
      ->type_name("UINT")
      ->group("Measurement");
  app.add_option("--fp8-format", o.fp8_format, "hybrid (E5M2 gradients, default) | e4m3")->group("Recipes");
  app.add_option("--fp8-accum", o.fp8_accum, "auto (fast Fprop, split Dgrad/Wgrad) | fast | split")->group("Recipes");
  add_int(app, "--amax-history", o.amax_history, "FP8 delayed scaling amax history length, 1..1024 (default 1024)")
      ->group("Recipes");
  app.add_flag("--nvfp4-no-2d", o.nvfp4_no_2d, "NVFP4: 1x16 weight scales instead of 16x16")->group("Recipes");
  app.add_flag("--nvfp4-no-rht", o.nvfp4_no_rht, "NVFP4: no random Hadamard transform on Wgrad inputs")->group("Recipes");
  app.add_flag("--no-producer-amax", o.no_producer_amax,
               "autocast-shared: an amax pass for every FP8 current-scaling tensor, also norm/activation outputs "
               "(default: their amax comes from the producing kernel, as TE LayerNormLinear/LayerNormMLP)")
      ->group("Recipes");
  app.add_flag("--nvfp4-no-sr", o.nvfp4_no_sr, "NVFP4: no stochastic rounding of gradients")->group("Recipes");
  app.add_flag("--accuracy", o.accuracy, "Also measure each recipe's error vs an FP32 GEMM of the BF16 inputs")->group("Accuracy");
  app.add_flag("--accuracy-only", o.accuracy_only, "Only the accuracy pass (no timing)")->group("Accuracy");
  app.add_option("--dist", o.dist, "Operand distribution for --accuracy: normal | outliers")->group("Accuracy");
  app.add_flag("--dry-run", o.dry_run, "Print the plan (FLOPs, bytes); touch no GPU")->group("Output");
  app.add_option("-o,--output", o.out_chart, "Chart file (.png/.svg/.pdf)")->group("Output");
  app.add_option("--json", o.out_json, "Write the result JSON here")->group("Output");
  app.add_option("--csv", o.out_csv, "Write one CSV row per (mode, GEMM, precision)")->group("Output");
  app.add_flag("-q,--quiet", o.quiet, "No progress on stderr")->group("Output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "gemmscope: {} (see --help)\n", printable(e.what()));
    return 2;
  }
  cli::reject_empty_values(app);
  o.mode_given = mode_opt->count() > 0;
  if (o.list_models) {
    for (const Preset& p : presets()) {
      const ModelConfig& c = p.config;
      fmt::print("{:<12} hidden={} intermediate={} heads={}/{} layers={} vocab={} batch={}x{}  {}\n", p.name,
                 c.hidden_size, c.intermediate_size, c.num_attention_heads, c.kv_heads(), c.num_hidden_layers,
                 c.vocab_size, c.micro_batch_size, c.sequence_length, p.description);
    }
    return 0;
  }
  RunRequest req = build_request(o);
  check_outputs(o);

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
      fmt::print(stderr, "gemmscope: no GPU measurement: {}. Printing the plan instead; measuring needs a CUDA GPU.\n", why);
    }
#else
    why_not = "this build has no CUDA backend";
    fmt::print(stderr, "gemmscope: this build has no CUDA backend; printing the plan instead (measuring needs a CUDA build and a GPU).\n");
#endif
    if (!measured) {  // exit 0 with the plan, but never dressed up as a requested dry run
      result = plan_only(req);
      result.why_not_measured = why_not;
    }
  }
  std::cout << (measured ? render_text(result) : render_plan_text(result)) << std::flush;
  if (!o.out_json.empty()) write_file_atomic(o.out_json, to_json(result).dump(2) + "\n");
  if (!o.out_csv.empty() && measured) write_file_atomic(o.out_csv, render_csv(result));
  if (!o.out_csv.empty() && !measured) fmt::print(stderr, "gemmscope: --csv skipped: nothing was measured\n");
  if (!o.out_chart.empty()) {
    if (!measured) {
      fmt::print(stderr, "gemmscope: -o skipped: nothing was measured to chart\n");
    } else {
#ifdef GS_HAVE_SUBCOMMANDS
      std::string json_path = o.out_json;
      if (json_path.empty()) {
        json_path = o.out_chart + ".json";
        write_file_atomic(json_path, to_json(result).dump(2) + "\n");
      }
      const int rc = cli::render_chart(json_path, o.out_chart, {});
      if (rc != 0) {  // the measurement is kept: say where, and fail with the chart's status
        fmt::print(stderr, "gemmscope: drawing the chart {} failed (exit status {}); the results are in {}\n",
                   o.out_chart, rc, json_path);
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

int dispatch(int argc, char** argv) {
  try {
#ifdef GS_HAVE_SUBCOMMANDS
    if (argc > 1 && std::string(argv[1]) == "plot") return gs::cli::run_plot(argc - 1, argv + 1);
    if (argc > 1 && std::string(argv[1]) == "compare") return gs::cli::run_compare(argc - 1, argv + 1);
#endif
    return run_main(argc, argv);
  } catch (const gs::UsageError& e) {  // messages may quote file contents: one line, no control characters
    fmt::print(stderr, "gemmscope: {}\n", gs::printable(e.what()));
    return 2;
  } catch (const std::exception& e) {
    // Not the user's input: 70 (EX_SOFTWARE), apart from compare's 1 = "regressions found".
    fmt::print(stderr, "gemmscope: internal error: {}\n", gs::printable(e.what()));
    return kExitInternalError;
  }
}

int main(int argc, char** argv) {
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

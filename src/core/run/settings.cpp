#include "core/run/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/providers/provider.hpp"
#include "core/run/runner.hpp"
#include "core/run/step_context.hpp"
#include "core/step/step_options.hpp"
#include "core/util/suggest.hpp"

namespace gs {

using json = nlohmann::json;


namespace {

const EnumNames<Fp8Format>& fp8_format_names() {
  static const EnumNames<Fp8Format> n{{{Fp8Format::Hybrid, {"hybrid"}}, {Fp8Format::E4M3, {"e4m3"}}}};
  return n;
}

const EnumNames<Accumulation>& accumulation_names() {
  static const EnumNames<Accumulation> n{
      {{Accumulation::Auto, {"auto"}}, {Accumulation::Fast, {"fast"}}, {Accumulation::Split, {"split"}}}};
  return n;
}

template <class E>
std::vector<std::vector<std::string>> choices_of(const EnumNames<E>& names) {
  std::vector<std::vector<std::string>> out;
  for (const auto& e : names.entries) out.push_back(e.names);
  return out;
}

// Two-valued settings stored as a bool: `yes` is the name of true.
std::vector<std::vector<std::string>> two(const char* first, const char* second) { return {{first}, {second}}; }

const std::string& text_of(const SettingValue& v) {
  static const std::string empty;
  const std::string* s = std::get_if<std::string>(&v);
  return s ? *s : empty;
}
bool bool_of(const SettingValue& v) { return std::holds_alternative<bool>(v) && std::get<bool>(v); }
int64_t int_of(const SettingValue& v) { return std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : 0; }
double number_of(const SettingValue& v) { return std::holds_alternative<double>(v) ? std::get<double>(v) : 0.0; }

// A List value: its names joined by ',' (none: ""), and back.
template <class T>
std::string joined(const std::vector<T>& items) {
  std::string out;
  for (const T& x : items) {
    if (!out.empty()) out += ',';
    if constexpr (std::is_same_v<T, std::string>) out += x;
    else out += to_string(x);
  }
  return out;
}
std::vector<std::string> names_of(const SettingValue& v) {
  return text_of(v).empty() ? std::vector<std::string>{} : split_list(text_of(v));
}
template <class T, class Parse>
std::vector<T> parsed_names(const SettingValue& v, Parse parse) {
  std::vector<T> out;
  for (const std::string& n : names_of(v)) out.push_back(parse(n));
  return out;
}

bool given_flag(const GivenSettings& given, const char* first_name) { return given.count(first_name) > 0; }
const std::string* given_text(const GivenSettings& given, const Setting& s) {
  const auto it = given.find(s.path());
  return it == given.end() ? nullptr : &it->second;
}

// --grouped serial | streams:N (lower case) -> EngineOptions::grouped_streams (0 = serial).
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
  throw UsageError(fmt::format("--grouped must be serial, streams:N with N in 1..64, or cutlass, got '{}'", clip_text(v, 80)));
}
std::string grouped_name(int streams) { return streams == 0 ? std::string("serial") : fmt::format("streams:{}", streams); }

// --grouped cutlass is --provider cutlass: the default provider list becomes CUTLASS alone; a list
// that names CUTLASS already is kept; any other list contradicts it.
std::vector<std::string> grouped_cutlass_providers(const std::vector<std::string>& providers) {
  if (providers == std::vector<std::string>{kProviderCublasLt}) return {kProviderCutlass};
  if (std::find(providers.begin(), providers.end(), kProviderCutlass) != providers.end()) return providers;
  throw UsageError(fmt::format("--grouped cutlass is --provider cutlass, but --provider {} has no cutlass",
                               provider_option_string(providers)));
}

constexpr int64_t kMaxIters = 100000;  // --num-iters, --num-warmup
constexpr int64_t kMaxRepeats = 1000;  // --repeats; also what a result file may hold
constexpr int64_t kMaxRanks = int64_t{1} << 20;  // --data-parallel

// The one check of an integer flag's range: "--flag must be between lo and hi[ note], got v".
std::function<void(const SettingValue&)> int_range(std::string flag, int64_t lo, int64_t hi, std::string note = "") {
  return [flag = std::move(flag), lo, hi, note = std::move(note)](const SettingValue& x) {
    if (int_of(x) < lo || int_of(x) > hi)
      throw UsageError(fmt::format("{} must be between {} and {}{}, got {}", flag, lo, hi, note, int_of(x)));
  };
}

// The declarations. Each setting once: flag, type, names, defaults, checks, JSON key, label.
std::vector<Setting> declare() {
  std::vector<Setting> v;
  const auto add = [&](std::string section, std::string key) -> Setting& {
    Setting s;
    s.section = std::move(section);
    s.key = std::move(key);
    s.label = s.path();  // compare's notes and reports name a setting by its JSON path
    v.push_back(std::move(s));
    return v.back();
  };
  // An enum of RecipeOptions as a choice: its names, and the member it lives in.
  const auto recipe_enum = [&](const char* key, const auto& names, auto member) -> Setting& {
    Setting& s = add("recipe_options", key);
    s.type = SettingType::Choice;
    s.type_name = "TEXT";
    s.group = "Recipes";
    s.choices = choices_of(names);
    s.get = [&names, member](const SettingsRef& r) -> SettingValue { return std::string(names.name(r.recipe->*member)); };
    s.set = [&names, member](const SettingsRef& r, const SettingValue& x) { r.recipe->*member = *names.find(text_of(x)); };
    return s;
  };
  // A bool of RecipeOptions written as one of two names (lm_head_precision: bf16 = true).
  const auto recipe_named_bool = [&](const char* key, const char* yes, const char* no, bool RecipeOptions::*member) -> Setting& {
    Setting& s = add("recipe_options", key);
    s.type = SettingType::Choice;
    s.type_name = "TEXT";
    s.group = "Recipes";
    s.choices = two(yes, no);
    const std::string y = yes, n = no;
    s.get = [y, n, member](const SettingsRef& r) -> SettingValue { return r.recipe->*member ? y : n; };
    s.set = [y, member](const SettingsRef& r, const SettingValue& x) { r.recipe->*member = text_of(x) == y; };
    return s;
  };
  const auto recipe_bool = [&](const char* key, bool RecipeOptions::*member) -> Setting& {
    Setting& s = add("recipe_options", key);
    s.type = SettingType::Flag;
    s.group = "Recipes";
    s.get = [member](const SettingsRef& r) -> SettingValue { return r.recipe->*member; };
    s.set = [member](const SettingsRef& r, const SettingValue& x) { r.recipe->*member = bool_of(x); };
    return s;
  };

  // A pass that is off, on beside the timing, or the only thing run, given by two flags (--accuracy
  // and --accuracy-only, --comm and --comm-only): the request's only (what ran is said otherwise).
  const auto off_on_only = [&](const char* section, const char* key, const char* group, SettingFlag also,
                               SettingFlag only) -> Setting& {
    Setting& s = add(section, key);
    s.type = SettingType::Choice;
    s.group = group;
    s.choices = {{"off"}, {"on"}, {"only"}};
    s.shortcuts = {std::move(also), std::move(only)};
    s.placed_by_cli = true;
    s.recorded = false;
    s.compared = false;
    s.dflt = std::string("off");
    s.absent = std::monostate{};
    return s;
  };

  // ---- the run: what is measured (the result's top level) ----
  {
    // --precisions, or every precision less the --no-... ones; --bf16-only.
    Setting& s = add("", "precisions");
    s.type = SettingType::List;
    s.flags = "--precisions";
    s.group = "Precisions";
    s.type_name = "TEXT";
    s.help = "Comma list, e.g. BF16,FP8Current (overrides --no-*)";
    struct Shortcut {
      const char* flags;
      const char* help;
      std::optional<Precision> skips;  // a --no-... flag; none: --bf16-only
    };
    static const Shortcut shortcuts[] = {
        {"--no-bf16", "Skip BF16", Precision::BF16},
        {"--no-fp8-current", "Skip FP8 current scaling", Precision::FP8Current},
        {"--no-fp8-delayed", "Skip FP8 delayed scaling", Precision::FP8Delayed},
        {"--no-fp8-block", "Skip FP8 block scaling", Precision::FP8Block},
        {"--no-fp8,--no-mxfp8",
         "Skip MXFP8 (the seed tool's meaning of --no-fp8: FP8 current/delayed/block still run; for BF16 alone use "
         "--bf16-only)",
         Precision::MXFP8},
        {"--bf16-only", "Only BF16 (= --precisions BF16)", std::nullopt},
        {"--no-fp4,--no-nvfp4", "Skip NVFP4", Precision::NVFP4},
    };
    for (const Shortcut& c : shortcuts) s.shortcuts.push_back({c.flags, c.help, ""});
    s.placed_by_cli = true;
    s.compared = false;  // compare matches the files' columns by precision
    s.required = true;
    s.dflt = s.absent = joined(std::vector<Precision>(std::begin(kAllPrecisions), std::end(kAllPrecisions)));
    s.item = [](const std::string& text, const std::string& where) {
      return std::string(to_string(parsed_at(where, text, precision_from_string)));
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return joined(*r.precisions); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { *r.precisions = parsed_names<Precision>(x, precision_from_string); };
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest&) -> SettingValue {
      const std::string* list = given_text(given, self);
      if (given_flag(given, "--bf16-only")) {
        if (list) throw UsageError("--bf16-only and --precisions are mutually exclusive");
        return std::string(to_string(Precision::BF16));
      }
      std::vector<Precision> out;
      if (list) {
        for (const std::string& item : split_list(*list)) {
          const Precision p = precision_from_string(item);  // an empty item is "unknown precision ''"
          if (std::find(out.begin(), out.end(), p) != out.end())
            throw UsageError(fmt::format("--precisions lists {} twice", item));
          out.push_back(p);
        }
        return joined(out);
      }
      for (Precision p : kAllPrecisions) {
        bool skipped = false;
        for (const Shortcut& c : shortcuts)
          if (c.skips == p && given.count(std::string(c.flags).substr(0, std::string(c.flags).find(',')))) skipped = true;
        if (!skipped) out.push_back(p);
      }
      if (out.empty()) throw UsageError("every precision is disabled; nothing to measure");
      return joined(out);
    };
  }
  {
    // --mode, --pre-quantize; the default per plan kind.
    Setting& s = add("", "modes");
    s.type = SettingType::List;
    s.flags = "--mode";
    s.group = "Measurement";
    s.type_name = "TEXT";
    s.help = "training (default for model plans: each tensor quantized once per step, as Transformer Engine "
             "trains) | per-gemm (each GEMM quantizes its own operands: the seed tool's autocast; the default "
             "for --shapes/--sweep) | pre-quantized (GEMM kernel only) | both (the default + pre-quantized) | all. "
             "Old names: autocast-shared = training, autocast = per-gemm";
    s.shortcuts = {{"--pre-quantize", "Time the GEMM kernel only (= --mode pre-quantized)", ""}};
    s.placed_by_cli = true;
    s.compared = false;  // compare matches the files' modes by name
    s.required = true;
    // The default answers "what will training get": a model plan is timed in Transformer Engine's
    // training schedule (each tensor quantized once per step). Standalone shapes have nothing to
    // share, so they are timed per GEMM.
    s.dflt = std::string(to_string(Mode::Training));
    s.dflt_shapes = std::string(to_string(Mode::PerGemm));
    s.absent = std::monostate{};
    s.item = [](const std::string& text, const std::string& where) {
      return std::string(to_string(parsed_at(where, text, mode_from_string)));
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return joined(*r.modes); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { *r.modes = parsed_names<Mode>(x, mode_from_string); };
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest& req) -> SettingValue {
      const std::string* given_mode = given_text(given, self);
      const std::string raw = given_mode ? *given_mode : "";  // as typed, for the messages
      const bool pre_quantize = given_flag(given, "--pre-quantize");
      if (given_flag(given, "--accuracy-only") && (given_mode || pre_quantize))
        throw UsageError(fmt::format("--accuracy-only times nothing: {} does not apply (use --accuracy to time and "
                                     "measure accuracy)",
                                     given_mode ? "--mode" : "--pre-quantize"));
      // Names in any case; the old names stay accepted.
      const std::string mode = ascii_lower(raw);
      const bool named_mode = mode != "" && mode != "both" && mode != "all";
      if (pre_quantize && given_mode && (!named_mode || mode_from_string(mode) != Mode::PreQuantized))
        throw UsageError(fmt::format("--pre-quantize conflicts with --mode {} (--pre-quantize means --mode pre-quantized)", raw));
      if (pre_quantize) return joined(std::vector<Mode>{Mode::PreQuantized});
      std::vector<Mode> modes = modes_from_flag(raw, req.plan.model_mode);
      // The default answers "what will training get" (above).
      if (modes.empty()) modes = {req.plan.model_mode ? Mode::Training : Mode::PerGemm};
      return joined(modes);
    };
  }

  // ---- recipe_options ----
  {
    Setting& s = recipe_enum("fp8_format", fp8_format_names(), &RecipeOptions::fp8_format);
    s.flags = "--fp8-format";
    s.help = "hybrid (E5M2 gradients, default) | e4m3";
    s.dflt = s.absent = std::string("hybrid");
  }
  {
    Setting& s = recipe_enum("fp8_accumulation", accumulation_names(), &RecipeOptions::fp8_accum);
    s.flags = "--fp8-accum";
    s.help = "auto (fast Fprop, split Dgrad/Wgrad) | fast | split";
    s.dflt = s.absent = std::string("auto");
  }
  {
    Setting& s = add("recipe_options", "amax_history_len");
    s.type = SettingType::Int;
    s.flags = "--amax-history";
    s.group = "Recipes";
    s.type_name = "INT";
    s.help = "FP8 delayed scaling amax history length, 1..1024 (default 1024)";
    s.dflt = s.absent = int64_t{1024};
    s.check = int_range(s.first_flag(), 1, 1024);
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.recipe->amax_history_len}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.recipe->amax_history_len = static_cast<int>(int_of(x)); };
  }
  {
    Setting& s = recipe_bool("nvfp4_2d_weights", &RecipeOptions::nvfp4_2d_weights);
    s.flags = "--nvfp4-no-2d";
    s.flag_sets = false;
    s.help = "NVFP4: 1x16 weight scales instead of 16x16";
    s.dflt = s.absent = true;
  }
  {
    Setting& s = recipe_bool("nvfp4_rht", &RecipeOptions::nvfp4_rht);
    s.flags = "--nvfp4-no-rht";
    s.flag_sets = false;
    s.help = "NVFP4: no random Hadamard transform on Wgrad inputs";
    s.dflt = s.absent = true;
  }
  {
    Setting& s = recipe_bool("nvfp4_stochastic_rounding", &RecipeOptions::nvfp4_stochastic_rounding);
    s.flags = "--nvfp4-no-sr";
    s.flag_sets = false;
    s.help = "NVFP4: no stochastic rounding of gradients";
    s.dflt = s.absent = true;
  }
  {
    Setting& s = recipe_bool("producer_amax", &RecipeOptions::producer_amax);
    s.flags = "--no-producer-amax";
    s.flag_sets = false;
    s.help = "training mode: an amax pass for every FP8 current-scaling tensor, also norm/activation outputs "
             "(default: their amax comes from the producing kernel, as TE LayerNormLinear/LayerNormMLP)";
    s.dflt = s.absent = true;
  }
  {
    Setting& s = recipe_named_bool("lm_head_precision", "bf16", "same", &RecipeOptions::lm_head_bf16);
    s.flags = "--lm-head-precision";
    s.help = "bf16 (default: the LM head stays in BF16 in every column, as Megatron and Transformer Engine keep "
             "the output layer out of FP8) | same (the column's precision)";
    s.dflt = std::string("bf16");
    s.absent = std::string("same");  // files before the option ran the LM head in each column's precision
  }
  {
    // Set by the runner from the device (FP8 block scaling through MXFP8 on Blackwell): no flag.
    Setting& s = recipe_bool("fp8_block_via_mxfp8", &RecipeOptions::fp8_block_via_mxfp8);
    s.dflt = s.absent = false;
  }
  {
    Setting& s = recipe_named_bool("grouped_quant", "fused", "per-expert", &RecipeOptions::grouped_quant_fused);
    s.flags = "--grouped-quant";
    s.help = "MoE expert operands: fused (default: every expert's tensors quantized in a few multi-tensor "
             "launches, as TE GroupedLinear and DeepSeek-V3 do) | per-expert (an amax and cast launch per expert "
             "tensor)";
    s.dflt = std::string("fused");
    s.absent = std::string("per-expert");  // files before the option quantized experts one by one
  }
  {
    Setting& s = recipe_named_bool("wgrad_output", "fp32-accumulate", "bf16", &RecipeOptions::wgrad_fp32_accumulate);
    s.flags = "--wgrad-output";
    s.help = "Wgrad output: fp32-accumulate (default: accumulated into an FP32 main gradient, FP32 C/D, beta 1, "
             "as Megatron-LM with TE gradient-accumulation fusion) | bf16 (BF16 output, beta 0)";
    s.dflt = std::string("fp32-accumulate");
    s.absent = std::string("bf16");  // files before the option wrote BF16 Wgrad
    // Parameters kept without FP32 main gradients (--param-storage bf16 or fp32, plain PyTorch) have
    // no gradient to accumulate into: their Wgrad writes BF16 unless told otherwise, and
    // fp32-accumulate with them is refused.
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest&) -> SettingValue {
      const Setting& storage = find_setting("step_options.param_storage");
      const std::string* st = given_text(given, storage);
      const bool main_grads = !st || text_of(setting_from_text(storage, *st)) == to_string(ParamStorage::Bf16MainFp32);
      const std::string* text = given_text(given, self);
      if (!text) return main_grads ? self.dflt : SettingValue(std::string("bf16"));
      const SettingValue v = setting_from_text(self, *text);
      if (!main_grads && text_of(v) == "fp32-accumulate")
        throw UsageError(fmt::format("--wgrad-output fp32-accumulate accumulates into FP32 main gradients, which "
                                     "--param-storage {} does not keep (use bf16+fp32-main, or --wgrad-output bf16)",
                                     text_of(setting_from_text(storage, *st))));
      return v;
    };
  }
  {
    Setting& s = recipe_enum("block_fp8_format", fp8_format_names(), &RecipeOptions::block_fp8_format);
    s.flags = "--block-fp8-format";
    s.help = "FP8Block and MXFP8: e4m3 (every operand, TE's default) | hybrid (E5M2 gradients)";
    s.dflt = std::string("e4m3");
    s.absent = std::string("hybrid");  // files before the key ran block/MX recipes as hybrid
  }
  {
    Setting& s = recipe_named_bool("fp8_block_pow2_scales", "pow2", "fp32", &RecipeOptions::fp8_block_pow2_scales);
    s.flags = "--fp8-block-scales";
    s.json_bool = true;  // JSON: true for pow2
    s.help = "FP8Block scales: pow2 (rounded down to powers of two, TE's default) | fp32";
    s.dflt = std::string("pow2");
    s.absent = std::string("fp32");  // files before the key used FP32 scales
  }

  // ---- step_options: the whole step beyond its GEMMs (core/step/step_options.hpp) ----
  // A choice of StepOptions: its names, the member, and the flag's help. Model plans only: a
  // --shapes/--sweep run has no step around its GEMMs, and a flag given to one is refused.
  const auto step_choice = [&](const char* key, const char* flag, const auto& names, auto member, const char* help,
                               const char* dflt) -> Setting& {
    Setting& s = add("step_options", key);
    s.type = SettingType::Choice;
    s.flags = flag;
    s.group = "Step";
    s.type_name = "TEXT";
    s.help = help;
    s.choices = choices_of(names);
    s.dflt = s.absent = std::string(dflt);
    s.get = [&names, member](const SettingsRef& r) -> SettingValue { return std::string(names.name(r.step->*member)); };
    s.set = [&names, member](const SettingsRef& r, const SettingValue& x) { r.step->*member = *names.find(text_of(x)); };
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest& req) -> SettingValue {
      const std::string* text = given_text(given, self);
      if (!text) return self.dflt;
      if (!req.plan.model_mode)
        throw UsageError(fmt::format("{} shapes the whole training step of a model: --shapes/--sweep GEMMs have none",
                                     self.first_flag()));
      return setting_from_text(self, *text);
    };
    return s;
  };
  step_choice("recompute", "--recompute", recompute_names(), &StepOptions::recompute,
              "Activation recompute as Megatron-LM defines it: none (default) | selective (the core attention's "
              "forward again in the backward) | full (every layer's forward again)",
              "none");
  step_choice("param_storage", "--param-storage", param_storage_names(), &StepOptions::storage,
              "Parameters, gradients and Adam states: bf16+fp32-main (default: Megatron-LM, BF16 params with FP32 "
              "main params, grads and states, 18 bytes/param) | bf16 (plain PyTorch BF16 training, 8 bytes/param; "
              "Wgrad then writes BF16) | fp32 (PyTorch autocast with FP32 params, 16 bytes/param)",
              to_string(ParamStorage::Bf16MainFp32));
  step_choice("optimizer", "--optimizer", optimizer_names(), &StepOptions::optimizer,
              "AdamW's kernels: adamw-fused (default: one multi-tensor kernel, Megatron's FusedAdam, "
              "torch.optim.AdamW(fused=True)) | adamw-foreach (PyTorch's default foreach ops)",
              "adamw-fused");
  {
    static const EnumNames<bool> on_off{{{true, {"on"}}, {false, {"off"}}}};
    Setting& s = step_choice("grad_clip", "--grad-clip", on_off, &StepOptions::grad_clip,
                             "on (default: the gradients' global norm every step, Megatron's --clip-grad 1.0, "
                             "PyTorch's clip_grad_norm_) | off",
                             "on");
    s.json_bool = true;  // JSON: true for on
  }
  step_choice("loss", "--loss", loss_names(), &StepOptions::loss,
              "Cross-entropy over the vocabulary: auto (default: fused for te and compile, unfused for eager) | fused "
              "(BF16 logits read once: Megatron's --cross-entropy-loss-fusion, TE's parallel_cross_entropy) | unfused "
              "(logits upcast to FP32, log-softmax, NLL)",
              "auto");
  step_choice("host_form", "--host-form", host_form_names(), &StepOptions::host_form,
              "How the host launches the step: auto (default: eager for te and eager, compiled for compile) | eager "
              "(framework code launches every kernel) | compiled (Inductor's wrapper) | cuda-graph (one replay)",
              "auto");

  // ---- timing ----
  {
    Setting& s = add("timing", "method");
    s.type = SettingType::Text;
    s.flags = "--timing";
    s.group = "Measurement";
    s.type_name = "TEXT";
    s.help = "Timing method: cuda-events";
    s.dflt = s.absent = std::string("cuda-events");
    // A result file may also say "predicted" (gemmscope predict); the command line only cuda-events.
    s.parse = [](const std::string& text, const std::string&) -> SettingValue { return ascii_lower(text); };
    s.check = [](const SettingValue& x) {
      if (text_of(x) != "cuda-events") throw UsageError("--timing: only 'cuda-events' is implemented");
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return r.timing->method; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->method = text_of(x); };
  }
  {
    Setting& s = add("timing", "warmup");
    s.type = SettingType::Int;
    s.flags = "--num-warmup";
    s.group = "Measurement";
    s.type_name = "INT";
    s.help = "Warmup iterations per GEMM, 0..100000 (default 10)";
    s.dflt = s.absent = int64_t{10};
    s.check = int_range(s.first_flag(), 0, kMaxIters);
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.timing->warmup}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->warmup = static_cast<int>(int_of(x)); };
  }
  {
    Setting& s = add("timing", "iters");
    s.type = SettingType::Int;
    s.flags = "--num-iters";
    s.group = "Measurement";
    s.type_name = "INT";
    s.help = "Timed iterations per GEMM, 1..100000 (default 100)";
    s.dflt = s.absent = int64_t{100};
    s.check = int_range(s.first_flag(), 1, kMaxIters);
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.timing->iters}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->iters = static_cast<int>(int_of(x)); };
  }
  {
    Setting& s = add("timing", "gpu_warmup_s");
    s.type = SettingType::Number;
    s.flags = "--gpu-warmup";
    s.group = "Measurement";
    s.type_name = "SECONDS";
    s.help = "Seconds of BF16 GEMMs to settle clocks first, 0..600 (default 5)";
    s.dflt = s.absent = 5.0;
    s.json_range = {{0.0, 1e6}};
    s.unit = " s";
    s.check = [](const SettingValue& x) {
      if (!(number_of(x) >= 0 && number_of(x) <= 600)) throw UsageError("--gpu-warmup must be between 0 and 600 seconds");
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return r.timing->gpu_warmup_s; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->gpu_warmup_s = number_of(x); };
  }
  {
    Setting& s = add("timing", "l2");
    s.type = SettingType::Choice;
    s.flags = "--l2";
    s.group = "Measurement";
    s.type_name = "TEXT";
    s.help = "warm | cold: flush the L2 between timed iterations (outside the samples); default cold for "
             "--shapes/--sweep, warm for model plans";
    s.choices = choices_of(l2_names());
    // Standalone shapes default to a cold L2: a GEMM of a training step finds its weight (read once
    // per step) and most of its activations in HBM, not in the L2 a back-to-back loop leaves warm.
    // Model plans keep the layer's own loop warm, as validated against a training step.
    s.dflt = std::string("warm");
    s.dflt_shapes = std::string("cold");
    s.absent = std::string("warm");  // files before --l2 measured warm
    s.get = [](const SettingsRef& r) -> SettingValue { return std::string(to_string(r.timing->l2)); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->l2 = *l2_names().find(text_of(x)); };
  }
  {
    Setting& s = add("timing", "step_other_ms");
    s.type = SettingType::Number;
    s.flags = "--step-other-ms";
    s.group = "Measurement";
    s.type_name = "MS";
    s.help = "Non-GEMM kernel time of one layer's training step (norms, activations, residuals, quantization; not "
             "attention), e.g. from a profile of your step: replaces --step-context's modelled memory-bound work "
             "(attention stays as --step-context runs it). Model plans only";
    s.dflt = s.absent = 0.0;  // files before --step-other-ms timed GEMMs back to back
    s.json_range = {{0.0, kMaxStepOtherMs}};
    s.unit = " ms";
    s.written = [](const SettingValue& x) { return number_of(x) > 0; };
    s.get = [](const SettingsRef& r) -> SettingValue { return r.timing->step_other_ms; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->step_other_ms = number_of(x); };
  }
  {
    Setting& s = add("timing", "step_context");
    s.type = SettingType::Choice;
    s.flags = "--step-context";
    s.group = "Measurement";
    s.type_name = "FRAMEWORK";
    s.help = "What runs between timed iterations, as a training step runs it between its GEMMs: te (Transformer "
             "Engine / Megatron-LM fused modules; the default for model plans), eager (eager PyTorch), compile "
             "(torch.compile), none (GEMMs back to back; the default for --shapes/--sweep). The norms, "
             "activations, residuals and layout copies are modelled from their bytes; attention is cuDNN's fused "
             "attention measured on this GPU (modelled from its FLOPs where cuDNN is unavailable)";
    s.choices = choices_of(step_context_names());
    // The step's context: Transformer Engine's (the training default) for model plans; standalone
    // shapes have no step around them.
    s.dflt = std::string("te");
    s.dflt_shapes = std::string("none");
    s.absent = std::string("none");  // files before --step-context had none
    s.get = [](const SettingsRef& r) -> SettingValue { return std::string(to_string(r.timing->step_context_kind)); };
    s.set = [](const SettingsRef& r, const SettingValue& x) {
      r.timing->step_context_kind = *step_context_names().find(text_of(x));
    };
  }
  {
    Setting& s = add("timing", "power_hold");
    s.type = SettingType::Choice;
    s.flags = "--power-hold";
    s.group = "Measurement";
    s.type_name = "on|off";
    s.help = "on: heavy BF16 GEMMs run right before each timed loop, so it starts from the GPU's loaded power "
             "state instead of the boost clock an idle gap between cells gives; off (default): loops start from "
             "whatever state the gap left, which read closer to a PyTorch training step on the H100";
    s.choices = two("on", "off");
    s.json_bool = true;  // JSON: true for on
    s.dflt = std::string("off");
    s.absent = std::string("off");  // files before --power-hold had no hold
    s.get = [](const SettingsRef& r) -> SettingValue { return std::string(r.timing->power_hold ? "on" : "off"); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->power_hold = text_of(x) == "on"; };
  }
  {
    Setting& s = add("timing", "repeats");
    s.type = SettingType::Int;
    s.flags = "--repeats";
    s.group = "Measurement";
    s.type_name = "INT";
    s.help = "Measure every cell N times, interleaved GEMM-major; per-layer totals and speedups get a median and a 95% "
             "interval (N >= 3), 1..1000 (default 1)";
    s.dflt = s.absent = int64_t{1};
    s.json_range = {{1.0, static_cast<double>(kMaxRepeats)}};
    s.check = int_range(s.first_flag(), 1, kMaxRepeats);
    s.written = [](const SettingValue& x) { return int_of(x) > 1; };
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.timing->repeats}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.timing->repeats = static_cast<int>(int_of(x)); };
  }
  {
    Setting& s = add("timing", "seed");
    s.type = SettingType::Uint;
    s.flags = "--seed";
    s.group = "Measurement";
    s.type_name = "UINT";
    s.help = "Seed for the random operands, 0..2^64-1 (default 1234)";
    s.dflt = int64_t{1234};
    s.absent = std::monostate{};  // files before the seed was recorded
    // Uint values travel as int64_t bit patterns (2^64-1 is -1).
    s.get = [](const SettingsRef& r) -> SettingValue {
      if (!r.seed->has_value()) return std::monostate{};
      return static_cast<int64_t>(**r.seed);
    };
    s.set = [](const SettingsRef& r, const SettingValue& x) {
      if (std::holds_alternative<std::monostate>(x)) *r.seed = std::nullopt;
      else *r.seed = static_cast<uint64_t>(int_of(x));
    };
  }

  // ---- gemm_options ----
  {
    Setting& s = add("gemm_options", "algo");
    s.type = SettingType::Text;
    s.flags = "--algo";
    s.group = "Kernels";
    s.type_name = "TEXT";
    s.help = "heuristic (cuBLASLt's first choice, as TE; default) | autotune[:K] (time the top K, default 8, keep "
             "the fastest) | search[:K] (also screen the configurations near them, keep the fastest whose output "
             "matches)";
    s.dflt = s.absent = std::string("heuristic");
    s.parse = [](const std::string& text, const std::string&) -> SettingValue {
      GemmOptions o;
      parse_algo_option(ascii_lower(text), o);
      return algo_option_string(o);
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return algo_option_string(*r.gemm); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { parse_algo_option(text_of(x), *r.gemm); };
  }
  {
    Setting& s = add("gemm_options", "num_sms");
    s.type = SettingType::Int;
    s.flags = "--num-sms";
    s.group = "Kernels";
    s.type_name = "INT";
    s.help = "Limit every GEMM to N SMs (cuBLASLt SM-count target; DeepGEMM's set_num_sms, even; default all)";
    s.dflt = s.absent = int64_t{0};
    s.check = int_range(s.first_flag(), 0, 4096, " (0: all SMs)");
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.gemm->num_sms}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.gemm->num_sms = static_cast<int>(int_of(x)); };
  }
  {
    Setting& s = add("gemm_options", "profile");
    s.type = SettingType::Flag;
    s.flags = "--profile";
    s.group = "Kernels";
    s.help = "cudaProfilerStart/Stop around the timed loops only (nsys --capture-range=cudaProfilerApi, "
             "ncu --profile-from-start off)";
    s.dflt = s.absent = false;
    s.get = [](const SettingsRef& r) -> SettingValue { return r.gemm->profile; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.gemm->profile = bool_of(x); };
  }
  {
    // The engine's own: CUPTI records per cell (no flag; --kernels only prints them).
    Setting& s = add("gemm_options", "kernel_trace");
    s.type = SettingType::Flag;
    s.dflt = s.absent = true;
    s.get = [](const SettingsRef& r) -> SettingValue { return r.gemm->trace_kernels; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.gemm->trace_kernels = bool_of(x); };
  }
  {
    Setting& s = add("gemm_options", "kernel_trace_iters");
    s.type = SettingType::Int;
    s.dflt = s.absent = int64_t{3};
    s.get = [](const SettingsRef& r) -> SettingValue { return int64_t{r.gemm->trace_iters}; };
    s.set = [](const SettingsRef& r, const SettingValue& x) { r.gemm->trace_iters = static_cast<int>(int_of(x)); };
  }
  // ---- the run: how grouped GEMMs run, by which providers; the accuracy pass ----
  {
    // The request's only: the result's grouped-GEMM note says how they ran.
    Setting& s = add("", "grouped");
    s.type = SettingType::Text;
    s.flags = "--grouped";
    s.group = "Measurement";
    s.type_name = "TEXT";
    s.help = "Grouped (MoE expert) GEMMs: serial | streams:N, per-expert GEMMs over N streams (default streams:4, "
             "as TE GroupedLinear) | cutlass, every expert in one CUTLASS launch as torch._grouped_mm (the same as "
             "--provider cutlass: dense cells run through CUTLASS too)";
    s.placed_by_cli = true;
    s.recorded = false;
    s.compared = false;
    s.dflt = std::string("streams:4");
    s.absent = std::monostate{};
    s.parse = [](const std::string& text, const std::string&) -> SettingValue {
      const std::string name = ascii_lower(text);
      if (name == kProviderCutlass) return name;  // the CUTLASS provider's single launch (providers, below)
      return grouped_name(grouped_streams(name));
    };
    s.get = [](const SettingsRef& r) -> SettingValue {
      if (!r.grouped_streams) return std::monostate{};
      return grouped_name(*r.grouped_streams);
    };
    s.set = [](const SettingsRef& r, const SettingValue& x) {
      if (!r.grouped_streams) return;
      *r.grouped_streams = text_of(x) == kProviderCutlass ? 4 : grouped_streams(text_of(x));
    };
  }
  {
    Setting& s = add("", "providers");
    s.type = SettingType::List;
    s.flags = "--provider";
    s.group = "Kernels";
    s.type_name = "TEXT";
    s.help = "Kernel providers every cell is measured by: cublaslt (default, as TE and PyTorch) | cutlass | deepgemm | "
             "all | a comma list; the first is the report's main columns, the others are reported beside it";
    s.label = "providers";
    s.placed_by_cli = true;
    s.non_empty = true;
    s.dflt = std::string(kProviderCublasLt);
    s.absent = std::string(kProviderCublasLt);  // files before providers existed measured with cuBLASLt only
    s.item = [](const std::string& text, const std::string& where) {
      if (!is_known_provider(text))
        throw UsageError(fmt::format("{} names an unknown provider \"{}\"", where, clip_text(text, 80)));
      return text;
    };
    s.parse = [](const std::string& text, const std::string&) -> SettingValue {
      return provider_option_string(parse_provider_option(text));
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return provider_option_string(*r.providers); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { *r.providers = names_of(x); };
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest&) -> SettingValue {
      const std::string* list = given_text(given, self);
      const SettingValue named = list ? setting_from_text(self, *list) : self.dflt;
      // --grouped cutlass: the single CUTLASS launch for the experts, i.e. the CUTLASS provider.
      const Setting& grouped = find_setting("grouped");
      const std::string* g = given_text(given, grouped);
      if (g && text_of(setting_from_text(grouped, *g)) == kProviderCutlass)
        return provider_option_string(grouped_cutlass_providers(names_of(named)));
      return named;
    };
  }
  {
    // --accuracy, --accuracy-only. The request's only: a result holds the accuracy block when the
    // pass ran, and no modes when it ran alone.
    Setting& s = off_on_only("", "accuracy", "Accuracy",
                             {"--accuracy", "Also measure each recipe's error vs an FP32 GEMM of the BF16 inputs", ""},
                             {"--accuracy-only", "Only the accuracy pass (no timing)", ""});
    s.get = [](const SettingsRef& r) -> SettingValue {
      if (!r.accuracy || !r.accuracy_only) return std::monostate{};
      return std::string(*r.accuracy_only ? "only" : *r.accuracy ? "on" : "off");
    };
    s.set = [](const SettingsRef& r, const SettingValue& x) {
      if (!r.accuracy || !r.accuracy_only) return;
      *r.accuracy = text_of(x) != "off";
      *r.accuracy_only = text_of(x) == "only";
    };
    s.resolve = [](const Setting&, const GivenSettings& given, const RunRequest&) -> SettingValue {
      if (!given_flag(given, "--accuracy-only")) return std::string(given_flag(given, "--accuracy") ? "on" : "off");
      const Setting& repeats = find_setting("timing.repeats");
      if (const std::string* n = given_text(given, repeats); n && int_of(setting_from_text(repeats, *n)) > 1)
        throw UsageError("--repeats repeats timed cells: --accuracy-only times nothing");
      return std::string("only");
    };
  }
  {
    Setting& s = add("accuracy", "dist");
    s.type = SettingType::Text;
    s.flags = "--dist";
    s.group = "Accuracy";
    s.type_name = "TEXT";
    s.help = "Operand distribution for --accuracy: normal | outliers";
    s.placed_by_cli = true;
    s.compared = false;  // compare reads times, not the accuracy pass
    s.dflt = s.absent = std::string(to_string(Dist::Normal));
    s.parse = [](const std::string& text, const std::string&) -> SettingValue {
      return std::string(to_string(dist_from_string(ascii_lower(text))));
    };
    s.get = [](const SettingsRef& r) -> SettingValue { return std::string(to_string(*r.dist)); };
    s.set = [](const SettingsRef& r, const SettingValue& x) { *r.dist = dist_from_string(text_of(x)); };
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest&) -> SettingValue {
      const std::string* text = given_text(given, self);
      const SettingValue dist = text ? setting_from_text(self, *text) : self.dflt;
      if (dist != self.dflt && !given_flag(given, "--accuracy") && !given_flag(given, "--accuracy-only"))
        throw UsageError("--dist applies to --accuracy / --accuracy-only");
      return dist;
    };
  }

  // ---- the collectives of the layout (--comm, --comm-only; cli/cmd_comm.cpp). The request's
  // only: what ran is said by the collectives' own section and file. ----
  {
    Setting& s = off_on_only("comm", "collectives", "Node",
                             {"--comm",
                              "Also the layout's collectives (TP/SP, EP, DP) at the plan's sizes; measured with NCCL on "
                              "this node's GPUs",
                              ""},
                             {"--comm-only", "Only the collectives: no GEMM is timed", ""});
    s.get = [](const SettingsRef& r) -> SettingValue {
      if (!r.comm) return std::monostate{};
      return std::string(r.comm->only ? "only" : r.comm->comm ? "on" : "off");
    };
    s.set = [](const SettingsRef& r, const SettingValue& x) {
      if (!r.comm) return;
      r.comm->comm = text_of(x) == "on";
      r.comm->only = text_of(x) == "only";
    };
    s.resolve = [](const Setting&, const GivenSettings& given, const RunRequest&) -> SettingValue {
      return std::string(given_flag(given, "--comm-only") ? "only" : given_flag(given, "--comm") ? "on" : "off");
    };
  }
  // A setting of the request only (a result records none of it, compare has nothing to note).
  const auto request_only = [&](const char* section, const char* key, const char* group, SettingType type,
                                const char* flags, const char* type_name, const char* help) -> Setting& {
    Setting& s = add(section, key);
    s.type = type;
    s.flags = flags;
    s.group = group;
    s.type_name = type_name;
    s.help = help;
    s.recorded = false;
    s.compared = false;
    s.absent = std::monostate{};
    return s;
  };
  // A layout flag of the collectives: given without --comm / --comm-only, it would change nothing.
  const auto comm_layout = [&](const char* key, SettingType type, const char* flags, const char* type_name,
                               const char* help) -> Setting& {
    Setting& s = request_only("comm", key, "Node", type, flags, type_name, help);
    s.placed_by_cli = true;
    s.resolve = [](const Setting& self, const GivenSettings& given, const RunRequest&) -> SettingValue {
      const std::string* text = given_text(given, self);
      if (!text) return self.dflt;
      // The parallel step (--layout, ...) reduces gradients in --grad-reduce-type and gathers
      // parameters as --fp8-param-gather says too.
      const bool parallel_step = (self.key == "grad_reduce_type" || self.key == "fp8_param_gather") &&
                                 std::any_of(given.begin(), given.end(), [](const auto& g) { return g.first.rfind("parallel.", 0) == 0; });
      if (!given_flag(given, "--comm") && !given_flag(given, "--comm-only") && !parallel_step)
        throw UsageError(fmt::format("{} applies to the collectives: add --comm (or --comm-only)", self.first_flag()));
      return setting_from_text(self, *text);
    };
    return s;
  };
  // The getter and setter of a CommOptions field: `to` its value, `from` a value into it; not
  // recorded in a result (it has no CommOptions: reads as not recorded).
  const auto comm_field = [](auto to, auto from) {
    return std::make_pair(
        [to](const SettingsRef& r) -> SettingValue { return r.comm ? SettingValue(to(*r.comm)) : SettingValue(); },
        [from](const SettingsRef& r, const SettingValue& x) {
          if (r.comm) from(*r.comm, x);
        });
  };
  // The integer ones: range, default and field.
  struct CommInt {
    const char *key, *flags, *help;
    int64_t dflt, lo, hi;
    const char* note;
    int64_t CommOptions::*member;
  };
  static const CommInt kCommInts[] = {
      {"data_parallel", "--data-parallel,--dp", "Data-parallel replicas for --comm (default: the expert parallelism, or 1)",
       0, 0, kMaxRanks, " (0: the expert parallelism, or 1)", &CommOptions::data_parallel},
      {"zero_stage", "--zero-stage",
       "0: gradients all-reduced; 1, 2: reduce-scattered, weights all-gathered once per step (default 1); 3: FSDP", 1, 0,
       3, "", &CommOptions::zero_stage},
      {"iters", "--comm-iters", "Timed iterations per collective (default 20, after 5 warm-up)", 20, 1, 10000, "",
       &CommOptions::iters},
  };
  for (const CommInt& c : kCommInts) {
    Setting& s = comm_layout(c.key, SettingType::Int, c.flags, "INT", c.help);
    s.dflt = c.dflt;
    s.check = int_range(s.first_flag(), c.lo, c.hi, c.note);
    const auto member = c.member;
    std::tie(s.get, s.set) = comm_field([member](const CommOptions& o) { return o.*member; },
                                        [member](CommOptions& o, const SettingValue& x) { o.*member = int_of(x); });
  }
  // The on|off ones (the flag written bare means on): default and field.
  struct CommSwitch {
    const char *key, *flags, *help;
    bool dflt;
    bool CommOptions::*member;
  };
  static const CommSwitch kCommSwitches[] = {
      {"sequence_parallel", "--sequence-parallel",
       "on (default; also the flag written bare) | off: TP all-gathers/reduce-scatters, or all-reduces", true,
       &CommOptions::sequence_parallel},
      {"fp8_param_gather", "--fp8-param-gather",
       "off (default, as Megatron-Core and NeMo): the DP weight all-gathers send BF16 in every recipe | on (also the "
       "flag written bare; Megatron's --fp8-param-gather): FP8 under the FP8 recipes, for --comm and the parallel "
       "step (which also keeps those weights in FP8)",
       false, &CommOptions::fp8_param_gather},
  };
  for (const CommSwitch& c : kCommSwitches) {
    Setting& s = comm_layout(c.key, SettingType::Choice, c.flags, "[on|off]", c.help);
    s.choices = two("on", "off");
    s.dflt = std::string(c.dflt ? "on" : "off");
    s.bare = "on";
    const auto member = c.member;
    std::tie(s.get, s.set) = comm_field([member](const CommOptions& o) { return std::string(o.*member ? "on" : "off"); },
                                        [member](CommOptions& o, const SettingValue& x) { o.*member = text_of(x) == "on"; });
  }
  {
    Setting& s = comm_layout("grad_reduce_type", SettingType::Choice, "--grad-reduce-type", "TEXT",
                             "fp32 (default) | bf16: the gradients' type in DP reductions");
    s.choices = two("fp32", "bf16");
    s.dflt = std::string("fp32");
    std::tie(s.get, s.set) = comm_field([](const CommOptions& c) { return c.grad_reduce_type; },
                                        [](CommOptions& c, const SettingValue& x) { c.grad_reduce_type = text_of(x); });
  }
  // ---- the parallel step (core/parallel/, docs/parallel.md): the request's only ----
  // Integers 0 and texts "" are "not given": core/parallel/parallel_request.cpp merges them with the
  // --layout string (a size given both ways must agree) and the model's --tensor-parallel,
  // --expert-parallel and --micro_batch_size.
  const auto parallel = [&](const char* key, const char* flags, SettingType type, const char* type_name,
                            const char* help) -> Setting& {
    return request_only("parallel", key, "Parallel step", type, flags, type_name, help);
  };
  // The request's field a parallel setting lives in (a result has none: not recorded).
  const auto in_request = [](Setting& s, auto field, auto value_of) {
    s.get = [field](const SettingsRef& r) -> SettingValue {
      if (!r.parallel) return std::monostate{};
      return r.parallel->*field;
    };
    s.set = [field, value_of](const SettingsRef& r, const SettingValue& x) {
      if (r.parallel) r.parallel->*field = value_of(x);
    };
  };
  const auto parallel_int = [&](const char* key, const char* flags, const char* help,
                                int64_t ParallelRequest::*field) -> Setting& {
    Setting& s = parallel(key, flags, SettingType::Int, "INT", help);
    s.dflt = int64_t{0};
    s.check = int_range(s.first_flag(), 1, int64_t{1} << 20);
    in_request(s, field, int_of);
    return s;
  };
  const auto parallel_text = [&](const char* key, const char* flags, const char* type_name, const char* help,
                                 std::string ParallelRequest::*field,
                                 std::function<std::string(const std::string&, const std::string&)> canonical) -> Setting& {
    Setting& s = parallel(key, flags, SettingType::Text, type_name, help);
    s.dflt = std::string();
    s.parse = [canonical](const std::string& text, const std::string& flag) -> SettingValue {
      if (trim(text).empty()) throw UsageError(flag + " is empty");
      return canonical(text, flag);
    };
    in_request(s, field, text_of);
    return s;
  };
  // A name among an enum's spellings, as its canonical name.
  const auto named = [](auto names_fn) {
    return [names_fn](const std::string& text, const std::string& flag) {
      const auto& names = names_fn();
      const auto found = names.find(text);
      if (!found)
        throw UsageError(fmt::format("{} must be {}, got '{}'{}", flag, names_list(names.canonical()), clip_text(text, 80),
                                     did_you_mean(text, names.canonical())));
      return std::string(names.name(*found));
    };
  };
  const auto on_off = [](const std::string& text, const std::string& flag) {
    const std::string l = ascii_lower(trim(text));
    if (l != "on" && l != "off") throw UsageError(fmt::format("{} must be on or off, got '{}'", flag, clip_text(text, 40)));
    return l;
  };
  const auto as_given = [](const std::string& text, const std::string&) { return std::string(trim(text)); };
  parallel_text("layout", "--layout", "LAYOUT",
                "The training layout, e.g. tp8.pp4.vpp5.cp2.ep8.etp1.dp16.mb1.gb512 (any of tpN ppN vppN cpN epN etpN "
                "dpN mbN gbN and ddp|zero1|zero2|zero3|fsdp|fsdp-grad-op): predicts the step per rank on a cluster "
                "(docs/parallel.md)",
                &ParallelRequest::layout, [](const std::string& text, const std::string& flag) {
                  ParallelLayout l;
                  parse_layout(text, l, flag);  // the grammar; the values are merged later
                  return ascii_lower(std::string(trim(text)));
                });
  parallel_int("pipeline_parallel", "--pipeline-parallel,--pp", "Pipeline stages (as ppN in --layout)",
               &ParallelRequest::pp);
  parallel_int("virtual_stages", "--virtual-stages,--vpp", "Virtual pipeline stages per rank: the interleaved schedule (vppN)",
               &ParallelRequest::vpp);
  parallel_int("context_parallel", "--context-parallel,--cp", "Context-parallel ranks splitting the sequence (cpN)",
               &ParallelRequest::cp);
  parallel_int("expert_tensor_parallel", "--expert-tensor-parallel,--etp",
               "Tensor parallelism of the routed experts (etpN; default: --tensor-parallel)", &ParallelRequest::etp);
  parallel_int("global_batch", "--global-batch,--gbs", "Sequences per optimizer step (gbN; default: one micro-batch per "
               "data-parallel rank)", &ParallelRequest::global_batch);
  parallel_int("gpus", "--gpus", "GPUs of the job: data parallelism is what the other sizes leave", &ParallelRequest::gpus);
  {
    Setting& s = parallel("compute_efficiency", "--step-efficiency", SettingType::Number, "F",
                          "The fraction of the rank's costed compute rate a multi-GPU step sustains (kernel gaps, "
                          "synchronization, a loaded node's clocks): default the value calibrated on published runs "
                          "(docs/parallel.md)");
    s.dflt = 0.0;
    s.check = [](const SettingValue& x) {
      if (!(number_of(x) > 0 && number_of(x) <= 1)) throw UsageError("--step-efficiency must be in (0, 1]");
    };
    in_request(s, &ParallelRequest::compute_efficiency, number_of);
  }
  parallel_text("dp_sharding", "--dp-sharding", "KIND",
                "How data parallelism shards the model state: ddp | zero1 (Megatron's distributed optimizer, default) | "
                "zero2 | zero3 | fsdp (PyTorch FULL_SHARD) | fsdp-grad-op (SHARD_GRAD_OP)",
                &ParallelRequest::sharding, named(dp_sharding_names));
  parallel_text("cp_comm", "--cp-comm", "KIND", "Context parallelism's exchange: ring (Transformer Engine's P2P ring, default) | a2a",
                &ParallelRequest::cp_comm, named(cp_comm_names));
  parallel_text("tp_comm_overlap", "--tp-comm-overlap", "on|off",
                "Transformer Engine's userbuffers: TP collectives overlapped with their GEMMs (default off)",
                &ParallelRequest::tp_comm_overlap, on_off);
  parallel_text("grad_overlap", "--overlap-grad-reduce", "on|off",
                "Gradient reduction during backward and parameter gathers during the next forward (default on, as NeMo)",
                &ParallelRequest::grad_overlap, on_off);
  parallel_text("ep_comm_overlap", "--ep-comm-overlap", "on|off",
                "EP all-to-alls hidden behind another micro-batch's compute (DualPipe-style; default off)",
                &ParallelRequest::ep_comm_overlap, on_off);
  parallel_text("cluster", "--cluster", "NAME|FILE",
                "The cluster: dgx-h100 (default), dgx-h200, dgx-a100, h800-cluster, hgx-b200, gb200-nvl72, or a JSON "
                "file in data/clusters.json's schema",
                &ParallelRequest::cluster, as_given);
  parallel_text("gpu", "--gpu", "NAME",
                "The job's GPU (a GPU spec database key; default: the cluster's): its datasheet predicts the compute "
                "when no measurement of this GPU is at hand",
                &ParallelRequest::gpu, as_given);
  parallel_text("trace", "--parallel-trace", "FILE", "Write the per-rank timeline as a Chrome trace (chrome://tracing, Perfetto)",
                &ParallelRequest::trace, as_given);
  parallel_text("json", "--parallel-json", "FILE", "Write the parallel step (or the layout search) as JSON",
                &ParallelRequest::json, as_given);
  return v;
}

// Names of a choice setting (every spelling) and its canonical names.
std::vector<std::string> canonical_names(const Setting& s) {
  std::vector<std::string> out;
  for (const auto& c : s.choices) out.push_back(c.front());
  return out;
}

// The canonical name of `text` among a choice's spellings, any case; nullopt when none.
std::optional<std::string> choice_of(const Setting& s, std::string_view text) {
  for (const auto& c : s.choices)
    for (const std::string& n : c)
      if (iequals(n, text)) return c.front();
  return std::nullopt;
}

}  // namespace

std::string Setting::show(const SettingValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
  if (const double* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  if (const std::string* s = std::get_if<std::string>(&v)) return clip_text(*s, 200);
  return "(not recorded)";
}

std::vector<Mode> modes_from_flag(const std::string& text, bool model_plan) {
  const std::string mode = ascii_lower(text);
  const Mode quantizing = model_plan ? Mode::Training : Mode::PerGemm;
  std::vector<Mode> modes;
  if (mode.empty()) return modes;
  if (mode == "both") modes = {quantizing, Mode::PreQuantized};
  else if (mode == "all" && model_plan) modes = {Mode::PerGemm, Mode::Training, Mode::PreQuantized};
  else if (mode == "all") modes = {Mode::PerGemm, Mode::PreQuantized};  // shapes: nothing to share
  else {
    try {
      modes = {mode_from_string(mode)};
    } catch (const UsageError&) {
      throw UsageError(fmt::format("--mode must be training, per-gemm, pre-quantized, both or all (old names: "
                                   "autocast-shared = training, autocast = per-gemm), got '{}'{}",
                                   clip_text(text, 80),
                                   did_you_mean(text, {"training", "per-gemm", "pre-quantized", "both", "all"})));
    }
  }
  if (!model_plan && modes.front() == Mode::Training)
    throw UsageError(fmt::format("--mode {} needs a model plan: it shares quantized tensors between the Fprop, "
                                 "Dgrad and Wgrad of a layer, and --shapes/--sweep GEMMs stand alone (they are "
                                 "timed per-gemm)",
                                 text));
  return modes;
}

std::string mode_flag() { return find_setting("modes").first_flag(); }

std::vector<std::string> registry_problems(const std::vector<Setting>& settings) {
  std::vector<std::string> out;
  std::set<std::string> paths, labels, flags;
  for (const Setting& s : settings) {
    const std::string name = s.path();
    if (s.key.empty()) out.push_back(fmt::format("setting '{}' has no JSON key", name));
    if (s.required && s.type != SettingType::List) out.push_back(fmt::format("{} is required but not a list", name));
    if (!s.recorded && (s.compared || s.required)) out.push_back(fmt::format("{} is not recorded but compared or required", name));
    if (s.label.empty()) out.push_back(fmt::format("{} has no label", name));
    if (!paths.insert(name).second) out.push_back(fmt::format("{} is declared twice", name));
    if (!s.label.empty() && !labels.insert(s.label).second) out.push_back(fmt::format("label '{}' is used twice", s.label));
    if (!s.get || !s.set) out.push_back(fmt::format("{} has no getter or setter", name));
    if (s.type == SettingType::Choice && s.choices.empty()) out.push_back(fmt::format("{} is a choice without names", name));
    for (const auto& c : s.choices)
      if (c.empty()) out.push_back(fmt::format("{} has a choice without a name", name));
    if (s.type == SettingType::Text && !s.parse) out.push_back(fmt::format("{} is text without a parser", name));
    if (s.json_bool && s.choices.size() != 2) out.push_back(fmt::format("{} is a JSON bool without two choices", name));
    if (s.type == SettingType::List && !s.item) out.push_back(fmt::format("{} is a list without an item parser", name));
    if (!s.shortcuts.empty() && !s.resolve) out.push_back(fmt::format("{} has shortcuts but no resolve", name));
    std::vector<std::pair<std::string, std::string>> all_flags;  // names, help
    if (!s.flags.empty()) all_flags.emplace_back(s.flags, s.help);
    for (const SettingFlag& f : s.shortcuts) all_flags.emplace_back(f.flags, f.help);
    for (const auto& [names, help] : all_flags) {
      if (help.empty()) out.push_back(fmt::format("{} has a flag but no help", name));
      for (const std::string& f : split_list(names))
        if (!flags.insert(f).second) out.push_back(fmt::format("flag {} is declared twice", f));
    }
  }
  return out;
}

const std::vector<Setting>& run_settings() {
  static const std::vector<Setting> settings = [] {
    std::vector<Setting> v = declare();
    if (const std::vector<std::string> bad = registry_problems(v); !bad.empty())
      throw std::logic_error("run-settings registry: " + bad.front());
    return v;
  }();
  return settings;
}

const Setting& find_setting(std::string_view path) {
  for (const Setting& s : run_settings())
    if (s.path() == path) return s;
  throw std::logic_error(fmt::format("no run setting '{}'", path));
}

SettingsRef settings_ref(RunResult& r) {
  SettingsRef ref{&r.timing, &r.recipe_options, &r.gemm_options, &r.seed};
  ref.precisions = &r.precisions;
  ref.modes = &r.modes;
  ref.providers = &r.providers;
  ref.dist = &r.accuracy_dist;
  ref.step = &r.step_options;
  return ref;
}

SettingsRef request_ref(RunRequest& req, std::optional<uint64_t>& seed) {
  SettingsRef ref{&req.options.timing, &req.options.recipe, &req.options.gemm, &seed};
  ref.precisions = &req.precisions;
  ref.modes = &req.modes;
  ref.providers = &req.providers;
  ref.dist = &req.dist;
  ref.step = &req.step;
  ref.grouped_streams = &req.options.grouped_streams;
  ref.accuracy = &req.accuracy;
  ref.accuracy_only = &req.accuracy_only;
  ref.comm = &req.comm;
  ref.parallel = &req.parallel;
  return ref;
}

SettingValue setting_from_text(const Setting& s, const std::string& text) {
  const std::string flag = s.first_flag();
  SettingValue v;
  switch (s.type) {
    case SettingType::Flag: v = s.flag_sets; break;
    case SettingType::Int: v = parse_decimal_int(text, flag); break;
    case SettingType::Uint: v = static_cast<int64_t>(parse_decimal_uint(text, flag)); break;
    case SettingType::Number: v = parse_decimal_number(text, flag); break;
    case SettingType::Choice: {
      const std::optional<std::string> c = choice_of(s, text);
      if (!c) {
        const std::vector<std::string> names = canonical_names(s);
        throw UsageError(fmt::format("{} must be {}, got '{}'{}", flag, names_list(names), clip_text(text, 80),
                                     did_you_mean(text, names)));
      }
      v = *c;
      if (s.parse) v = s.parse(text_of(v), flag);
      break;
    }
    case SettingType::Text: v = s.parse(text, flag); break;
    case SettingType::List: {
      if (s.parse) {
        v = s.parse(text, flag);
        break;
      }
      std::vector<std::string> names;
      for (const std::string& item : split_list(text)) {
        std::string n = s.item(item, flag);
        if (std::find(names.begin(), names.end(), n) != names.end())
          throw UsageError(fmt::format("{} lists {} twice", flag, n));
        names.push_back(std::move(n));
      }
      v = joined(names);
      break;
    }
  }
  if (s.check) s.check(v);
  return v;
}

void apply_settings(const GivenSettings& given, RunRequest& req) {
  std::optional<uint64_t> seed = req.options.seed;
  const SettingsRef ref = request_ref(req, seed);
  for (const Setting& s : run_settings()) {
    if (s.resolve) {
      s.set(ref, s.resolve(s, given, req));
      continue;
    }
    const std::string* text = given_text(given, s);
    s.set(ref, text ? setting_from_text(s, *text) : s.default_for(req.plan.model_mode));
  }
  req.options.seed = seed.value_or(1234);
}

// ---- JSON ------------------------------------------------------------------------------------

namespace {

json value_json(const Setting& s, const SettingValue& v) {
  if (s.json_bool) return text_of(v) == s.choices.front().front();
  if (s.type == SettingType::List) return names_of(v);
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  if (const int64_t* i = std::get_if<int64_t>(&v)) {
    if (s.type == SettingType::Uint) return static_cast<uint64_t>(*i);
    return *i;
  }
  if (const double* d = std::get_if<double>(&v)) return *d;
  return text_of(v);
}

SettingValue value_from_json(const Setting& s, const json& v, const std::string& what) {
  switch (s.type) {
    case SettingType::Flag:
      if (!v.is_boolean()) throw UsageError(fmt::format("{} must be true or false", what));
      return v.get<bool>();
    case SettingType::Int: {
      const int64_t lo = s.json_range ? static_cast<int64_t>(s.json_range->first) : std::numeric_limits<int>::min();
      const int64_t hi = s.json_range ? static_cast<int64_t>(s.json_range->second) : std::numeric_limits<int>::max();
      const bool ok = (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(hi)) ||
                      (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
      if (!ok || (v.is_number_unsigned() && static_cast<int64_t>(v.get<uint64_t>()) < lo)) {
        if (s.json_range) throw UsageError(fmt::format("{} must be an integer from {} to {}", what, lo, hi));
        throw UsageError(fmt::format("{} must be an integer from {} to {}, got {}", what, lo, hi, json_value_hint(v)));
      }
      return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
    }
    case SettingType::Uint:
      if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
      if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
      throw UsageError(fmt::format("{} must be an integer from 0 to {}, got {}", what,
                                   std::numeric_limits<uint64_t>::max(), json_value_hint(v)));
    case SettingType::Number: {
      if (!v.is_number()) throw UsageError(fmt::format("{} must be a number", what));
      const double x = v.get<double>();
      if (!std::isfinite(x)) throw UsageError(fmt::format("{} must be a finite number", what));
      if (s.json_range && !(x >= s.json_range->first && x <= s.json_range->second))
        throw UsageError(fmt::format("{} must be from {:g} to {:g}{}, got {}", what, s.json_range->first,
                                     s.json_range->second, s.unit, json(x).dump()));
      return x;
    }
    case SettingType::Choice: {
      if (s.json_bool) {
        if (!v.is_boolean()) throw UsageError(fmt::format("{} must be true or false", what));
        return s.choices[v.get<bool>() ? 0 : 1].front();
      }
      const std::optional<std::string> c = v.is_string() ? choice_of(s, v.get<std::string>()) : std::nullopt;
      if (!c) throw UsageError(fmt::format("{} must be {}", what, names_list(canonical_names(s), true)));
      return *c;
    }
    case SettingType::Text: {
      if (!v.is_string()) throw UsageError(fmt::format("{} must be a string", what));
      try {
        return s.parse(v.get<std::string>(), what);
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", what, e.what()));
      }
    }
    case SettingType::List: {
      const auto bad = [&] { return UsageError(fmt::format("{} must be a list of strings", what)); };
      if (!v.is_array()) throw bad();
      for (const json& x : v)
        if (!x.is_string()) throw bad();
      if (s.non_empty && v.empty()) throw UsageError(fmt::format("{} must not be empty", what));
      std::vector<std::string> names;
      for (const json& x : v) {
        std::string n = s.item(x.get<std::string>(), what);
        if (std::find(names.begin(), names.end(), n) != names.end())
          throw UsageError(fmt::format("{} lists {} twice", what, n));
        names.push_back(std::move(n));
      }
      return joined(names);
    }
  }
  return std::monostate{};
}

void write_section(const SettingsRef& ref, const std::string& section, json& obj) {
  for (const Setting& s : run_settings()) {
    if (s.section != section || !s.recorded) continue;
    const SettingValue v = s.get(ref);
    if (std::holds_alternative<std::monostate>(v) || (s.written && !s.written(v))) continue;
    obj[s.key] = value_json(s, v);
  }
}

void read_section(const SettingsRef& ref, const json* obj, const std::string& section, const std::string& where) {
  for (const Setting& s : run_settings()) {
    if (s.section != section || !s.recorded) continue;
    const json* v = nullptr;
    if (obj && obj->is_object())
      if (const auto it = obj->find(s.key); it != obj->end()) v = &*it;
    // At the top level a key is named in quotes ("a.json: \"modes\""), in an object after a dot.
    const std::string what = section.empty() ? fmt::format("{}: \"{}\"", where, s.key) : fmt::format("{}.{}", where, s.key);
    if (v && v->is_null() && s.type == SettingType::List && !s.required) v = nullptr;
    if (!v && s.required) throw UsageError(fmt::format("{} must be a list of strings", what));
    s.set(ref, v ? value_from_json(s, *v, what) : s.absent);
  }
}

}  // namespace

void settings_to_json(const RunResult& r, const std::string& section, json& obj) {
  RunResult& m = const_cast<RunResult&>(r);  // read only: get() does not write
  write_section(settings_ref(m), section, obj);
}

void settings_from_json(const json* obj, const std::string& section, const std::string& where, RunResult& r) {
  if (obj && !obj->is_object()) throw UsageError(where + " must be an object");
  read_section(settings_ref(r), obj, section, where);
}

void gemm_settings_to_json(const GemmOptions& o, json& obj) {
  GemmOptions copy = o;
  write_section({nullptr, nullptr, &copy, nullptr}, "gemm_options", obj);
}

void gemm_settings_from_json(const json& obj, const std::string& where, GemmOptions& o) {
  if (!obj.is_object()) throw UsageError(where + " must be an object");
  read_section({nullptr, nullptr, &o, nullptr}, &obj, "gemm_options", where);
}

std::vector<std::string> settings_differences(const RunResult& a, const RunResult& b,
                                              const std::vector<std::string>& sections) {
  std::vector<std::string> out;
  RunResult& x = const_cast<RunResult&>(a);  // read only
  RunResult& y = const_cast<RunResult&>(b);
  const SettingsRef ra = settings_ref(x), rb = settings_ref(y);
  for (const Setting& s : run_settings()) {
    if (!s.compared) continue;
    if (!sections.empty() && std::find(sections.begin(), sections.end(), s.section) == sections.end()) continue;
    const SettingValue u = s.get(ra), w = s.get(rb);
    if (std::holds_alternative<std::monostate>(u) || std::holds_alternative<std::monostate>(w) || u == w) continue;
    if (s.type == SettingType::Uint)  // bit patterns back to unsigned
      out.push_back(fmt::format("{}: {} vs {}", s.label, static_cast<uint64_t>(int_of(u)), static_cast<uint64_t>(int_of(w))));
    else
      out.push_back(fmt::format("{}: {} vs {}", s.label, Setting::show(u), Setting::show(w)));
  }
  return out;
}

// The registry (core/run/settings.hpp) declares gemm_options' keys, defaults and checks.
nlohmann::json gemm_options_to_json(const GemmOptions& o) {
  nlohmann::json j = json::object();
  gemm_settings_to_json(o, j);
  return j;
}

GemmOptions gemm_options_from_json(const nlohmann::json& j, const std::string& where) {
  GemmOptions o;
  gemm_settings_from_json(j, where, o);
  return o;
}

}  // namespace gs

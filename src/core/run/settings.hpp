// The run-settings registry: every setting of a run declared once, with its flag names, type,
// names (matched in any case), defaults, checks, JSON key and the label reports and `compare`
// use. The CLI binds its options from it (src/cli/cli.cpp), apply_settings() puts the values into
// a RunRequest (with the rules between settings: --bf16-only vs --precisions, --pre-quantize vs
// --mode, ...), the result JSON writes and reads the settings through it (report_json.cpp,
// kernels.cpp's gemm_options) and compare's "runs differ" notes loop over it (compare.cpp).
// Pure C++: no CLI11, no CUDA.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/step/parallel_layout.hpp"
#include "core/results/kernels.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/run/comm_options.hpp"
#include "core/results/results.hpp"
#include "core/plan/step_model.hpp"
#include "core/util/text_util.hpp"

namespace gs {

struct RunRequest;


// ---- the registry ----------------------------------------------------------------------------

// A setting's value: a flag or JSON boolean, an integer, a number, or text (a choice's canonical
// name, or a text setting's canonical form). monostate: not recorded (a file before the key).
using SettingValue = std::variant<std::monostate, bool, int64_t, double, std::string>;

enum class SettingType {
  Flag,    // a CLI flag without a value that sets the bool `flag_sets`; JSON true/false
  Int,     // a decimal integer (no bases, no signs beyond '-')
  Uint,    // 0..2^64-1
  Number,  // a finite decimal number
  Choice,  // one of `choices`, any case; JSON: its canonical name, or a bool (json_bool)
  Text,    // free text through `parse` (e.g. --algo autotune:8)
  List,    // names, each once, through `item`: the value is their canonical names joined by ','; JSON: a
           // list of strings (modes, precisions, providers)
};

// Where a run's settings live: a RunResult's fields or a RunRequest's. A field a RunResult does
// not have (grouped streams, the accuracy flags: the result's notes and accuracy block say what
// ran) is null there, and its setting reads as not recorded.
struct SettingsRef {
  TimingConfig* timing = nullptr;
  RecipeOptions* recipe = nullptr;
  GemmOptions* gemm = nullptr;
  std::optional<uint64_t>* seed = nullptr;
  std::vector<Precision>* precisions = nullptr;
  std::vector<Mode>* modes = nullptr;
  std::vector<std::string>* providers = nullptr;
  Dist* dist = nullptr;
  StepOptions* step = nullptr;
  int* grouped_streams = nullptr;                         // a request's only
  bool* accuracy = nullptr;                               // a request's only
  bool* accuracy_only = nullptr;                          // a request's only
  CommOptions* comm = nullptr;                            // a request's only
  ParallelRequest* parallel = nullptr;                    // a request's only (the parallel step)
};
SettingsRef settings_ref(RunResult& r);

// The command line's settings: a setting's path -> the text given to its flag (flags: ""), and
// a shortcut's first flag name ("--pre-quantize") -> "".
using GivenSettings = std::map<std::string, std::string>;

// Another flag of a setting, one that states its value in other words (--pre-quantize for --mode
// pre-quantized, --no-bf16 and --bf16-only for --precisions): its names, help, and value type
// ("" for a flag without a value). The setting's `resolve` reads it from GivenSettings.
struct SettingFlag {
  std::string flags, help, type_name;
};

struct Setting {
  // Identity and JSON: the object `section` of the result holds it as `key` ("": the result's top
  // level); `key` is unique within the section and section.key (or the key alone at the top
  // level) names the setting everywhere (find_setting).
  std::string section, key;
  // How reports and compare's "runs differ" notes name it.
  std::string label;
  SettingType type = SettingType::Text;
  // CLI11 names ("--fp8-format" or "--num-warmup"; aliases after commas). Empty: not a flag (the
  // engine sets it, e.g. fp8_block_via_mxfp8).
  std::string flags, group, help, type_name;
  // More flags of the same setting, in help order (help group: `group`).
  std::vector<SettingFlag> shortcuts;
  // The CLI binds its flags one by one among options of its own (add_setting_flag), not with the
  // rest of its help group.
  bool placed_by_cli = false;
  // compare's "runs differ" notes name it when the files differ (false: compare matches the files
  // by it, as modes and precisions, or does not read what it changes, as the accuracy pass's).
  bool compared = true;
  // The request's only: a result file has no key for it (what ran is said otherwise: the
  // grouped-GEMM note, the accuracy block), and over a RunResult it reads as not recorded.
  bool recorded = true;
  // JSON: a result file must hold it (else a key absent, or a List's null, means `absent`); a
  // List must name one item at least.
  bool required = false, non_empty = false;
  // List: the canonical name of one item; throws UsageError naming `where` ("a.json: \"modes\"").
  std::function<std::string(const std::string& text, const std::string& where)> item;
  // Choice: the accepted names; choices[i][0] is how choice i is written, the rest are aliases.
  std::vector<std::vector<std::string>> choices;
  // Choice stored in JSON as a bool: true for choices[0] (fp8_block_pow2_scales: pow2 / fp32).
  bool json_bool = false;
  bool flag_sets = true;  // Flag: the value the flag gives (--nvfp4-no-2d gives false)
  // Choice: the value of its flag written bare (--sequence-parallel alone, as the flag it once was,
  // also before another flag: "on"); the flag then takes a value only when one follows.
  std::optional<std::string> bare;
  // The default of a new run, and where --shapes/--sweep plans differ from model plans.
  SettingValue dflt;
  std::optional<SettingValue> dflt_shapes;
  // What a result file without the key means (files written before the setting existed).
  SettingValue absent;
  // JSON: the range a number must be in (Number), and the unit of its message.
  std::optional<std::pair<double, double>> json_range;
  std::string unit;
  // Text (and Choice, after the name lookup): the canonical value of `text`; throws UsageError
  // naming `what` (the flag, or the JSON field).
  std::function<SettingValue(const std::string& text, const std::string& what)> parse;
  // Checks of a value given on the command line (ranges), with the flag's own message.
  std::function<void(const SettingValue&)> check;
  // Whether the JSON carries the key for this value (default: always, monostate never).
  std::function<bool(const SettingValue&)> written;
  std::function<SettingValue(const SettingsRef&)> get;
  std::function<void(const SettingsRef&, const SettingValue&)> set;
  // The request's value from the command line when more than one flag's text decides it (its
  // shortcuts, the plan kind, another setting's flags: the rules between settings, with their
  // own messages). Without it: the text given, or the plan kind's default.
  std::function<SettingValue(const Setting& self, const GivenSettings& given, const RunRequest& req)> resolve;

  std::string first_flag() const { return flags.substr(0, flags.find(',')); }
  std::string path() const { return section.empty() ? key : section + "." + key; }
  // The default for a model plan (true) or a --shapes/--sweep plan.
  const SettingValue& default_for(bool model_plan) const { return !model_plan && dflt_shapes ? *dflt_shapes : dflt; }
  // A value as the notes print it: true/false, numbers as {}, text as given.
  static std::string show(const SettingValue& v);
};

// Every setting, in the order compare's notes list them.
const std::vector<Setting>& run_settings();
// By "section.key" (e.g. "recipe_options.fp8_format") or a top-level key ("modes");
// std::logic_error when unknown.
const Setting& find_setting(std::string_view path);

// --mode where the registry's `modes` setting is read outside a run's request: predict's
// datasheet prediction (a list of modes), compare and plot (one mode each, mode_from_string).
// The flag's name ("--mode").
std::string mode_flag();
// The modes a --mode value names, under the run's rules and messages: both (the plan kind's
// quantizing mode and pre-quantized), all, or one mode's name, in any case or an old name;
// training needs a model plan (`model_plan`). Empty for "" (the caller's default).
std::vector<Mode> modes_from_flag(const std::string& text, bool model_plan);

// The registry's own rules (a key or label declared twice, a setting without a JSON key, label,
// getter or setter, a flag name used twice, a choice without names): one line per problem;
// empty when sound. Tested, and checked once when run_settings() is first built.
std::vector<std::string> registry_problems(const std::vector<Setting>& settings);

// A value given on the command line (`text`; "" for a flag): parsed and checked.
SettingValue setting_from_text(const Setting& s, const std::string& text);

// Every registry setting of `req` (req.plan is built): the text given on the command line, or
// the default of req.plan's kind. Throws UsageError with the flag's message for a bad value or
// a rule between settings that is broken.
void apply_settings(const GivenSettings& given, RunRequest& req);
// A request's settings, as apply_settings() fills them (tests read them back through it).
SettingsRef request_ref(RunRequest& req, std::optional<uint64_t>& seed);

// JSON of the settings of `section` ("timing", "recipe_options", "gemm_options", "accuracy", or
// "" for the top level) into `obj`.
void settings_to_json(const RunResult& r, const std::string& section, nlohmann::json& obj);
// Reads them back; a key that is absent takes the setting's `absent` value (a null `obj`: the
// section is absent). `where` names the document and the object ("a.json: timing").
void settings_from_json(const nlohmann::json* obj, const std::string& section, const std::string& where, RunResult& r);
// The same over a bare GemmOptions (kernels.cpp's gemm_options_to_json / _from_json).
void gemm_settings_to_json(const GemmOptions& o, nlohmann::json& obj);
void gemm_settings_from_json(const nlohmann::json& obj, const std::string& where, GemmOptions& o);
// A result file's "gemm_options" object (docs/json-schema.md), through the registry.
nlohmann::json gemm_options_to_json(const GemmOptions& o);
GemmOptions gemm_options_from_json(const nlohmann::json& j, const std::string& where);

// compare's "runs differ" notes: "label: A vs B" for every compared setting whose values differ
// (a setting either file does not record is skipped); only those of `sections` when given.
std::vector<std::string> settings_differences(const RunResult& a, const RunResult& b,
                                              const std::vector<std::string>& sections = {});

// L2's and the step context's names (the registry's choices) are declared with their enums
// (results.hpp l2_names, step_model.hpp step_context_names).

}  // namespace gs

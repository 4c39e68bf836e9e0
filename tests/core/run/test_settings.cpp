// The run-settings registry (core/run/settings.hpp): each setting declared once, and the CLI, the
// RunRequest, the result JSON and compare's "runs differ" notes all go through it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "cli/cli.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "core/run/settings.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using gs::Setting;
using gs::SettingType;
using gs::SettingValue;
using nlohmann::json;

namespace {

fs::path tmpdir() {
  static const fs::path d = gs::test::scratch_dir("settings_test");
  return d;
}

struct Cli {
  int rc = -1;
  std::string out, err;
};

// gemmscope's command line in this process (cli/cli.hpp), stdout and stderr captured.
Cli run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "gemmscope");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  Cli r;
  r.rc = gs::cli::gemmscope_main(static_cast<int>(args.size()), argv.data());
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

// A dry run's result, read back through from_json.
gs::RunResult dry_result(std::vector<std::string> args) {
  const fs::path j = tmpdir() / "dry.json";
  fs::remove(j);
  args.insert(args.begin(), {"--dry-run", "--json", j.string()});
  const Cli r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return gs::from_json(json::parse(gs::test::slurp(j)), "dry.json");
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// Settings that apply to model plans only: their round trip runs on a model.
bool needs_model(const Setting& s) {
  return s.path() == "timing.step_other_ms" || s.path() == "timing.step_context" || s.section == "step_options";
}

// A value other than the default that the command line accepts, as typed (upper case for names).
std::optional<std::string> other_cli_text(const Setting& s, bool model_plan) {
  const SettingValue dflt = s.default_for(model_plan);
  switch (s.type) {
    case SettingType::Flag: return std::string();
    case SettingType::Choice:
      for (const auto& c : s.choices)
        if (SettingValue(c.front()) != dflt) return upper(c.front());
      return std::nullopt;
    case SettingType::Int:
    case SettingType::Uint:
      for (int64_t d : {1, -1, 2}) {
        const std::string t = std::to_string(std::get<int64_t>(dflt) + d);
        try {
          gs::setting_from_text(s, t);
          return t;
        } catch (const gs::UsageError&) {
        }
      }
      return std::nullopt;
    case SettingType::Number: return std::to_string(std::get<double>(dflt) + 1.5);
    case SettingType::Text:
      if (s.path() == "gemm_options.algo") return std::string("AUTOTUNE:4");
      return std::nullopt;  // timing.method: the command line knows one method only
    case SettingType::List: return std::nullopt;
  }
  return std::nullopt;
}

// A value other than `v` for a result file (any the JSON reader takes).
SettingValue other_value(const Setting& s, const SettingValue& v) {
  switch (s.type) {
    case SettingType::Flag: return !std::get<bool>(v);
    case SettingType::Choice:
      for (const auto& c : s.choices)
        if (SettingValue(c.front()) != v) return c.front();
      break;
    case SettingType::Int:
    case SettingType::Uint: return std::get<int64_t>(v) + 1;
    case SettingType::Number: return std::get<double>(v) + 1.5;
    case SettingType::Text: return std::string(s.path() == "gemm_options.algo" ? "search:3" : "some-other-method");
    case SettingType::List: return std::get<std::string>(v) + ",cutlass";  // providers
  }
  return v;
}

}  // namespace

TEST(Settings, RegistryIsSound) {
  const std::vector<Setting>& all = gs::run_settings();
  EXPECT_TRUE(gs::registry_problems(all).empty());
  for (const Setting& s : all) {
    SCOPED_TRACE(s.path());
    EXPECT_FALSE(s.key.empty());
    EXPECT_EQ(s.path(), s.section.empty() ? s.key : s.section + "." + s.key);  // "": the result's top level
    EXPECT_FALSE(s.label.empty());
    EXPECT_EQ(&gs::find_setting(s.path()), &s);
  }
  // A shortcut's flag is a flag like any other: declared once.
  std::vector<Setting> same_shortcut = all;
  same_shortcut.front().shortcuts.push_back({"--pre-quantize", "again", ""});
  ASSERT_FALSE(gs::registry_problems(same_shortcut).empty());
  EXPECT_NE(gs::registry_problems(same_shortcut).front().find("flag --pre-quantize is declared twice"), std::string::npos);
  std::vector<Setting> no_item = all;
  for (Setting& s : no_item)
    if (s.type == SettingType::List) s.item = nullptr;
  EXPECT_FALSE(gs::registry_problems(no_item).empty());
  // The rules catch a setting declared twice, one without a JSON key, one without a label, a
  // flag used by two settings.
  std::vector<Setting> twice = all;
  twice.push_back(all.front());
  ASSERT_FALSE(gs::registry_problems(twice).empty());
  EXPECT_NE(gs::registry_problems(twice).front().find("declared twice"), std::string::npos);
  std::vector<Setting> no_key = all;
  no_key.back().key.clear();
  EXPECT_FALSE(gs::registry_problems(no_key).empty());
  std::vector<Setting> no_label = all;
  no_label.front().label.clear();
  EXPECT_FALSE(gs::registry_problems(no_label).empty());
  std::vector<Setting> same_flag = all;
  same_flag.front().flags = "--num-warmup";
  EXPECT_FALSE(gs::registry_problems(same_flag).empty());
  EXPECT_THROW(gs::find_setting("timing.nonexistent"), std::logic_error);
}

// Every choice of every setting, in any case, is its canonical name.
TEST(Settings, EnumNamesInAnyCase) {
  for (const Setting& s : gs::run_settings()) {
    if (s.type != SettingType::Choice) continue;
    for (const auto& c : s.choices)
      for (const std::string& name : c) {
        SCOPED_TRACE(s.path() + " " + name);
        std::string mixed = name;
        if (!mixed.empty() && mixed[0] >= 'a' && mixed[0] <= 'z') mixed[0] = static_cast<char>(mixed[0] - 'a' + 'A');
        for (const std::string& typed : {name, upper(name), mixed})
          EXPECT_EQ(gs::setting_from_text(s, typed), SettingValue(c.front()));
      }
    EXPECT_THROW(gs::setting_from_text(s, "no-such-name"), gs::UsageError);
  }
  EXPECT_EQ(gs::setting_from_text(gs::find_setting("gemm_options.algo"), "Search:5"), SettingValue(std::string("search:5")));
  EXPECT_EQ(gs::setting_from_text(gs::find_setting("timing.method"), "CUDA-Events"), SettingValue(std::string("cuda-events")));
}

// The names the issue listed, through the command line: accepted in any case and recorded.
TEST(Settings, CliNamesInAnyCase) {
  const gs::RunResult r = dry_result({"--shapes", "64", "--block-fp8-format", "HYBRID", "--l2", "WARM",
                                      "--fp8-block-scales", "FP32", "--algo", "HEURISTIC", "--fp8-format", "E4M3",
                                      "--grouped-quant", "Per-Expert", "--wgrad-output", "BF16", "--timing", "CUDA-EVENTS"});
  EXPECT_EQ(r.recipe_options.block_fp8_format, gs::Fp8Format::Hybrid);
  EXPECT_EQ(r.timing.l2, gs::L2State::Warm);
  EXPECT_FALSE(r.recipe_options.fp8_block_pow2_scales);
  EXPECT_EQ(r.gemm_options.algo, gs::AlgoChoice::Heuristic);
  EXPECT_EQ(r.recipe_options.fp8_format, gs::Fp8Format::E4M3);
  EXPECT_FALSE(r.recipe_options.grouped_quant_fused);
  EXPECT_FALSE(r.recipe_options.wgrad_fp32_accumulate);
  EXPECT_EQ(dry_result({"--model", "llama-3-8b", "--step-context", "EAGER"}).timing.step_context_kind,
            gs::StepContextKind::Eager);
  // Names outside the registry: routing kinds, --q-lora-rank none, predict's --mode all/both.
  for (const char* routing : {"BALANCED", "Hot:0.5", "LOGNORMAL:1", "Random"}) {
    const Cli c = run_cli({"--dry-run", "--model", "mixtral-8x7b", "--routing", routing});
    EXPECT_EQ(c.rc, 0) << routing << ": " << c.err;
  }
  const Cli q = run_cli({"--dry-run", "--model", "llama-3-8b", "--q-lora-rank", "NONE"});
  EXPECT_EQ(q.err.find("not a decimal integer"), std::string::npos) << q.err;
  for (const char* mode : {"ALL", "Both", "TRAINING"}) {
    const Cli p = run_cli({"predict", "--gpu", "h100", "--model", "llama-3-8b", "--mode", mode});
    EXPECT_EQ(p.rc, 0) << mode << ": " << p.err;
  }
  // A bad name is refused with the flag's message and the names.
  const Cli bad = run_cli({"--dry-run", "--shapes", "64", "--l2", "lukewarm"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--l2 must be warm or cold, got 'lukewarm'"), std::string::npos) << bad.err;
}

// Every registry setting with a flag: command line -> RunRequest -> JSON -> read back, and the
// defaults round-trip with no difference while a changed value is the one difference, under
// the setting's label.
TEST(Settings, EverySettingRoundTripsFromTheCommandLine) {
  const gs::RunResult shapes_default = dry_result({"--shapes", "64"});
  const gs::RunResult model_default = dry_result({"--model", "llama-3-8b"});
  EXPECT_TRUE(gs::settings_differences(shapes_default, dry_result({"--shapes", "64"})).empty());
  EXPECT_TRUE(gs::settings_differences(model_default, dry_result({"--model", "llama-3-8b"})).empty());
  int tried = 0;
  for (const Setting& s : gs::run_settings()) {
    // The run's own: RunSettingsFromTheCommandLine; the request's only (the parallel step):
    // ParallelSettingsReachTheRequest.
    if (s.flags.empty() || s.placed_by_cli || !s.recorded) continue;
    SCOPED_TRACE(s.path());
    const bool model = needs_model(s);
    const gs::RunResult& base = model ? model_default : shapes_default;
    gs::RunResult copy = base;
    // The defaults, as the request got them.
    EXPECT_EQ(s.get(gs::settings_ref(copy)), s.default_for(model));
    const std::optional<std::string> text = other_cli_text(s, model);
    if (!text) {
      EXPECT_EQ(s.path(), "timing.method");
      continue;
    }
    std::vector<std::string> args = model ? std::vector<std::string>{"--model", "llama-3-8b"}
                                          : std::vector<std::string>{"--shapes", "64"};
    args.push_back(s.first_flag());
    if (s.type != SettingType::Flag) args.push_back(*text);
    gs::RunResult changed = dry_result(args);
    const SettingValue want = gs::setting_from_text(s, *text);
    EXPECT_EQ(s.get(gs::settings_ref(changed)), want);
    const std::vector<std::string> diff = gs::settings_differences(base, changed);
    // Parameters without FP32 main gradients make Wgrad write BF16 too (the rule between the two).
    const size_t expected = s.path() == "step_options.param_storage" ? 2 : 1;
    ASSERT_EQ(diff.size(), expected) << (diff.empty() ? "" : diff.front());
    EXPECT_NE(std::find_if(diff.begin(), diff.end(), [&](const std::string& d) { return d.rfind(s.label + ": ", 0) == 0; }),
              diff.end())
        << diff.front();
    ++tried;
  }
  EXPECT_GE(tried, 20);
}

// Every registry setting, flag or not, through a result file and compare: written, read back,
// and reported by compare_results under its label when it differs.
TEST(Settings, EverySettingRoundTripsThroughJsonAndCompare) {
  const json doc = json::parse(gs::test::slurp(std::string(GS_TEST_DATA_DIR) + "/compare_a.json"));
  gs::RunResult a = gs::from_json(doc, "a.json");
  // A file that records every setting (compare_a.json predates the seed).
  gs::find_setting("timing.seed").set(gs::settings_ref(a), SettingValue(int64_t{1234}));
  a = gs::from_json(gs::to_json(a), "a.json");
  EXPECT_TRUE(gs::compare_results(a, a).differences.empty());
  int tried = 0;
  for (const Setting& s : gs::run_settings()) {
    // Not compared: the axes compare matches files by (modes, precisions; they key the cells) and
    // the accuracy pass's own, whose round trips RunSettingsThroughAMeasuredRun checks.
    if (!s.compared) continue;
    SCOPED_TRACE(s.path());
    gs::RunResult b = a;
    const SettingValue before = s.get(gs::settings_ref(b));
    ASSERT_FALSE(std::holds_alternative<std::monostate>(before));
    const SettingValue after = other_value(s, before);
    ASSERT_NE(after, before);
    s.set(gs::settings_ref(b), after);
    if (s.path() == "providers")  // the second provider's cells: the first one's
      for (size_t m = 0; m < b.modes.size(); ++m)
        for (size_t g = 0; g < b.plan.gemms.size(); ++g)
          for (size_t p = 0; p < b.precisions.size(); ++p) b.records.put(b.gemm_key(1, m, g, p), b.cell(m, g, p));
    const json written = gs::to_json(b);
    const json& object = s.section.empty() ? written : written[s.section];
    ASSERT_TRUE(s.section.empty() || written.contains(s.section));
    EXPECT_TRUE(object.contains(s.key));
    ++tried;
    gs::RunResult back = gs::from_json(written, "b.json");
    EXPECT_EQ(s.get(gs::settings_ref(back)), after);
    const std::vector<std::string> diff = gs::compare_results(a, back).differences;
    ASSERT_EQ(diff.size(), 1u) << (diff.empty() ? "" : diff.front());
    EXPECT_EQ(diff.front().rfind(s.label + ": ", 0), 0u) << diff.front();
  }
  EXPECT_GE(tried, 25);
}

// A file without a key means what files written before the setting existed measured.
TEST(Settings, AbsentKeysReadAsOlderFilesMeant) {
  json doc = json::parse(gs::test::slurp(std::string(GS_TEST_DATA_DIR) + "/compare_a.json"));
  doc["recipe_options"] = json::object();
  doc["timing"] = json::object();
  const gs::RunResult r = gs::from_json(doc, "old.json");
  for (const Setting& s : gs::run_settings()) {
    if (s.section != "timing" && s.section != "recipe_options") continue;
    SCOPED_TRACE(s.path());
    gs::RunResult copy = r;
    EXPECT_EQ(s.get(gs::settings_ref(copy)), s.absent);
  }
  EXPECT_FALSE(r.recipe_options.lm_head_bf16);
  EXPECT_FALSE(r.seed.has_value());
  // Files before kernel providers measured with cuBLASLt only; "modes" and "precisions" are required.
  json no_providers = doc;
  no_providers.erase("providers");
  EXPECT_EQ(gs::from_json(no_providers, "old.json").providers, std::vector<std::string>{"cublaslt"});
  no_providers["providers"] = nullptr;
  EXPECT_EQ(gs::from_json(no_providers, "old.json").providers, std::vector<std::string>{"cublaslt"});
  for (const char* key : {"modes", "precisions"}) {
    json without = doc;
    without.erase(key);
    try {
      gs::from_json(without, "old.json");
      ADD_FAILURE() << key;
    } catch (const gs::UsageError& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("old.json: \"{}\" must be a list of strings", key));
    }
  }
}

namespace {

class FixedEngine : public gs::test::FakeEngineBase {
 public:
  gs::Cell measure(const gs::Gemm&, gs::Precision, gs::Mode, const std::string&) override {
    gs::Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = 1.0;
    s.iters = 10;
    return gs::Cell::measured(s);
  }
  gs::AccuracyCell accuracy(const gs::Gemm&, gs::Precision, gs::Dist) override {
    gs::AccuracyCell c;
    c.ok = true;
    c.rel_error = 0.01;
    return c;
  }
};

// The request apply_settings() makes of `given` for a --shapes 64 plan or a model's.
gs::RunRequest request(const gs::GivenSettings& given, bool model) {
  gs::RunRequest req;
  req.plan = model ? gs::build_model_plan(gs::find_preset("mixtral-8x7b").config) : gs::build_shapes_plan("64");
  gs::apply_settings(given, req);
  return req;
}

gs::SettingValue request_value(const char* path, gs::RunRequest& req) {
  std::optional<uint64_t> seed = req.options.seed;
  return gs::find_setting(path).get(gs::request_ref(req, seed));
}

}  // namespace

// The run's own settings (the result's top level: precisions, modes, providers; --grouped):
// command line -> RunRequest -> JSON -> read back -> compare's notes, names in any case, and the
// default of each plan kind. compare notes only "providers": it matches files by their modes and
// precisions.
TEST(Settings, RunSettingsFromTheCommandLine) {
  struct Case {
    bool model;
    std::vector<std::string> args;
    const char* path;
    std::string want;
  };
  const std::string all = "BF16,FP8Current,FP8Delayed,FP8Block,MXFP8,NVFP4";
  const std::vector<Case> cases = {
      {false, {}, "precisions", all},
      {false, {}, "modes", "per-gemm"},
      {true, {}, "modes", "training"},
      {false, {}, "providers", "cublaslt"},
      {false, {"--precisions", "bf16,FP8current"}, "precisions", "BF16,FP8Current"},
      {false, {"--precisions", "NVFP4, bf16"}, "precisions", "NVFP4,BF16"},
      {false, {"--no-bf16", "--no-fp8", "--no-nvfp4"}, "precisions", "FP8Current,FP8Delayed,FP8Block"},
      {false, {"--no-mxfp8", "--no-fp4", "--no-fp8-current", "--no-fp8-delayed", "--no-fp8-block"}, "precisions", "BF16"},
      {false, {"--bf16-only"}, "precisions", "BF16"},
      {false, {"--mode", "Pre-Quantized"}, "modes", "pre-quantized"},
      {false, {"--mode", "AUTOCAST"}, "modes", "per-gemm"},
      {false, {"--mode", "ALL"}, "modes", "per-gemm,pre-quantized"},
      {false, {"--mode", "Both"}, "modes", "per-gemm,pre-quantized"},
      {false, {"--pre-quantize"}, "modes", "pre-quantized"},
      {false, {"--pre-quantize", "--mode", "PREQUANTIZED"}, "modes", "pre-quantized"},
      {true, {"--mode", "Training"}, "modes", "training"},
      {true, {"--mode", "autocast-SHARED"}, "modes", "training"},
      {true, {"--mode", "All"}, "modes", "per-gemm,training,pre-quantized"},
      {true, {"--mode", "BOTH"}, "modes", "training,pre-quantized"},
      {false, {"--provider", "CUTLASS,cuBLASLt"}, "providers", "cutlass,cublaslt"},
      {false, {"--provider", "All"}, "providers", "cublaslt,cutlass,deepgemm"},
      {false, {"--grouped", "Cutlass"}, "providers", "cutlass"},
      {false, {"--grouped", "CUTLASS", "--provider", "deepgemm,CUTLASS"}, "providers", "deepgemm,cutlass"},
  };
  const gs::RunResult shapes_default = dry_result({"--shapes", "64"});
  const gs::RunResult model_default = dry_result({"--model", "mixtral-8x7b"});
  for (const Case& c : cases) {
    std::vector<std::string> args = c.model ? std::vector<std::string>{"--model", "mixtral-8x7b"}
                                             : std::vector<std::string>{"--shapes", "64"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(::testing::PrintToString(args));
    const Setting& s = gs::find_setting(c.path);
    gs::RunResult r = dry_result(args);  // through the result JSON and back
    EXPECT_EQ(s.get(gs::settings_ref(r)), SettingValue(c.want));
    const std::vector<std::string> diff = gs::settings_differences(c.model ? model_default : shapes_default, r);
    if (s.path() == "providers" && c.want != "cublaslt") {
      ASSERT_EQ(diff.size(), 1u);
      EXPECT_EQ(diff.front(), "providers: cublaslt vs " + c.want);
    } else {
      EXPECT_TRUE(diff.empty()) << diff.front();
    }
  }
  // --grouped: the request's, said in the run's note (a result file has no key for it).
  for (const auto& [typed, want, streams] : std::vector<std::tuple<std::string, std::string, int>>{
           {"SERIAL", "serial", 0}, {"Streams:8", "streams:8", 8}, {"streams:4", "streams:4", 4}}) {
    SCOPED_TRACE(typed);
    gs::RunRequest req = request({{"grouped", typed}}, true);
    EXPECT_EQ(req.options.grouped_streams, streams);
    EXPECT_EQ(request_value("grouped", req), SettingValue(want));
    const gs::RunResult r = dry_result({"--model", "mixtral-8x7b", "--grouped", typed});
    bool noted = false;
    for (const std::string& n : r.notes) noted = noted || n.find("(--grouped " + want + ")") != std::string::npos;
    EXPECT_TRUE(noted);
    gs::RunResult copy = r;
    EXPECT_TRUE(std::holds_alternative<std::monostate>(gs::find_setting("grouped").get(gs::settings_ref(copy))));
    EXPECT_FALSE(gs::to_json(r).contains("grouped"));
  }
  gs::RunRequest cutlass = request({{"grouped", "cutlass"}}, true);
  EXPECT_EQ(cutlass.options.grouped_streams, 4);
  EXPECT_EQ(cutlass.providers, std::vector<std::string>{"cutlass"});
  EXPECT_EQ(request_value("grouped", cutlass), SettingValue(std::string("streams:4")));  // the streams it keeps
}

// The accuracy pass's settings: --accuracy, --accuracy-only and --dist reach the request, a
// measured run's result file records them (the accuracy block, its "dist"; no modes for
// --accuracy-only) and reads them back; compare leaves them out of its notes (it reads times).
TEST(Settings, RunSettingsThroughAMeasuredRun) {
  FixedEngine engine;
  gs::RunRequest plain = request({}, false);
  EXPECT_EQ(request_value("accuracy", plain), SettingValue(std::string("off")));
  EXPECT_EQ(request_value("accuracy.dist", plain), SettingValue(std::string("normal")));
  gs::RunRequest on = request({{"--accuracy", ""}, {"accuracy.dist", "Outliers"}}, false);
  EXPECT_TRUE(on.accuracy);
  EXPECT_FALSE(on.accuracy_only);
  EXPECT_EQ(on.dist, gs::Dist::Outliers);
  EXPECT_EQ(request_value("accuracy", on), SettingValue(std::string("on")));
  gs::RunRequest only = request({{"--accuracy-only", ""}, {"accuracy.dist", "OUTLIERS"}}, false);
  EXPECT_TRUE(only.accuracy_only);
  EXPECT_EQ(request_value("accuracy", only), SettingValue(std::string("only")));

  const auto round_trip = [&](const gs::RunRequest& req) {
    const json j = gs::to_json(gs::run(engine, req));
    return std::make_pair(j, gs::from_json(j, "r.json"));
  };
  const auto [j_plain, r_plain] = round_trip(request({{"--accuracy", ""}}, false));
  const auto [j_on, r_on] = round_trip(on);
  const auto [j_only, r_only] = round_trip(only);
  EXPECT_EQ(j_plain["accuracy"]["dist"], "normal");
  EXPECT_EQ(j_on["accuracy"]["dist"], "outliers");
  EXPECT_EQ(r_on.accuracy_dist, gs::Dist::Outliers);
  EXPECT_TRUE(r_on.has_accuracy);
  EXPECT_EQ(r_on.modes, std::vector<gs::Mode>{gs::Mode::PerGemm});
  EXPECT_TRUE(r_only.has_accuracy);
  EXPECT_TRUE(r_only.modes.empty());
  EXPECT_EQ(j_only["modes"], json::array());
  gs::RunResult copy = r_on;
  EXPECT_EQ(gs::find_setting("accuracy.dist").get(gs::settings_ref(copy)), SettingValue(std::string("outliers")));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(gs::find_setting("accuracy").get(gs::settings_ref(copy))));
  EXPECT_TRUE(gs::compare_results(r_plain, r_on).differences.empty());
  // A file's "dist" in any case; an unknown one is refused.
  json upper_dist = j_on;
  upper_dist["accuracy"]["dist"] = "Outliers";
  EXPECT_EQ(gs::from_json(upper_dist, "r.json").accuracy_dist, gs::Dist::Outliers);
  upper_dist["accuracy"]["dist"] = "uniform";
  EXPECT_THROW(gs::from_json(upper_dist, "r.json"), gs::UsageError);
}

// The rules between the run's settings, with their messages, whole, from the command line.
TEST(Settings, RulesBetweenRunSettings) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bf16-only", "--precisions", "BF16"}, "--bf16-only and --precisions are mutually exclusive"},
      {{"--no-bf16", "--no-fp8-current", "--no-fp8-delayed", "--no-fp8-block", "--no-fp8", "--no-nvfp4"},
       "every precision is disabled; nothing to measure"},
      {{"--precisions", "BF16, bf16"}, "--precisions lists bf16 twice"},
      {{"--pre-quantize", "--mode", "Both"},
       "--pre-quantize conflicts with --mode Both (--pre-quantize means --mode pre-quantized)"},
      {{"--accuracy-only", "--mode", "autocast"},
       "--accuracy-only times nothing: --mode does not apply (use --accuracy to time and measure accuracy)"},
      {{"--accuracy-only", "--pre-quantize"},
       "--accuracy-only times nothing: --pre-quantize does not apply (use --accuracy to time and measure accuracy)"},
      {{"--shapes", "64", "--mode", "Training"},
       "--mode Training needs a model plan: it shares quantized tensors between the Fprop, Dgrad and Wgrad of a "
       "layer, and --shapes/--sweep GEMMs stand alone (they are timed per-gemm)"},
      {{"--mode", "trainin"},
       "--mode must be training, per-gemm, pre-quantized, both or all (old names: autocast-shared = training, "
       "autocast = per-gemm), got 'trainin' (did you mean training?)"},
      {{"--grouped", "cutlass", "--provider", "deepgemm"},
       "--grouped cutlass is --provider cutlass, but --provider deepgemm has no cutlass"},
      {{"--grouped", "streams:65"}, "--grouped must be serial, streams:N with N in 1..64, or cutlass, got 'streams:65'"},
      {{"--dist", "Outliers"}, "--dist applies to --accuracy / --accuracy-only"},
      {{"--accuracy", "--dist", "Weird"}, "unknown distribution 'weird' (normal, outliers)"},
      {{"--repeats", "3", "--accuracy-only"}, "--repeats repeats timed cells: --accuracy-only times nothing"},
      {{"--provider", "cublaslt,cublaslt"}, "--provider: cublaslt is named twice"},
      // The whole step's settings (core/step/step_options.hpp).
      {{"--shapes", "64", "--recompute", "full"},
       "--recompute shapes the whole training step of a model: --shapes/--sweep GEMMs have none"},
      {{"--param-storage", "bf16", "--wgrad-output", "fp32-accumulate"},
       "--wgrad-output fp32-accumulate accumulates into FP32 main gradients, which --param-storage bf16 does not "
       "keep (use bf16+fp32-main, or --wgrad-output bf16)"},
      {{"--host-form", "compiled"},
       "--host-form compiled launches Inductor's generated kernels: it needs --step-context compile (got te)"},
      {{"--recompute", "selectiv"}, "--recompute must be none, selective or full, got 'selectiv' (did you mean selective?)"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> a = {"--dry-run"};
    a.insert(a.end(), args.begin(), args.end());
    SCOPED_TRACE(::testing::PrintToString(a));
    const Cli r = run_cli(a);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "gemmscope: " + message + "\n");
  }
  // The same rules hold for the request alone (apply_settings, no command line).
  EXPECT_THROW(request({{"--bf16-only", ""}, {"precisions", "BF16"}}, false), gs::UsageError);
  EXPECT_THROW(request({{"modes", "training"}}, false), gs::UsageError);
  EXPECT_NO_THROW(request({{"modes", "training"}}, true));
  // Plain PyTorch's parameters write BF16 weight gradients unless told otherwise.
  gs::RunRequest pt = request({{"step_options.param_storage", "BF16"}}, true);
  EXPECT_EQ(pt.step.storage, gs::ParamStorage::Bf16);
  EXPECT_FALSE(pt.options.recipe.wgrad_fp32_accumulate);
  EXPECT_TRUE(request({}, true).options.recipe.wgrad_fp32_accumulate);
}

// The collectives' flags are the request's settings (section "comm", core/run/comm_options.hpp):
// their defaults and values, the rule that a layout flag needs --comm, the one range check.
TEST(Settings, CollectivesFromTheRegistry) {
  const gs::RunRequest off = request({}, true);
  EXPECT_FALSE(off.comm.enabled());
  EXPECT_EQ(off.comm.data_parallel, 0);
  EXPECT_TRUE(off.comm.sequence_parallel);
  EXPECT_EQ(off.comm.zero_stage, 1);
  EXPECT_EQ(off.comm.grad_reduce_type, "fp32");
  EXPECT_FALSE(off.comm.fp8_param_gather);  // Megatron-Core's default: BF16 weight gathers
  EXPECT_EQ(off.comm.iters, 20);
  const gs::RunRequest on = request({{"--comm", ""},
                                     {"comm.data_parallel", "4"},
                                     {"comm.sequence_parallel", "OFF"},
                                     {"comm.zero_stage", "3"},
                                     {"comm.grad_reduce_type", "BF16"},
                                     {"comm.fp8_param_gather", "on"},
                                     {"comm.iters", "7"}},
                                    true);
  EXPECT_TRUE(on.comm.comm && !on.comm.only);
  EXPECT_EQ(on.comm.data_parallel, 4);
  EXPECT_FALSE(on.comm.sequence_parallel);
  EXPECT_EQ(on.comm.zero_stage, 3);
  EXPECT_EQ(on.comm.grad_reduce_type, "bf16");
  EXPECT_TRUE(on.comm.fp8_param_gather);
  EXPECT_EQ(on.comm.iters, 7);
  EXPECT_TRUE(request({{"--comm-only", ""}}, true).comm.only);
  // Not recorded in a result: it has no collectives' settings to read.
  gs::RunResult r;
  EXPECT_TRUE(std::holds_alternative<std::monostate>(gs::find_setting("comm.zero_stage").get(gs::settings_ref(r))));
  const auto refused = [](const gs::GivenSettings& given) -> std::string {
    try {
      request(given, true);
    } catch (const gs::UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused({{"comm.zero_stage", "2"}}), "--zero-stage applies to the collectives: add --comm (or --comm-only)");
  EXPECT_EQ(refused({{"comm.data_parallel", "2"}}), "--data-parallel applies to the collectives: add --comm (or --comm-only)");
  EXPECT_EQ(refused({{"--comm", ""}, {"comm.zero_stage", "4"}}), "--zero-stage must be between 0 and 3, got 4");
  EXPECT_EQ(refused({{"--comm", ""}, {"comm.iters", "0"}}), "--comm-iters must be between 1 and 10000, got 0");
  EXPECT_NE(refused({{"--comm", ""}, {"comm.data_parallel", "-1"}}).find("--data-parallel must be between 0 and"),
            std::string::npos);
  EXPECT_NE(refused({{"--comm", ""}, {"comm.sequence_parallel", "maybe"}}).find("--sequence-parallel"), std::string::npos);
  EXPECT_NE(refused({{"--comm", ""}, {"comm.grad_reduce_type", "fp8"}}).find("--grad-reduce-type"), std::string::npos);
  EXPECT_EQ(refused({{"comm.fp8_param_gather", "on"}}),
            "--fp8-param-gather applies to the collectives: add --comm (or --comm-only)");
  EXPECT_NE(refused({{"--comm", ""}, {"comm.fp8_param_gather", "maybe"}}).find("--fp8-param-gather"), std::string::npos);
}

// --mode outside a run (predict's datasheet prediction, compare, plot): the registry's flag, read
// with the run's rules and messages.
TEST(Settings, ModeFlagOutsideARun) {
  using gs::Mode;
  EXPECT_EQ(gs::mode_flag(), "--mode");
  EXPECT_TRUE(gs::modes_from_flag("", true).empty());
  EXPECT_EQ(gs::modes_from_flag("ALL", true), (std::vector<Mode>{Mode::PerGemm, Mode::Training, Mode::PreQuantized}));
  EXPECT_EQ(gs::modes_from_flag("all", false), (std::vector<Mode>{Mode::PerGemm, Mode::PreQuantized}));
  EXPECT_EQ(gs::modes_from_flag("Both", true), (std::vector<Mode>{Mode::Training, Mode::PreQuantized}));
  EXPECT_EQ(gs::modes_from_flag("both", false), (std::vector<Mode>{Mode::PerGemm, Mode::PreQuantized}));
  EXPECT_EQ(gs::modes_from_flag("autocast-shared", true), std::vector<Mode>{Mode::Training});
  EXPECT_THROW(gs::modes_from_flag("training", false), gs::UsageError);
  EXPECT_THROW(gs::modes_from_flag("bogus", true), gs::UsageError);
  // predict refuses a datasheet-only training prediction of shapes with the run's message.
  const Cli p = run_cli({"predict", "--gpu", "h100", "--shapes", "64", "--mode", "training"});
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--mode training needs a model plan"), std::string::npos) << p.err;
}

// A result file's lists: names as the reader takes them (modes in any case and by their old names,
// precisions in any case, providers exactly), each once.
TEST(Settings, RunListsInResultFiles) {
  json doc = json::parse(gs::test::slurp(std::string(GS_TEST_DATA_DIR) + "/compare_a.json"));
  const gs::RunResult base = gs::from_json(doc, "a.json");
  ASSERT_FALSE(base.modes.empty());
  const auto refused = [&](const char* key, json value, const std::string& message) {
    json d = doc;
    d[key] = std::move(value);
    try {
      gs::from_json(d, "x.json");
      ADD_FAILURE() << key << " " << d[key].dump();
    } catch (const gs::UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(message, 0), 0u) << e.what();
    }
  };
  refused("providers", json::array(), "x.json: \"providers\" must not be empty");
  refused("providers", {"CUTLASS"}, "x.json: \"providers\" names an unknown provider \"CUTLASS\"");
  refused("providers", {"cublaslt", "cublaslt"}, "x.json: \"providers\" lists cublaslt twice");
  refused("providers", "cublaslt", "x.json: \"providers\" must be a list of strings");
  refused("modes", {"bogus"}, "x.json: \"modes\": unknown mode 'bogus'");
  refused("modes", {1}, "x.json: \"modes\" must be a list of strings");
  refused("precisions", {"BF16", "bf16"}, "x.json: \"precisions\" lists BF16 twice");
  refused("precisions", nullptr, "x.json: \"precisions\" must be a list of strings");
}

// The parallel step's settings (section "parallel", the request's only): each flag's text reaches
// the request, and nothing of it is written into a result.
TEST(Settings, ParallelSettingsReachTheRequest) {
  const std::vector<std::pair<std::string, std::string>> given = {
      {"parallel.layout", "TP2.pp2"}, {"parallel.pipeline_parallel", "2"}, {"parallel.virtual_stages", "2"},
      {"parallel.context_parallel", "2"}, {"parallel.expert_tensor_parallel", "1"}, {"parallel.global_batch", "64"},
      {"parallel.gpus", "16"}, {"parallel.compute_efficiency", "0.5"}, {"parallel.dp_sharding", "Full-Shard"},
      {"parallel.cp_comm", "ulysses"}, {"parallel.tp_comm_overlap", "On"},
      {"parallel.grad_overlap", "off"}, {"parallel.ep_comm_overlap", "on"}, {"parallel.cluster", "dgx-h200"},
      {"parallel.gpu", "H200"}, {"parallel.trace", "t.json"}, {"parallel.json", "p.json"}};
  gs::RunRequest req;
  req.plan = gs::build_model_plan(gs::find_preset("llama-3-8b").config);
  gs::GivenSettings g;
  for (const auto& [k, v] : given) g[k] = v;
  gs::apply_settings(g, req);
  const gs::ParallelRequest& p = req.parallel;
  EXPECT_EQ(p.layout, "tp2.pp2");
  EXPECT_EQ(p.pp, 2);
  EXPECT_EQ(p.vpp, 2);
  EXPECT_EQ(p.cp, 2);
  EXPECT_EQ(p.etp, 1);
  EXPECT_EQ(p.global_batch, 64);
  EXPECT_EQ(p.gpus, 16);
  EXPECT_DOUBLE_EQ(p.compute_efficiency, 0.5);
  EXPECT_EQ(p.sharding, "fsdp");
  EXPECT_EQ(p.cp_comm, "a2a");
  EXPECT_EQ(p.tp_comm_overlap, "on");
  EXPECT_EQ(p.grad_overlap, "off");
  EXPECT_EQ(p.cluster, "dgx-h200");
  EXPECT_EQ(p.json, "p.json");
  EXPECT_TRUE(p.requested());
  // Defaults: nothing asked for.
  gs::RunRequest none;
  none.plan = req.plan;
  gs::apply_settings({}, none);
  EXPECT_FALSE(none.parallel.requested());
  // Bad values: the flag's own message.
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"parallel.layout", "tp2.xx"}, {"parallel.dp_sharding", "zero4"}, {"parallel.gpus", "0"},
           {"parallel.tp_comm_overlap", "maybe"}, {"parallel.compute_efficiency", "2"}}) {
    SCOPED_TRACE(k);
    EXPECT_THROW(gs::setting_from_text(gs::find_setting(k), v), gs::UsageError);
  }
  // Not recorded in a result.
  for (const Setting& s : gs::run_settings())
    if (s.section == "parallel") EXPECT_FALSE(s.recorded) << s.path();
}

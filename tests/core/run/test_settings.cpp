// The run-settings registry (core/run/settings.hpp): each setting declared once, and the CLI, the
// RunRequest, the result JSON and compare's "runs differ" notes all go through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
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
bool needs_model(const Setting& s) { return s.path() == "timing.step_other_ms" || s.path() == "timing.step_context"; }

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
    EXPECT_FALSE(s.section.empty());
    EXPECT_FALSE(s.label.empty());
    EXPECT_EQ(&gs::find_setting(s.path()), &s);
  }
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
    if (s.flags.empty()) continue;
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
    ASSERT_EQ(diff.size(), 1u) << (diff.empty() ? "" : diff.front());
    EXPECT_EQ(diff.front().rfind(s.label + ": ", 0), 0u) << diff.front();
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
  for (const Setting& s : gs::run_settings()) {
    SCOPED_TRACE(s.path());
    gs::RunResult b = a;
    const SettingValue before = s.get(gs::settings_ref(b));
    ASSERT_FALSE(std::holds_alternative<std::monostate>(before));
    const SettingValue after = other_value(s, before);
    ASSERT_NE(after, before);
    s.set(gs::settings_ref(b), after);
    const json written = gs::to_json(b);
    ASSERT_TRUE(written.contains(s.section));
    EXPECT_TRUE(written[s.section].contains(s.key));
    gs::RunResult back = gs::from_json(written, "b.json");
    EXPECT_EQ(s.get(gs::settings_ref(back)), after);
    const std::vector<std::string> diff = gs::compare_results(a, back).differences;
    ASSERT_EQ(diff.size(), 1u) << (diff.empty() ? "" : diff.front());
    EXPECT_EQ(diff.front().rfind(s.label + ": ", 0), 0u) << diff.front();
  }
}

// A file without a key means what files written before the setting existed measured.
TEST(Settings, AbsentKeysReadAsOlderFilesMeant) {
  json doc = json::parse(gs::test::slurp(std::string(GS_TEST_DATA_DIR) + "/compare_a.json"));
  doc["recipe_options"] = json::object();
  doc["timing"] = json::object();
  const gs::RunResult r = gs::from_json(doc, "old.json");
  for (const Setting& s : gs::run_settings()) {
    if (s.section == "gemm_options") continue;
    SCOPED_TRACE(s.path());
    gs::RunResult copy = r;
    EXPECT_EQ(s.get(gs::settings_ref(copy)), s.absent);
  }
  EXPECT_FALSE(r.recipe_options.lm_head_bf16);
  EXPECT_FALSE(r.seed.has_value());
}

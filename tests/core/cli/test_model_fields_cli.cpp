// The model-field table end to end: every flag name of every row sets its field, which the result
// JSON writes under the row's key and reading the file gives back; --help shows each row as declared.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model/model_fields.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

using gs::ModelField;
using gs::test::Out;

fs::path tmpdir() {
  static const fs::path d = gs::test::scratch_dir("model_fields_cli_test");
  return d;
}

Out run(const std::string& args) { return gs::test::run_gemmscope(args, tmpdir()); }

// A value for each field that deepseek-v3 (experts and MLA: every field is written) accepts and
// does not already have. A new row needs one here.
const std::map<std::string, int64_t> kValues = {
    {"hidden_size", 6144},        {"intermediate_size", 9216},
    {"num_attention_heads", 256}, {"num_key_value_heads", 64},
    {"head_dim", 128},            {"num_hidden_layers", 30},
    {"micro_batch_size", 2},      {"sequence_length", 2048},
    {"vocab_size", 64000},        {"tensor_parallel", 2},
    {"make_vocab_size_divisible_by", 64},
    {"num_experts", 128},         {"top_k", 4},
    {"expert_intermediate_size", 1024}, {"shared_experts", 2},
    {"shared_expert_intermediate_size", 4096}, {"first_dense_layers", 1},
    {"layer_freq", 2},            {"expert_parallel", 8},
    {"q_lora_rank", 768},         {"kv_lora_rank", 256},
    {"qk_nope_head_dim", 64},     {"qk_rope_head_dim", 32},
    {"v_head_dim", 64}};

std::vector<std::string> names_of(const std::string& flags) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = flags.find(',', at);
    out.push_back(flags.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// The row's object in a result document: "config", "config.moe" or "config.mla".
const nlohmann::json& section_of(const nlohmann::json& doc, const ModelField& f) {
  const std::string s = f.section;
  return s == "config" ? doc.at("config") : doc.at("config").at(s.substr(std::string("config.").size()));
}

}  // namespace

TEST(ModelFieldsCli, EveryFlagNameRoundTripsThroughTheResultJson) {
  const ModelField* none_checked = nullptr;
  for (const ModelField& f : gs::model_fields()) {
    ASSERT_EQ(kValues.count(f.key), 1u) << "no test value for " << f.key;
    const int64_t v = kValues.at(f.key);
    for (const std::string& name : names_of(f.flags)) {
      SCOPED_TRACE(name);
      const fs::path j = tmpdir() / "r.json";
      fs::remove(j);
      const Out r = run(fmt::format("--dry-run --model deepseek-v3 {} {} --json {}", name, v, j.string()));
      ASSERT_EQ(r.rc, 0) << r.err;
      const nlohmann::json doc = nlohmann::json::parse(gs::test::slurp(j));
      EXPECT_EQ(section_of(doc, f).at(f.key).get<int64_t>(), v);
      const gs::RunResult back = gs::from_json(doc, "r.json");
      ASSERT_TRUE(back.plan.config.has_value());
      EXPECT_EQ(f.value_in(*back.plan.config), v);
    }
    if (!f.plain_flag) none_checked = &f;
  }
  // The row the CLI binds itself: 'none' is 0 (a plain q projection), 0 itself is refused.
  ASSERT_NE(none_checked, nullptr);
  const fs::path j = tmpdir() / "none.json";
  ASSERT_EQ(run(fmt::format("--dry-run --model deepseek-v3 {} none --json {}", none_checked->first_flag(), j.string())).rc, 0);
  EXPECT_EQ(section_of(nlohmann::json::parse(gs::test::slurp(j)), *none_checked).at(none_checked->key), 0);
  const Out zero = run(fmt::format("--dry-run --model deepseek-v3 {} 0", none_checked->first_flag()));
  EXPECT_EQ(zero.rc, 2);
  EXPECT_NE(zero.err.find("--q-lora-rank must be > 0 (or 'none' for a plain q projection), got 0"), std::string::npos)
      << zero.err;
  const Out bad = run("--dry-run --hidden_size 12x");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--hidden_size"), std::string::npos) << bad.err;
}

// --help lists each row's flags and help under its group, in the table's order.
TEST(ModelFieldsCli, HelpShowsEveryRowInOrder) {
  const Out r = run("--help");
  ASSERT_EQ(r.rc, 0);
  const size_t model = r.out.find("\nModel:\n"), moe = r.out.find("\nMoE and MLA:\n");
  ASSERT_NE(model, std::string::npos);
  ASSERT_NE(moe, std::string::npos);
  ASSERT_LT(model, moe);
  size_t last = 0;
  for (const ModelField& f : gs::model_fields()) {
    SCOPED_TRACE(f.key);
    const size_t at = r.out.find(std::string("\n  ") + f.flags + " INT");
    ASSERT_NE(at, std::string::npos);
    EXPECT_GT(at, last) << "out of the table's order";
    if (f.group == std::string("Model")) {
      EXPECT_GT(at, model);
      EXPECT_LT(at, moe);
    } else {
      EXPECT_GT(at, moe);
    }
    // Its help, before the next option's line.
    const size_t help = r.out.find(f.help, at);
    ASSERT_NE(help, std::string::npos);
    EXPECT_LT(help, r.out.find("\n  -", at + 1));
    last = at;
  }
}

// Reading a result file by each row's rule: a required key missing is refused naming it, another
// reads as its `absent` value; in the "config" object 0 is refused unless the row allows it.
TEST(ModelFieldsCli, ReaderFollowsEachRowsRule) {
  const fs::path j = tmpdir() / "base.json";
  ASSERT_EQ(run("--dry-run --model deepseek-v3 --json " + j.string()).rc, 0);
  const nlohmann::json base = nlohmann::json::parse(gs::test::slurp(j));
  const auto object_of = [](nlohmann::json& doc, const ModelField& f) -> nlohmann::json& {
    const std::string s = f.section;
    return s == "config" ? doc["config"] : doc["config"][s.substr(std::string("config.").size())];
  };
  for (const ModelField& f : gs::model_fields()) {
    SCOPED_TRACE(f.key);
    nlohmann::json doc = base;
    object_of(doc, f).erase(f.key);
    if (f.required) {
      try {
        gs::from_json(doc, "r.json");
        ADD_FAILURE() << "a file without it was read";
      } catch (const gs::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("has no '{}'", f.key)), std::string::npos) << e.what();
      }
    } else {
      EXPECT_EQ(f.value_in(*gs::from_json(doc, "r.json").plan.config), f.absent);
    }
    if (f.section != std::string("config")) continue;
    doc = base;
    object_of(doc, f)[f.key] = 0;
    if (f.allow_zero) {
      EXPECT_EQ(f.value_in(*gs::from_json(doc, "r.json").plan.config), 0);
    } else {
      EXPECT_THROW(gs::from_json(doc, "r.json"), gs::UsageError);
    }
  }
}

// The model-field table (core/model/model_fields.hpp): each row names its own members, flags and
// JSON keys once, and no two rows (nor a run setting) share one.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/model_fields.hpp"
#include "core/run/settings.hpp"

using namespace gs;

namespace {

std::vector<std::string> names_of(const std::string& flags) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t comma = flags.find(',', at);
    out.push_back(flags.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

}  // namespace

TEST(ModelFields, NamesKeysAndGroupsAreSound) {
  ASSERT_EQ(model_fields().size(), 24u);
  std::set<std::string> flags, paths;
  for (const ModelField& f : model_fields()) {
    SCOPED_TRACE(f.key);
    EXPECT_FALSE(std::string(f.help).empty());
    EXPECT_TRUE(f.group == std::string("Model") || f.group == std::string("MoE and MLA"));
    EXPECT_TRUE(f.section == std::string("config") || f.section == std::string("config.moe") ||
                f.section == std::string("config.mla"));
    EXPECT_TRUE(paths.insert(f.path()).second) << "duplicate key " << f.path();
    for (const std::string& n : names_of(f.flags)) {
      EXPECT_EQ(n.rfind("--", 0), 0u) << n;
      EXPECT_EQ(n.find(' '), std::string::npos) << n;
      EXPECT_TRUE(flags.insert(n).second) << "duplicate flag " << n;
    }
    EXPECT_EQ(f.first_flag(), names_of(f.flags).front());
    EXPECT_EQ(&find_model_field(f.key), &f);
    EXPECT_EQ(&find_model_field(f.path()), &f);
  }
  // No run setting (core/run/settings.cpp) claims a model flag.
  for (const Setting& s : run_settings()) {
    std::vector<std::string> all = s.flags.empty() ? std::vector<std::string>{} : names_of(s.flags);
    for (const SettingFlag& sf : s.shortcuts)
      for (const std::string& n : names_of(sf.flags)) all.push_back(n);
    for (const std::string& n : all) EXPECT_EQ(flags.count(n), 0u) << n << " is also " << s.path();
  }
  EXPECT_THROW(find_model_field("no_such_field"), std::logic_error);
  EXPECT_EQ(find_model_field("make_vocab_size_divisible_by").first_flag(), "--make-vocab-size-divisible-by");
  EXPECT_EQ(find_model_field("config.mla.q_lora_rank").first_flag(), "--q-lora-rank");
  EXPECT_FALSE(find_model_field("q_lora_rank").plain_flag);  // takes 'none': the CLI binds it
}

// Each row's two members are its own: a value given through the row reaches that row's config
// field and no other.
TEST(ModelFields, EachRowSetsItsOwnField) {
  std::set<const void*> given, value;
  ModelOverrides probe;
  ModelConfig probe_config;
  for (const ModelField& f : model_fields()) {
    EXPECT_TRUE(given.insert(&f.given(probe)).second) << f.key;
    EXPECT_TRUE(value.insert(&f.value(probe_config)).second) << f.key;
  }
  const ModelConfig base = find_preset("deepseek-v3").config;  // experts and MLA: every field applies
  for (const ModelField& f : model_fields()) {
    SCOPED_TRACE(f.key);
    ModelOverrides o;
    f.given(o) = 777;
    EXPECT_TRUE(f.given_in(o).has_value());
    ModelConfig c = base;
    apply_overrides(c, o);
    EXPECT_EQ(f.value_in(c), 777);
    for (const ModelField& other : model_fields())
      if (&other != &f) {
        EXPECT_EQ(other.value_in(c), other.value_in(base)) << other.key;
      }
  }
}

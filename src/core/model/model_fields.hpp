// The model's integer fields, declared once: the flags that set each one (names, help, help group),
// where the result JSON's `config` section keeps it, and how to reach it in ModelOverrides (the
// flag's value) and in ModelConfig. The CLI binds the plain fields' flags from this table; the
// fields with rules of their own stay explicit where they are used: --gated-mlp / --no-gated-mlp,
// --routing, --capacity-factor, and the derived values written to the result (kv_heads(),
// head_dimension(), expert_ffn(), the MoE layer count).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/model/model_config.hpp"

namespace gs {

struct ModelField {
  const char* flags;    // CLI11 names; the first is how messages name the flag
  const char* help;     // its --help line
  const char* group;    // its --help group
  const char* section;  // the result JSON's object that holds it: "config", "config.moe" or "config.mla"
  const char* key;      // its key there
  // false: the CLI binds the flag itself (--q-lora-rank also takes 'none').
  bool plain_flag;
  // Reading a result file: whether the key must be there, else the value its absence means, and
  // whether 0 is in range (the "config" object's sizes are checked as read; validate() checks the
  // moe and mla objects' after).
  bool required;
  bool allow_zero;
  int64_t absent;
  std::optional<int64_t>& (*given)(ModelOverrides&);  // the flag's value
  int64_t& (*value)(ModelConfig&);                   // the config's field

  const std::optional<int64_t>& given_in(const ModelOverrides& o) const { return given(const_cast<ModelOverrides&>(o)); }
  int64_t value_in(const ModelConfig& c) const { return value(const_cast<ModelConfig&>(c)); }
  std::string first_flag() const;  // "--hidden_size"
  std::string path() const;        // "config.hidden_size": compare's label
};

// In --help order, one group after the other.
std::span<const ModelField> model_fields();
// The field with this JSON key (section too when two sections could share it); throws
// std::logic_error for an unknown one.
const ModelField& find_model_field(const std::string& key);

}  // namespace gs

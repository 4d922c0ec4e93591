// The schema of every config key: names, types, defaults, ranges, help lines, aliases and
// dedicated CLI flags (docs/config.md is generated from it: `train --config_reference`).
// Config (config.h), the CLI (cli.h) and the reference (config_reference.h) are all driven by it.
//
// The schema is the common keys (model.family, data.*, the train.* keys every family uses,
// profiling.*), declared in config_schema.cpp, plus the keys of every registered model family
// (config/family_registry.h), each declared once by its family (families/rave/rave_family.cpp …).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "util/enum_names.h"

namespace rt {

enum class KeyType { Bool, Int, Float, String, Enum, IntList, IntListList, FloatList };

// One resolved value. Enum values are held as std::string.
using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                                 std::vector<std::vector<int64_t>>, std::vector<double>>;

struct KeySpec {
  std::string key;  // "section.name"
  KeyType type = KeyType::Int;
  ConfigValue default_value;
  std::string help;                  // one line
  std::vector<std::string> choices;  // Enum: the accepted spellings
  // Numeric bounds; for lists they apply to every element.
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
  std::vector<int64_t> allowed;  // Int: the only accepted values when non-empty
  bool odd = false;
  int64_t divisor = 0;     // Int and int lists: every value a multiple of this (2: even); 0 = any
  bool non_empty = false;  // lists: at least one element (list of lists: and no empty row)
  std::string flag;        // dedicated CLI flag without dashes ("max_steps"), "" when none
  // The model family that owns the key ("" = common to every family). Set by the registry.
  std::string owner;
  // The key shapes the model's parameters or the function they compute: it is part of the
  // checkpoint signature (Config::architecture_signature), so a checkpoint made with another
  // value is "of another config". Implementation choices (model.scan) are not.
  bool architecture = false;

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string name() const { return key.substr(key.find('.') + 1); }
  // What is accepted, for error messages and help: "an integer >= 1", "one of cpu, cuda".
  std::string allowed_text() const;
  // "" when `v` (already of this key's type) is acceptable, else why not.
  std::string check_range(const ConfigValue& v) const;
};

// Fluent construction of key specs, one line per key:
//   keys::I("train.batch", 8, "batch size").ge(1).cli("batch")
//   keys::E("train.lr_schedule", LrSchedule::kConstant, "...")   (choices from enum_names)
//   keys::E("data.kind", "audio", {"audio", "neural"}, "dataset kind")   (an enum of a library
//     above config: ConfigGetters.EnumKeysReadAsTheirEnums holds the names equal to its
//     enum_names)
// A family binds its options' fields with keys::Field (config/options_table.h): the type and
// the default come from the field.
namespace keys {

struct Spec : KeySpec {
  Spec(std::string key, KeyType type, ConfigValue default_value, std::string help);
  Spec& ge(double v);
  Spec& gt(double v);
  Spec& le(double v);
  Spec& lt(double v);
  Spec& one_of(std::vector<int64_t> values);
  Spec& is_odd();
  Spec& is_even() { return multiple_of(2); }
  Spec& multiple_of(int64_t n);
  Spec& not_empty();
  Spec& cli(std::string flag);
  Spec& defines_architecture();
};

Spec B(std::string key, bool default_value, std::string help);
Spec I(std::string key, int64_t default_value, std::string help);
Spec F(std::string key, double default_value, std::string help);
Spec S(std::string key, std::string default_value, std::string help);
// An enum held as text: `choices` are its spellings.
Spec E(std::string key, std::string default_value, std::vector<std::string> choices, std::string help);
Spec IL(std::string key, std::vector<int64_t> default_value, std::string help);
Spec ILL(std::string key, std::vector<std::vector<int64_t>> default_value, std::string help);
Spec FL(std::string key, std::vector<double> default_value, std::string help);
// A key bound to an options field: type and default are filled in by the binding.
Spec Field(std::string key, std::string help);

// An enum with an enum_names table (util/enum_names.h).
template <typename Enum>
Spec E(std::string key, Enum default_value, std::string help) {
  return E(std::move(key), enum_name(default_value), enum_choices<Enum>(), std::move(help));
}

}  // namespace keys

// How an alias (a spelling from the Lightning or JAX profiling guides) maps onto canonical keys.
enum class AliasKind {
  Rename,       // same value, another name: wait_steps → wait
  EndStep,      // profiling.end_step: active = end_step − start_step (start_step required)
  CycleLength,  // profiling.schedule_every_n_steps: wait = n − warmup − active (≥ 0)
};

struct AliasSpec {
  std::string alias;   // "profiling.wait_steps"
  std::string target;  // canonical key it writes ("profiling.wait")
  AliasKind kind = AliasKind::Rename;
  std::string help;
};

// Every canonical key: the common keys, then each registered family's, in registration order
// (the built-in families first). References stay valid when a family registers later.
const std::deque<KeySpec>& config_schema();
// The keys every family shares (owner ""), in output order.
const std::vector<KeySpec>& common_config_schema();
const std::vector<AliasSpec>& config_aliases();
// model, data, train, profiling: the sections of a config file, in output order.
const std::vector<std::string>& config_sections();

// nullptr when `key` is not a canonical key / not an alias.
const KeySpec* find_key_spec(const std::string& key);
const AliasSpec* find_alias_spec(const std::string& key);

// The spec of a derived alias's own value (EndStep / CycleLength aliases are integers >= 1).
const KeySpec& derived_alias_value_spec(const AliasSpec& alias);

// Every canonical key and alias name ("section.key"), for "did you mean" suggestions.
std::vector<std::string> all_key_names();

const char* key_type_name(KeyType t);

}  // namespace rt

// The schema of every config key: the one place that names, types, defaults, ranges, help
// lines, aliases and dedicated CLI flags live (docs/config.md is generated from it).
// Config (config.h) and the CLI (cli.h) are both driven by this table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

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
  bool odd = false, even = false;
  std::string flag;  // dedicated CLI flag without dashes ("max_steps"), "" when none

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string name() const { return key.substr(key.find('.') + 1); }
  // What is accepted, for error messages and help: "an integer >= 1", "one of cpu, cuda".
  std::string allowed_text() const;
  // "" when `v` (already of this key's type) is acceptable, else why not.
  std::string check_range(const ConfigValue& v) const;
};

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

// Every canonical key, in output order (sections model, data, train, profiling).
const std::vector<KeySpec>& config_schema();
const std::vector<AliasSpec>& config_aliases();
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

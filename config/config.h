// The resolved training configuration: built-in defaults < TOML file < command line
// (keys in config_schema.h; docs/config.md lists them).
//
// Every value is checked when it is set: unknown keys, wrong types and impossible values throw
// rt::Error naming the origin (file or flag), the key, the value and what is accepted, with the
// closest valid key suggested. Asking a getter for an unknown key or with the wrong type is a
// programming error and also throws rt::Error.
//
// The keys of every registered model family are accepted while sources are merged (model.family
// may come later in the same file); finalize() then refuses a key set for another family than
// the chosen one and runs the chosen family's cross-key checks. Two aliases depend on other keys
// (profiling.end_step, profiling.schedule_every_n_steps); finalize() applies them too, after every
// source has been merged, so their order in a file does not matter. A canonical key set later
// than such an alias wins over the alias. profiling.profile_steps (> 0) is written into
// profiling.active/wait/repeat and reset to 0 by finalize(): a schedule key from a later source
// wins over it, one of another value from the same source (file or command line) is an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/config_schema.h"
#include "util/enum_names.h"

namespace rt {

class Config {
 public:
  // Built-in defaults, already finalized: every key of the schema as it stands (register test
  // families before making Configs).
  Config();

  // key = "section.key"; Rename aliases ("profiling.wait_steps") are accepted too.
  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  std::string get_string(const std::string& key) const;  // also enum keys
  // An enum key as its enum (util/enum_names.h), e.g. get_enum<ssm::ScanKind>("model.scan").
  template <typename E>
  E get_enum(const std::string& key) const {
    return parse_enum<E>(get_string(key), key);
  }
  std::vector<int64_t> get_int_list(const std::string& key) const;
  std::vector<std::vector<int64_t>> get_int_list_list(const std::string& key) const;
  std::vector<double> get_float_list(const std::string& key) const;

  // Parses `text_value` per the key's type (bools: true/false/True/False/1/0/yes/no/on/off;
  // lists: "[4, 4, 2]" or "4,4,2"; list of lists: "[[1,3],[1]]"). `origin` ("--override",
  // "v3.toml") is named in errors. Throws rt::Error on unknown key, bad text or out of range.
  void set(const std::string& key, const std::string& text_value, const std::string& origin);
  // Same with an already typed value (ints are accepted for float keys and float lists).
  void set_value(const std::string& key, const ConfigValue& value, const std::string& origin);

  // Merges a TOML document (sections [model] [data] [train] [profiling]) over the current
  // values. `origin` names the file in errors; parse errors carry origin:line:column. A [stack]
  // table is skipped: it describes how the file stacks (config/config_stack.h).
  void merge_toml_file(const std::filesystem::path& path);
  void merge_toml_string(const std::string& text, const std::string& origin);

  // Applies the derived aliases, refuses keys set for another model family than model.family
  // ("model.state_dim belongs to model.family = ssm, but this config trains rave") and runs the
  // chosen family's cross-key checks (dt_max > dt_min …). Call after the last source was merged;
  // throws rt::Error naming the keys involved.
  void finalize();

  // True when the key was set by a file, a flag or a derived alias rather than left at default.
  bool was_set(const std::string& key) const;
  // True when the key holds its default's value, whoever set it last (a config.toml written by
  // a run holds every key, most at their defaults).
  bool holds_default(const std::string& key) const;
  // "default", the file name or the flag that set the key last.
  std::string origin(const std::string& key) const;
  // The value as to_toml prints it ("v2" with quotes, [4, 4, 2], true).
  std::string text(const std::string& key) const;
  // The TOML files merged (merge_toml_file), in order: the config a run was made from.
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // The --config stack's name ("v2+causal", set by ConfigStack::merge, so also by
  // load_config_file: "v3"); "" when the config came from no file (a checkpoint's, a string).
  const std::string& stack_name() const { return stack_name_; }
  void set_stack_name(std::string name) { stack_name_ = std::move(name); }

  // The fully resolved config: every section, the common keys and those of the chosen family,
  // lists as TOML arrays; loads back (merge_toml_string) to an equal Config. `with_help` adds
  // each key's help as a comment, and where a key was set, the file and line or the flag.
  std::string to_toml(bool with_help = false) const;

  // The keys of the chosen family flagged as defining its architecture (KeySpec::architecture)
  // with their values, "model.capacity = 96; …": a checkpoint with another signature is "of
  // another config".
  std::string architecture_signature() const;

  bool operator==(const Config& other) const;
  bool operator!=(const Config& other) const { return !(*this == other); }

 private:
  struct Entry {
    ConfigValue value;
    std::string origin = "default";
    uint64_t seq = 0;  // 0 = built-in default; otherwise the order in which sources set it
  };
  const Entry& entry(const std::string& key, KeyType wanted) const;
  // The specs to_toml and architecture_signature print: common ones and the chosen family's.
  std::vector<const KeySpec*> chosen_specs() const;

  std::map<std::string, Entry> values_;   // canonical keys
  std::map<std::string, Entry> derived_;  // end_step / schedule_every_n_steps as given
  uint64_t next_seq_ = 1;
  std::vector<std::filesystem::path> files_;
  std::string stack_name_;
};

// The file of an origin "<file>:<line>" (Config::origin); "" for a flag, an alias or the default.
std::string origin_file(const std::string& origin);

// Whether two architecture signatures describe the same model: equal values for the keys both
// name, and the default for a key only one names (a checkpoint written before that key existed
// builds the model the key's default builds).
bool signatures_match(const std::string& a, const std::string& b);

// Defaults, then the file with its [stack] includes (config/config_stack.h; resolved next to it,
// then in config_search_dirs()), checked and finalized.
Config load_config_file(const std::filesystem::path& path);

}  // namespace rt

#include "config/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "config/config_lookup.h"
#include "config/config_stack.h"
#include "config/config_toml.h"
#include "config/config_value.h"
#include "config/family_registry.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/path_kind.h"

namespace rt {
namespace {

constexpr const char* kEndStep = "profiling.end_step";
constexpr const char* kCycle = "profiling.schedule_every_n_steps";
constexpr const char* kProfileSteps = "profiling.profile_steps";

// The source an origin belongs to: the file of "<file>:<line>", else the command line.
std::string source_of(const std::string& origin) {
  const std::string file = origin_file(origin);
  return file.empty() ? "the command line" : file;
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::string msg = origin + ": unknown config key '" + key + "'" + did_you_mean(key, all_key_names());
  const auto dot = key.find('.');
  bool known_section = false;
  for (const auto& s : config_sections()) known_section = known_section || key.substr(0, dot) == s;
  if (dot == std::string::npos || !known_section) {
    msg += " (keys are section.key with sections model, data, train, profiling)";
  } else {
    msg += " (`train --print_config` lists every key)";
  }
  throw Error(msg);
}

// Keys that config.toml files of earlier versions list (every key is written) and that no longer
// exist: accepted at their old default so that such a file still loads, refused otherwise.
// train.inject_nan_* were test hooks; tests inject faults with a data source now
// (tests/support/nan_batches.h).
bool retired_key_at_default(const std::string& key, const std::string& text, const std::string& origin) {
  if (key != "train.inject_nan_at_step" && key != "train.inject_nan_rank") return false;
  if (text == "-1") return true;
  throw Error(origin + ": " + key + " = " + text +
              " is no longer a config key (it was a test hook); remove it");
}

// The spec that checks a value given for `key`: the key's own, a Rename alias's target's, or a
// derived alias's; calls unknown_key when there is none.
const KeySpec& value_spec(const std::string& key, const std::string& origin) {
  const KeySpec* spec = find_key_spec(key);
  const AliasSpec* alias = find_alias_spec(key);
  if (spec == nullptr && alias != nullptr) {
    spec =
        alias->kind == AliasKind::Rename ? find_key_spec(alias->target) : &derived_alias_value_spec(*alias);
  }
  if (spec == nullptr) unknown_key(key, origin);
  return *spec;
}

}  // namespace

Config::Config() {
  // The family keys come from the registrations: a program reads configs after registering.
  if (model_families().empty()) {
    throw Error(
        "no model family is registered in this program: call rt::register_builtin_model_families() "
        "(families/builtin.h) before reading a config");
  }
  for (const auto& spec : config_schema()) values_[spec.key] = Entry{spec.default_value, "default", 0};
}

const Config::Entry& Config::entry(const std::string& key, KeyType wanted) const {
  std::string canonical = key;
  if (const AliasSpec* a = find_alias_spec(key); a != nullptr && a->kind == AliasKind::Rename) {
    canonical = a->target;
  }
  const KeySpec* spec = find_key_spec(canonical);
  if (spec == nullptr) {
    throw Error("Config: no key '" + key + "'" + did_you_mean(key, all_key_names()));
  }
  const bool ok = spec->type == wanted || (wanted == KeyType::String && spec->type == KeyType::Enum);
  if (!ok) {
    throw Error("Config: key '" + key + "' is " + key_type_name(spec->type) + ", not " +
                key_type_name(wanted));
  }
  auto it = values_.find(canonical);
  if (it == values_.end()) {
    throw Error("Config: key '" + key + "' was registered (by model family '" + spec->owner +
                "') after this Config was made");
  }
  return it->second;
}

bool Config::get_bool(const std::string& key) const {
  return std::get<bool>(entry(key, KeyType::Bool).value);
}
int64_t Config::get_int(const std::string& key) const {
  return std::get<int64_t>(entry(key, KeyType::Int).value);
}
double Config::get_float(const std::string& key) const {
  return std::get<double>(entry(key, KeyType::Float).value);
}
std::string Config::get_string(const std::string& key) const {
  return std::get<std::string>(entry(key, KeyType::String).value);
}
std::vector<int64_t> Config::get_int_list(const std::string& key) const {
  return std::get<std::vector<int64_t>>(entry(key, KeyType::IntList).value);
}
std::vector<std::vector<int64_t>> Config::get_int_list_list(const std::string& key) const {
  return std::get<std::vector<std::vector<int64_t>>>(entry(key, KeyType::IntListList).value);
}
std::vector<double> Config::get_float_list(const std::string& key) const {
  return std::get<std::vector<double>>(entry(key, KeyType::FloatList).value);
}

void Config::set(const std::string& key, const std::string& text_value, const std::string& origin) {
  if (retired_key_at_default(key, text_value, origin)) return;
  const KeySpec& spec = value_spec(key, origin);
  ConfigValue v;
  if (!parse_value_text(text_value, spec.type, &v)) {
    std::string expected = spec.allowed_text();
    if (spec.type == KeyType::Bool) expected += " (also True/False, 1/0, yes/no, on/off)";
    throw Error(origin + ": " + key + " = '" + text_value + "' is not a valid " +
                std::string(key_type_name(spec.type)) + "; expected " + expected);
  }
  set_value(key, v, origin);
}

void Config::set_value(const std::string& key, const ConfigValue& value, const std::string& origin) {
  if (retired_key_at_default(key, value_text(value), origin)) return;
  const KeySpec& spec = value_spec(key, origin);
  const AliasSpec* alias = find_alias_spec(key);
  ConfigValue v;
  if (!coerce_value(value, spec.type, &v)) {
    throw Error(origin + ": " + key + " = " + value_text(value) + " has the wrong type: expected " +
                spec.allowed_text() + " (got " + value_kind(value) + ")");
  }
  if (!spec.check_range(v).empty()) {
    std::string msg =
        origin + ": " + key + " = " + value_text(v) + " is not allowed; expected " + spec.allowed_text();
    if (spec.type == KeyType::Enum) msg += did_you_mean(std::get<std::string>(v), spec.choices);
    throw Error(msg);
  }
  Entry e{std::move(v), origin, next_seq_++};
  if (alias != nullptr && alias->kind != AliasKind::Rename) {
    derived_[key] = std::move(e);
  } else {
    values_[alias != nullptr ? alias->target : key] = std::move(e);
  }
}

void Config::merge_toml_file(const std::filesystem::path& path) {
  merge_toml_string(read_file(path), path.string());
  files_.push_back(path);
}

void Config::merge_toml_string(const std::string& text, const std::string& origin) {
  const toml::table root = parse_config_toml(text, origin);
  const auto& sections = config_sections();
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    if (section == "stack") continue;  // config/config_stack.h
    const auto line = ":" + std::to_string(section_node.source().begin.line);
    if (!section_node.is_table()) {
      // A key outside any section: suggest the section.key with that name.
      std::vector<std::string> names;
      std::string hint;
      for (const auto& s : config_schema())
        if (s.name() == section) hint = s.key;
      if (hint.empty()) {
        for (const auto& s : config_schema()) names.push_back(s.name());
        const std::string best = closest_match(section, names);
        for (const auto& s : config_schema())
          if (!best.empty() && s.name() == best && hint.empty()) hint = s.key;
      }
      throw Error(origin + line + ": key '" + section + "' is outside a section; keys belong in [model], " +
                  "[data], [train] or [profiling]" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    bool known = false;
    for (const auto& s : sections) known = known || s == section;
    if (!known) {
      const std::string best = closest_match(section, sections);
      throw Error(origin + line + ": unknown section [" + section + "]" +
                  (best.empty() ? "" : "; did you mean [" + best + "]?") +
                  " (sections: model, data, train, profiling)");
    }
    // A sub-table ([train.distributed], or dotted keys such as distributed.backend = "gloo"
    // under [train]) continues the key's prefix.
    std::function<void(const toml::table&, const std::string&)> merge = [&](const toml::table& table,
                                                                            const std::string& prefix) {
      for (auto&& [name, node] : table) {
        const std::string key = prefix + "." + std::string(name.str());
        const std::string where = origin + ":" + std::to_string(node.source().begin.line);
        if (node.is_table() && find_key_spec(key) == nullptr && find_alias_spec(key) == nullptr) {
          merge(*node.as_table(), key);
          continue;
        }
        const KeySpec& spec = value_spec(key, where);
        ConfigValue v;
        if (!toml_to_value(node, spec.type, &v)) {
          std::ostringstream got;
          got << node.type();
          throw Error(where + ": " + key + " = " + toml_node_text(node) + " has the wrong type: expected " +
                      spec.allowed_text() + " (got " + got.str() + ")");
        }
        set_value(key, v, where);
      }
    };
    merge(*section_node.as_table(), section);
  }
}

void Config::finalize() {
  // JAX guide: start_step/end_step bound the traced window → active = end - start.
  if (auto it = derived_.find(kEndStep); it != derived_.end()) {
    Entry& active = values_.at("profiling.active");
    if (active.seq <= it->second.seq) {
      const Entry& start = values_.at("profiling.skip_first");
      const int64_t end = std::get<int64_t>(it->second.value);
      if (start.seq == 0) {
        throw Error(it->second.origin + ": profiling.end_step = " + std::to_string(end) +
                    " needs profiling.start_step (or skip_first) to be set: active = end_step - start_step");
      }
      const int64_t n = end - std::get<int64_t>(start.value);
      if (n < 1) {
        throw Error(it->second.origin + ": profiling.end_step = " + std::to_string(end) +
                    " must be greater than profiling.start_step = " + value_text(start.value) + " (" +
                    start.origin + "); expected end_step >= start_step + 1");
      }
      active = Entry{n, "profiling.end_step (" + it->second.origin + ")", it->second.seq};
    }
  }
  // Lightning guide: schedule_every_n_steps is the cycle length wait + warmup + active.
  if (auto it = derived_.find(kCycle); it != derived_.end()) {
    Entry& wait = values_.at("profiling.wait");
    if (wait.seq <= it->second.seq) {
      const int64_t cycle = std::get<int64_t>(it->second.value);
      const int64_t warmup = std::get<int64_t>(values_.at("profiling.warmup").value);
      const int64_t active = std::get<int64_t>(values_.at("profiling.active").value);
      if (cycle - warmup - active < 0) {
        throw Error(it->second.origin + ": profiling.schedule_every_n_steps = " + std::to_string(cycle) +
                    " is shorter than profiling.warmup + profiling.active = " + std::to_string(warmup) +
                    " + " + std::to_string(active) + "; expected at least " +
                    std::to_string(warmup + active));
      }
      wait = Entry{cycle - warmup - active, "profiling.schedule_every_n_steps (" + it->second.origin + ")",
                   it->second.seq};
    }
  }
  // RAVE guide: --profile_steps N records N steps after skip_first and warmup, once, as
  // prof::ProfilerSchedule::for_profile_steps (profiling/trace/schedule.h) builds it; a test
  // holds the two equal. It is written into the schedule keys (active = N, wait = 0,
  // repeat = 1) and goes back to 0, so
  // that config.toml records the schedule that runs and reads back to the same config. Between
  // sources the later wins (the command line over a file); within one source a schedule key of
  // another value is a conflict: one file's keys have no order (toml++ reads them sorted), and
  // one command line asking for both is a mistake either way.
  Entry& shorthand = values_.at(kProfileSteps);
  if (std::get<int64_t>(shorthand.value) > 0) {
    const int64_t n = std::get<int64_t>(shorthand.value);
    const std::pair<const char*, int64_t> implied[] = {
        {"profiling.active", n}, {"profiling.wait", 0}, {"profiling.repeat", 1}};
    for (const auto& [key, value] : implied) {
      Entry& e = values_.at(key);
      if (e.seq != 0 && source_of(e.origin) == source_of(shorthand.origin)) {
        if (std::get<int64_t>(e.value) == value) continue;
        throw Error(e.origin + ": " + key + " = " + value_text(e.value) +
                    " conflicts with profiling.profile_steps = " + std::to_string(n) + " (" +
                    shorthand.origin + "), which sets " + key + " = " + std::to_string(value) +
                    " (active = N, wait = 0, repeat = 1); keep one of the two");
      }
      if (e.seq > shorthand.seq) continue;
      e = Entry{value, "profiling.profile_steps (" + shorthand.origin + ")", shorthand.seq};
    }
    shorthand.value = int64_t{0};
  }
  // Every family's keys were accepted while merging; only the chosen family's may be set.
  const std::string family = get_string("model.family");
  for (const auto& spec : config_schema()) {
    if (spec.owner.empty() || spec.owner == family) continue;
    auto it = values_.find(spec.key);
    if (it != values_.end() && it->second.seq != 0) {
      throw Error(it->second.origin + ": " + spec.key + " belongs to model.family = " + spec.owner +
                  ", but this config trains " + family + " (model.family from " + origin("model.family") +
                  "); remove the key or set model.family = " + spec.owner);
    }
  }
  if (const FamilyRegistration* f = find_model_family(family); f != nullptr && f->check) f->check(*this);
}

bool Config::holds_default(const std::string& key) const {
  const AliasSpec* a = find_alias_spec(key);
  const std::string canonical = a != nullptr && a->kind == AliasKind::Rename ? a->target : key;
  const KeySpec* spec = find_key_spec(canonical);
  auto it = values_.find(canonical);
  if (spec == nullptr || it == values_.end())
    throw Error("Config: no key '" + key + "'" + did_you_mean(key, all_key_names()));
  return it->second.value == spec->default_value;
}

bool Config::was_set(const std::string& key) const {
  if (auto it = derived_.find(key); it != derived_.end()) return true;
  const AliasSpec* a = find_alias_spec(key);
  if (a != nullptr && a->kind != AliasKind::Rename) return false;
  const std::string canonical = a != nullptr ? a->target : key;
  auto it = values_.find(canonical);
  if (it == values_.end()) throw Error("Config: no key '" + key + "'" + did_you_mean(key, all_key_names()));
  return it->second.seq != 0;
}

std::string Config::origin(const std::string& key) const {
  if (auto it = derived_.find(key); it != derived_.end()) return it->second.origin;
  const AliasSpec* a = find_alias_spec(key);
  const std::string canonical = a != nullptr && a->kind == AliasKind::Rename ? a->target : key;
  auto it = values_.find(canonical);
  if (it == values_.end()) throw Error("Config: no key '" + key + "'" + did_you_mean(key, all_key_names()));
  return it->second.origin;
}

std::string Config::text(const std::string& key) const {
  const AliasSpec* a = find_alias_spec(key);
  const std::string canonical = a != nullptr && a->kind == AliasKind::Rename ? a->target : key;
  auto it = values_.find(canonical);
  if (it == values_.end()) throw Error("Config: no key '" + key + "'" + did_you_mean(key, all_key_names()));
  return value_text(it->second.value);
}

std::vector<const KeySpec*> Config::chosen_specs() const {
  const std::string family = get_string("model.family");
  std::vector<const KeySpec*> specs;
  for (const auto& spec : config_schema()) {
    if ((spec.owner.empty() || spec.owner == family) && values_.count(spec.key) > 0) specs.push_back(&spec);
  }
  return specs;
}

std::string Config::to_toml(bool with_help) const {
  const std::vector<const KeySpec*> specs = chosen_specs();
  std::string out;
  for (const auto& section : config_sections()) {
    if (!out.empty()) out += "\n";
    out += "[" + section + "]\n";
    for (const KeySpec* spec : specs) {
      if (spec->section() != section) continue;
      std::string line = spec->name() + " = " + value_text(values_.at(spec->key).value);
      if (with_help) {
        line.resize(std::max<size_t>(line.size() + 1, 40), ' ');
        const Entry& e = values_.at(spec->key);
        line += "# " + spec->help + " (" + spec->allowed_text() + "; default " +
                value_text(spec->default_value) + (e.seq == 0 ? "" : "; set by " + e.origin) + ")";
      }
      out += line + "\n";
    }
  }
  return out;
}

std::string Config::architecture_signature() const {
  std::string s;
  for (const KeySpec* spec : chosen_specs()) {
    if (spec->architecture) s += spec->key + " = " + value_text(values_.at(spec->key).value) + "; ";
  }
  return s;
}

namespace {

// "model.capacity = 96; model.ratios = [4, 4]; " → key → value text.
std::map<std::string, std::string> signature_entries(const std::string& signature) {
  std::map<std::string, std::string> out;
  size_t begin = 0;
  while (begin < signature.size()) {
    size_t end = signature.find("; ", begin);
    if (end == std::string::npos) end = signature.size();
    const std::string entry = signature.substr(begin, end - begin);
    const size_t eq = entry.find(" = ");
    if (eq != std::string::npos) out[entry.substr(0, eq)] = entry.substr(eq + 3);
    begin = end + 2;
  }
  return out;
}

}  // namespace

std::string origin_file(const std::string& origin) {
  const auto colon = origin.rfind(':');
  if (colon == std::string::npos || colon + 1 == origin.size() ||
      origin.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return "";
  }
  return origin.substr(0, colon);
}

bool signatures_match(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const auto ea = signature_entries(a), eb = signature_entries(b);
  auto same = [](const std::map<std::string, std::string>& one,
                 const std::map<std::string, std::string>& other) {
    for (const auto& [key, value] : one) {
      auto it = other.find(key);
      if (it != other.end()) {
        if (it->second != value) return false;
        continue;
      }
      // A key one side does not name (written before the key existed) matches its default.
      const KeySpec* spec = find_key_spec(key);
      if (spec == nullptr || value_text(spec->default_value) != value) return false;
    }
    return true;
  };
  return same(ea, eb) && same(eb, ea);
}

bool Config::operator==(const Config& other) const {
  if (values_.size() != other.values_.size()) return false;
  for (const auto& [key, e] : values_) {
    auto it = other.values_.find(key);
    if (it == other.values_.end() || !(e.value == it->second.value)) return false;
  }
  return true;
}

Config load_config_file(const std::filesystem::path& path) {
  Config c;
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw Error("config file '" + path.string() + "' " + why);
  const ConfigStack stack = ConfigStack::merge({path.string()}, config_search_dirs(), c);
  stack.check(c);
  c.finalize();
  return c;
}

}  // namespace rt

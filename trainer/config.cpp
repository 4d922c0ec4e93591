#include "trainer/config.h"

#include <toml++/toml.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

constexpr const char* kEndStep = "profiling.end_step";
constexpr const char* kCycle = "profiling.schedule_every_n_steps";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest text that reads back to the same double, so to_toml() round-trips exactly.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // TOML floats need . or e
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

template <typename T, typename F>
std::string list_text(const std::vector<T>& v, F each) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + each(v[i]);
  return out + "]";
}

std::string value_text(const ConfigValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_float(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<int64_t>& l) const {
      return list_text(l, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<std::vector<int64_t>>& l) const {
      return list_text(l, [this](const std::vector<int64_t>& r) { return (*this)(r); });
    }
    std::string operator()(const std::vector<double>& l) const { return list_text(l, format_float); }
  };
  return std::visit(Visitor{}, v);
}

std::string node_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return quote(s->get());
  std::ostringstream os;
  node.visit([&os](auto&& n) { os << n; });
  return os.str();
}

// Converts a TOML node to `type`; false on a type mismatch. Integers are accepted for floats.
bool node_to_value(const toml::node& node, KeyType type, ConfigValue* out) {
  auto int_list = [](const toml::node& n, std::vector<int64_t>* v) {
    const toml::array* a = n.as_array();
    if (a == nullptr) return false;
    for (const auto& e : *a) {
      if (!e.is_integer()) return false;
      v->push_back(e.as_integer()->get());
    }
    return true;
  };
  switch (type) {
    case KeyType::Bool:
      if (!node.is_boolean()) return false;
      *out = node.as_boolean()->get();
      return true;
    case KeyType::Int:
      if (!node.is_integer()) return false;
      *out = node.as_integer()->get();
      return true;
    case KeyType::Float:
      if (node.is_integer()) {
        *out = static_cast<double>(node.as_integer()->get());
      } else if (node.is_floating_point()) {
        *out = node.as_floating_point()->get();
      } else {
        return false;
      }
      return true;
    case KeyType::String:
    case KeyType::Enum:
      if (!node.is_string()) return false;
      *out = node.as_string()->get();
      return true;
    case KeyType::IntList: {
      std::vector<int64_t> v;
      if (!int_list(node, &v)) return false;
      *out = std::move(v);
      return true;
    }
    case KeyType::IntListList: {
      const toml::array* a = node.as_array();
      if (a == nullptr) return false;
      std::vector<std::vector<int64_t>> v;
      for (const auto& row : *a) {
        v.emplace_back();
        if (!int_list(row, &v.back())) return false;
      }
      *out = std::move(v);
      return true;
    }
    case KeyType::FloatList: {
      const toml::array* a = node.as_array();
      if (a == nullptr) return false;
      std::vector<double> v;
      for (const auto& e : *a) {
        if (e.is_integer()) {
          v.push_back(static_cast<double>(e.as_integer()->get()));
        } else if (e.is_floating_point()) {
          v.push_back(e.as_floating_point()->get());
        } else {
          return false;
        }
      }
      *out = std::move(v);
      return true;
    }
  }
  return false;
}

const char* value_kind(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return "a bool";
    case 1:
      return "an integer";
    case 2:
      return "a float";
    case 3:
      return "a string";
    case 4:
      return "an integer list";
    case 5:
      return "a list of integer lists";
    default:
      return "a float list";
  }
}

// Coerces `v` to `type` (int → float, int list → float list); false on a mismatch.
bool coerce(const ConfigValue& v, KeyType type, ConfigValue* out) {
  switch (type) {
    case KeyType::Bool:
    case KeyType::Int:
    case KeyType::String:
    case KeyType::IntList:
    case KeyType::IntListList: {
      static const size_t index_of[] = {0, 1, 2, 3, 3, 4, 5, 6};
      if (v.index() != index_of[static_cast<int>(type)]) return false;
      *out = v;
      return true;
    }
    case KeyType::Enum:
      if (!std::holds_alternative<std::string>(v)) return false;
      *out = v;
      return true;
    case KeyType::Float:
      if (auto* i = std::get_if<int64_t>(&v)) {
        *out = static_cast<double>(*i);
      } else if (std::holds_alternative<double>(v)) {
        *out = v;
      } else {
        return false;
      }
      return true;
    case KeyType::FloatList:
      if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
        *out = std::vector<double>(l->begin(), l->end());
      } else if (std::holds_alternative<std::vector<double>>(v)) {
        *out = v;
      } else {
        return false;
      }
      return true;
  }
  return false;
}

std::string suggestion(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string best = closest_match(name, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::string msg = origin + ": unknown config key '" + key + "'" + suggestion(key, all_key_names());
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

bool parse_int_text(const std::string& text, int64_t* out) {
  std::string t = text;
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  if (t.empty()) return false;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && p == t.data() + t.size();
}

bool parse_float_text(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*out);
}

// Lists on the command line are TOML arrays, brackets optional: "[4,4,2]" or "4,4,2".
bool parse_list_text(const std::string& text, KeyType type, ConfigValue* out) {
  std::string t = text;
  if (t.find('[') == std::string::npos) t = "[" + t + "]";
  try {
    toml::table tbl = toml::parse("v = " + t);
    const toml::node* n = tbl.get("v");
    return n != nullptr && node_to_value(*n, type, out);
  } catch (const toml::parse_error&) {
    return false;
  }
}

}  // namespace

bool parse_bool_text(const std::string& text, bool* out) {
  const std::string t = lower(text);
  if (t == "true" || t == "1" || t == "yes" || t == "on") {
    *out = true;
    return true;
  }
  if (t == "false" || t == "0" || t == "no" || t == "off") {
    *out = false;
    return true;
  }
  return false;
}

Config::Config() {
  for (const auto& spec : config_schema()) values_[spec.key] = Entry{spec.default_value, "default", 0};
}

const Config::Entry& Config::entry(const std::string& key, KeyType wanted) const {
  std::string canonical = key;
  if (const AliasSpec* a = find_alias_spec(key); a != nullptr && a->kind == AliasKind::Rename) {
    canonical = a->target;
  }
  const KeySpec* spec = find_key_spec(canonical);
  if (spec == nullptr) {
    throw Error("Config: no key '" + key + "'" + suggestion(key, all_key_names()));
  }
  const bool ok = spec->type == wanted || (wanted == KeyType::String && spec->type == KeyType::Enum);
  if (!ok) {
    throw Error("Config: key '" + key + "' is " + key_type_name(spec->type) + ", not " +
                key_type_name(wanted));
  }
  return values_.at(canonical);
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
  const KeySpec* spec = find_key_spec(key);
  const AliasSpec* alias = find_alias_spec(key);
  if (spec == nullptr && alias != nullptr) {
    spec =
        alias->kind == AliasKind::Rename ? find_key_spec(alias->target) : &derived_alias_value_spec(*alias);
  }
  if (spec == nullptr) unknown_key(key, origin);

  ConfigValue v;
  bool ok = true;
  switch (spec->type) {
    case KeyType::Bool: {
      bool b = false;
      ok = parse_bool_text(text_value, &b);
      v = b;
      break;
    }
    case KeyType::Int: {
      int64_t i = 0;
      ok = parse_int_text(text_value, &i);
      v = i;
      break;
    }
    case KeyType::Float: {
      double d = 0;
      ok = parse_float_text(text_value, &d);
      v = d;
      break;
    }
    case KeyType::String:
    case KeyType::Enum: {
      std::string s = text_value;
      if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
        s = s.substr(1, s.size() - 2);
      }
      v = s;
      break;
    }
    case KeyType::IntList:
    case KeyType::IntListList:
    case KeyType::FloatList:
      ok = parse_list_text(text_value, spec->type, &v);
      break;
  }
  if (!ok) {
    std::string expected = spec->allowed_text();
    if (spec->type == KeyType::Bool) expected += " (also True/False, 1/0, yes/no, on/off)";
    throw Error(origin + ": " + key + " = '" + text_value + "' is not a valid " +
                std::string(key_type_name(spec->type)) + "; expected " + expected);
  }
  set_value(key, v, origin);
}

void Config::set_value(const std::string& key, const ConfigValue& value, const std::string& origin) {
  const AliasSpec* alias = find_alias_spec(key);
  const KeySpec* spec = nullptr;
  std::string canonical = key;
  if (alias != nullptr && alias->kind == AliasKind::Rename) {
    canonical = alias->target;
    spec = find_key_spec(canonical);
  } else if (alias != nullptr) {
    spec = &derived_alias_value_spec(*alias);
  } else {
    spec = find_key_spec(key);
  }
  if (spec == nullptr) unknown_key(key, origin);

  ConfigValue v;
  if (!coerce(value, spec->type, &v)) {
    throw Error(origin + ": " + key + " = " + value_text(value) + " has the wrong type: expected " +
                spec->allowed_text() + " (got " + value_kind(value) + ")");
  }
  if (!spec->check_range(v).empty()) {
    std::string msg =
        origin + ": " + key + " = " + value_text(v) + " is not allowed; expected " + spec->allowed_text();
    if (spec->type == KeyType::Enum) msg += suggestion(std::get<std::string>(v), spec->choices);
    throw Error(msg);
  }
  Entry e{std::move(v), origin, next_seq_++};
  if (alias != nullptr && alias->kind != AliasKind::Rename) {
    derived_[key] = std::move(e);
  } else {
    values_[canonical] = std::move(e);
  }
}

void Config::merge_toml_file(const std::filesystem::path& path) {
  merge_toml_string(read_file(path), path.string());
}

void Config::merge_toml_string(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw Error(origin + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                ": TOML parse error: " + std::string(e.description()));
  }
  const auto& sections = config_sections();
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
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
    for (auto&& [name, node] : *section_node.as_table()) {
      const std::string key = section + "." + std::string(name.str());
      const std::string where = origin + ":" + std::to_string(node.source().begin.line);
      const KeySpec* spec = find_key_spec(key);
      const AliasSpec* alias = find_alias_spec(key);
      if (spec == nullptr && alias != nullptr) {
        spec = alias->kind == AliasKind::Rename ? find_key_spec(alias->target)
                                                : &derived_alias_value_spec(*alias);
      }
      if (spec == nullptr) unknown_key(key, where);
      ConfigValue v;
      if (!node_to_value(node, spec->type, &v)) {
        std::ostringstream got;
        got << node.type();
        throw Error(where + ": " + key + " = " + node_text(node) + " has the wrong type: expected " +
                    spec->allowed_text() + " (got " + got.str() + ")");
      }
      set_value(key, v, where);
    }
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
  const Entry& dt_min = values_.at("model.dt_min");
  const Entry& dt_max = values_.at("model.dt_max");
  if (!(std::get<double>(dt_max.value) > std::get<double>(dt_min.value))) {
    throw Error(dt_max.origin + ": model.dt_max = " + value_text(dt_max.value) +
                " must be greater than model.dt_min = " + value_text(dt_min.value) + " (" + dt_min.origin +
                ")");
  }
}

bool Config::was_set(const std::string& key) const {
  if (auto it = derived_.find(key); it != derived_.end()) return true;
  const AliasSpec* a = find_alias_spec(key);
  if (a != nullptr && a->kind != AliasKind::Rename) return false;
  const std::string canonical = a != nullptr ? a->target : key;
  auto it = values_.find(canonical);
  if (it == values_.end()) throw Error("Config: no key '" + key + "'" + suggestion(key, all_key_names()));
  return it->second.seq != 0;
}

std::string Config::origin(const std::string& key) const {
  if (auto it = derived_.find(key); it != derived_.end()) return it->second.origin;
  const AliasSpec* a = find_alias_spec(key);
  const std::string canonical = a != nullptr && a->kind == AliasKind::Rename ? a->target : key;
  auto it = values_.find(canonical);
  if (it == values_.end()) throw Error("Config: no key '" + key + "'" + suggestion(key, all_key_names()));
  return it->second.origin;
}

std::string Config::to_toml(bool with_help) const {
  std::string out;
  for (const auto& section : config_sections()) {
    if (!out.empty()) out += "\n";
    out += "[" + section + "]\n";
    for (const auto& spec : config_schema()) {
      if (spec.section() != section) continue;
      std::string line = spec.name() + " = " + value_text(values_.at(spec.key).value);
      if (with_help) {
        line.resize(std::max<size_t>(line.size() + 1, 40), ' ');
        line += "# " + spec.help + " (" + spec.allowed_text() + "; default " +
                value_text(spec.default_value) + ")";
      }
      out += line + "\n";
    }
  }
  return out;
}

bool Config::operator==(const Config& other) const {
  for (const auto& [key, e] : values_) {
    if (!(e.value == other.values_.at(key).value)) return false;
  }
  return true;
}

Config load_config_file(const std::filesystem::path& path) {
  Config c;
  c.merge_toml_file(path);
  c.finalize();
  return c;
}

}  // namespace rt

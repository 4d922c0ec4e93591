#include "config/config_stack.h"

#include <algorithm>
#include <functional>

#include "config/config_lookup.h"
#include "config/config_toml.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace fs = std::filesystem;
namespace {

std::string stem_of(const fs::path& p) { return p.stem().string(); }

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "causal.toml" for a file in a config folder, else the path as given: what messages print.
std::string shown(const fs::path& p) { return p.filename().string(); }

std::string described(const ConfigStack::File& f) {
  return shown(f.path) + (f.included_by.empty() ? "" : " (included by " + f.included_by + ".toml)");
}

std::vector<std::string> string_array(const toml::node& node, const std::string& where) {
  std::vector<std::string> out;
  const toml::array* a = node.as_array();
  if (a == nullptr) throw Error(where + " must be an array of strings");
  for (const auto& item : *a) {
    if (!item.is_string()) throw Error(where + " must be an array of strings");
    out.push_back(std::string(*item.as_string()));
  }
  return out;
}

ConfigStack::File parse_header(const fs::path& path) {
  const std::string origin = path.string();
  const toml::table root = parse_config_toml(read_file(path), origin);
  ConfigStack::File f;
  f.path = path;
  if (const toml::table* model = root["model"].as_table(); model != nullptr && model->contains("family")) {
    f.base = true;
  }
  const toml::node* stack = root.get("stack");
  if (stack == nullptr) {
    f.base = true;  // a file without [stack] stands alone, whatever it sets
    return f;
  }
  const std::string at = origin + ":" + std::to_string(stack->source().begin.line) + ": [stack]";
  if (!stack->is_table()) throw Error(at + " must be a table");
  for (auto&& [k, node] : *stack->as_table()) {
    const std::string key(k.str());
    const std::string where = at + "." + key;
    if (key == "mirrors" || key == "summary" || key == "rave_gpu_memory") {
      if (!node.is_string()) throw Error(where + " must be a string");
      (key == "mirrors"   ? f.mirrors
       : key == "summary" ? f.summary
                          : f.rave_gpu_memory) = std::string(*node.as_string());
    } else if (key == "include") {
      f.include = string_array(node, where);
    } else if (key == "exclusive") {
      f.exclusive = string_array(node, where);
      for (const auto& x : f.exclusive) {
        if (find_key_spec(x) == nullptr) throw Error(where + ": unknown config key '" + x + "'");
      }
    } else if (key == "requires") {
      if (!node.is_table()) throw Error(where + " must be a table of key = [accepted values]");
      for (auto&& [rk, rnode] : *node.as_table()) {
        const std::string req_key(rk.str());
        if (find_key_spec(req_key) == nullptr) throw Error(where + ": unknown config key '" + req_key + "'");
        f.required.emplace_back(req_key, string_array(rnode, where + "." + req_key));
      }
    } else {
      throw Error(where +
                  ": unknown [stack] key (accepted: mirrors, summary, rave_gpu_memory, include, requires, "
                  "exclusive)");
    }
  }
  return f;
}

// An include: next to the including file first, then the config folders.
fs::path resolve_include(const std::string& name, const fs::path& from, const std::vector<fs::path>& dirs) {
  std::vector<fs::path> search{from.parent_path()};
  search.insert(search.end(), dirs.begin(), dirs.end());
  try {
    return find_config_file(name, search);
  } catch (const Error& e) {
    throw Error(from.string() + ": [stack].include: " + e.what());
  }
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return a == b || fs::equivalent(a, b, ec);
}

// A value as the config prints it, without TOML string quotes ("v2", not "\"v2\"").
std::string bare(std::string text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

ConfigStack::File ConfigStack::read_header(const fs::path& path) { return parse_header(path); }

bool ConfigStack::is_base(const fs::path& path, const std::vector<fs::path>& dirs) {
  std::vector<fs::path> seen;
  std::function<bool(const fs::path&)> base = [&](const fs::path& p) {
    for (const auto& s : seen)
      if (same_file(s, p)) return false;  // a cycle (merge reports it): no base through it
    seen.push_back(p);
    const File f = parse_header(p);
    if (f.base) return true;
    for (const auto& inc : f.include)
      if (base(resolve_include(inc, p, dirs))) return true;
    return false;
  };
  return base(path);
}

ConfigStack ConfigStack::merge(const std::vector<std::string>& names, const std::vector<fs::path>& dirs,
                               Config& config) {
  ConfigStack stack;
  std::vector<fs::path> visiting;  // the include chain, for cycles
  // Expands one file: its includes depth first, then itself. Returns whether it is (or brings) a base.
  std::function<bool(const fs::path&, const std::string&)> expand = [&](const fs::path& path,
                                                                        const std::string& by) -> bool {
    for (const auto& v : visiting) {
      if (same_file(v, path)) {
        std::vector<std::string> chain;
        for (const auto& c : visiting) chain.push_back(shown(c));
        throw Error(path.string() + ": include cycle: " + joined(chain, " includes ") + " includes " +
                    shown(path));
      }
    }
    for (const auto& f : stack.files_) {
      if (same_file(f.path, path)) return f.base;  // merged already: once, at its first place
    }
    File f = parse_header(path);
    f.included_by = by;
    visiting.push_back(path);
    for (const auto& inc : f.include)
      f.base = expand(resolve_include(inc, path, dirs), stem_of(path)) || f.base;
    visiting.pop_back();
    config.merge_toml_file(path);
    for (const auto& key : f.exclusive) {
      if (origin_file(config.origin(key)) != path.string()) {
        throw Error(path.string() + ": [stack].exclusive names " + key + ", which this file does not set");
      }
    }
    stack.files_.push_back(std::move(f));
    return stack.files_.back().base;
  };

  for (size_t i = 0; i < names.size(); ++i) {
    const fs::path path = find_config_file(names[i], dirs);
    // A file merges once, at its first place (a diamond of includes must not undo what came
    // between). Named again at the top level it would do nothing, though the user asked it to
    // overlay what came before (`--config v3 --config v2` trained v3): refused, with the reason.
    for (const auto& f : stack.files_) {
      if (!same_file(f.path, path)) continue;
      throw Error("--config " + names[i] + ": " + shown(path) + " is already in the stack" +
                  (f.included_by.empty() ? " (named earlier)" : " (included by " + f.included_by + ".toml)") +
                  "; a file merges once, at its first place, so it would not undo what the files after it "
                  "changed. Put it first (--config " +
                  names[i] + " --config …) or drop it; a single key is set with --key value");
    }
    stack.top_.push_back(path);
    const bool base = expand(path, "");
    if (i == 0 && !base) {
      throw Error("--config " + names[i] + ": " + shown(path) +
                  " is an overlay (it does not set model.family); put a base config under it, as RAVE's gin "
                  "overlays need one: --config v2 --config " +
                  names[i]);
    }
  }

  config.set_stack_name(stack.name());

  // exclusive: the value a file chose must survive the files after it.
  for (size_t i = 0; i < stack.files_.size(); ++i) {
    const File& f = stack.files_[i];
    for (const auto& key : f.exclusive) {
      const std::string by = origin_file(config.origin(key));
      if (by == f.path.string()) continue;
      for (size_t j = i + 1; j < stack.files_.size(); ++j) {
        if (by != stack.files_[j].path.string()) continue;
        throw Error("--config: " + described(stack.files_[j]) + " sets " + key + " = " + config.text(key) +
                    ", but " + described(f) + " chose " + key +
                    " and the two cannot be combined (RAVE would keep one and silently ignore the other); "
                    "drop one of the two files");
      }
    }
  }
  return stack;
}

void ConfigStack::check(const Config& config) const {
  for (const File& f : files_) {
    for (const auto& [key, accepted] : f.required) {
      const std::string value = bare(config.text(key));
      if (std::find(accepted.begin(), accepted.end(), value) != accepted.end()) continue;
      std::string by = config.origin(key);
      for (const File& g : files_) {
        if (origin_file(by) == g.path.string()) by = described(g);
      }
      if (by == "default") by = "the default";
      throw Error("--config: " + described(f) + " needs " + key + " in {" + joined(accepted, ", ") + "}" +
                  (f.mirrors.empty() ? "" : " (as RAVE's " + f.mirrors + ")") + ", but " + by + " sets " +
                  key + " = " + value);
    }
  }
}

std::string ConfigStack::name() const {
  std::vector<std::string> stems;
  for (const auto& p : top_) stems.push_back(stem_of(p));
  return joined(stems, "+");
}

}  // namespace rt

#include "config/config_history.h"

#include <map>
#include <sstream>
#include <utility>

#include "util/atomic_file.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// "section.key" → value text, in file order, from Config::to_toml's layout: "[section]" lines
// and "key = value" lines (comments after '#' only with help, which the run files do not carry).
std::vector<std::pair<std::string, std::string>> toml_values(const std::string& toml) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const auto eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

}  // namespace

std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml) {
  const auto before = toml_values(before_toml);
  const auto after = toml_values(after_toml);
  std::map<std::string, std::string> before_map(before.begin(), before.end());
  std::map<std::string, std::string> after_map(after.begin(), after.end());
  std::vector<ConfigChange> out;
  for (const auto& [key, value] : after) {
    if (key == "train.ckpt") continue;
    auto it = before_map.find(key);
    if (it == before_map.end()) {
      out.push_back({key, "", value});
    } else if (it->second != value) {
      out.push_back({key, it->second, value});
    }
  }
  for (const auto& [key, value] : before) {
    if (key != "train.ckpt" && after_map.count(key) == 0) out.push_back({key, value, ""});
  }
  return out;
}

std::string config_change_text(const ConfigChange& c) {
  return "  " + c.key + ": " + (c.before.empty() ? "(absent)" : c.before) + " → " +
         (c.after.empty() ? "(absent)" : c.after);
}

fs::path keep_previous_config(const fs::path& run_dir, int64_t step, const std::string& new_toml) {
  const fs::path current = run_dir / "config.toml";
  std::error_code ec;
  if (!fs::is_regular_file(current, ec)) return {};
  const std::string old = read_file(current);
  if (config_changes(old, new_toml).empty()) return {};
  const std::string stem = "config." + std::to_string(step);
  for (int n = 0;; ++n) {
    const fs::path copy = run_dir / (stem + (n == 0 ? "" : "." + std::to_string(n)) + ".toml");
    if (fs::exists(copy, ec)) {
      if (read_file(copy) == old) return copy;  // kept by an earlier attempt of this resume
      continue;
    }
    write_file_atomic(copy, old);
    return copy;
  }
}

}  // namespace rt

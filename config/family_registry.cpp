#include "config/family_registry.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "config/config_value.h"
#include "util/error.h"

namespace rt {
namespace {

std::deque<FamilyRegistration>& registry() {
  static std::deque<FamilyRegistration> r;
  return r;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// Checks `family` against the common schema and the families registered so far, then adds it.
void add(FamilyRegistration family) {
  const std::string& name = family.name;
  if (name.empty()) throw Error("a model family needs a name");
  for (const auto& f : registry()) {
    if (f.name == name) throw Error("model family '" + name + "' is registered twice");
  }
  if (!family.factory) throw Error("model family '" + name + "' has no factory");
  std::set<std::string> taken;
  for (const auto& spec : common_config_schema()) taken.insert(spec.key);
  for (const auto& alias : config_aliases()) taken.insert(alias.alias);
  for (const auto& f : registry()) {
    for (const auto& spec : f.keys) taken.insert(spec.key);
  }
  const auto& sections = config_sections();
  for (auto& spec : family.keys) {
    const std::string where = "model family '" + name + "': key '" + spec.key + "'";
    if (spec.key.find('.') == std::string::npos ||
        std::find(sections.begin(), sections.end(), spec.section()) == sections.end()) {
      throw Error(where + " is not section.name with a section of model, data, train, profiling");
    }
    if (!taken.insert(spec.key).second) throw Error(where + " is declared already");
    ConfigValue v;
    if (!coerce_value(spec.default_value, spec.type, &v) || !spec.check_range(v).empty()) {
      throw Error(where + " has the default " + value_text(spec.default_value) + "; expected " +
                  spec.allowed_text());
    }
    spec.owner = name;
  }
  registry().push_back(std::move(family));
}

}  // namespace

void register_model_family(FamilyRegistration family) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  add(std::move(family));
}

const std::deque<FamilyRegistration>& model_families() { return registry(); }

const FamilyRegistration* find_model_family(const std::string& name) {
  for (const auto& f : model_families()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> model_family_names() {
  std::vector<std::string> names;
  for (const auto& f : model_families()) names.push_back(f.name);
  return names;
}

}  // namespace rt

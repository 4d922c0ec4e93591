#include "trainer/model_family.h"

#include <mutex>

#include "util/error.h"
#include "trainer/config.h"

namespace rt {

void register_builtin_model_families();  // trainer/families.cpp

namespace {

std::map<std::string, ModelFamilyFactory>& registry() {
  static std::map<std::string, ModelFamilyFactory> r;
  return r;
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_model_families(); });
}

}  // namespace

void register_model_family(const std::string& name, ModelFamilyFactory factory) {
  auto [it, inserted] = registry().emplace(name, std::move(factory));
  if (!inserted) throw Error("model family '" + name + "' is registered twice");
}

std::vector<std::string> model_family_names() {
  ensure_builtins();
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<ModelFamily> make_model_family(const Config& config) {
  ensure_builtins();
  const std::string family = config.get_string("model.family");
  auto it = registry().find(family);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : model_family_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("model.family = '" + family + "' is not a known model family (known: " + known + ")");
  }
  return it->second(config);
}

}  // namespace rt

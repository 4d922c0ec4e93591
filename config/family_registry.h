// The model families `model.family` chooses from. A registration names the family, its factory,
// the config keys it owns and its cross-key checks; the config schema, --help, --print_config
// and docs/config.md are built from the registrations.
//
// The registry holds what a program registered, in order: the built-ins first
// (families/builtin.h, called by main() before any config is read), then a test family's
// (registered from its own translation unit).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config_schema.h"

namespace rt {

class Config;
class ModelFamily;

using ModelFamilyFactory = std::function<std::unique_ptr<ModelFamily>(const Config&)>;

struct FamilyRegistration {
  std::string name;  // the model.family value
  std::string help;  // one line, for --help and docs/config.md
  ModelFamilyFactory factory;
  // The keys the family owns, in output order; their owner is set to `name` on registration.
  // Their sections are the common ones ([model], [train] …); names must be new.
  std::vector<KeySpec> keys;
  // Checks across keys (dt_max > dt_min …), run by Config::finalize() when this family is
  // chosen; throws rt::Error naming the keys. May be empty.
  std::function<void(const Config&)> check;
};

// The factory of a family class constructed from the config: family_factory<RaveFamily>().
template <typename Family>
ModelFamilyFactory family_factory() {
  return
      [](const Config& config) -> std::unique_ptr<ModelFamily> { return std::make_unique<Family>(config); };
}

// Throws rt::Error when the name is registered already, when a key is already declared (by the
// common schema or another family), lies outside the config sections, or has a default its own
// range refuses.
void register_model_family(FamilyRegistration family);

// Every registration, in registration order. References stay valid when a family registers
// later.
const std::deque<FamilyRegistration>& model_families();
// nullptr when no family of that name is registered.
const FamilyRegistration* find_model_family(const std::string& name);
std::vector<std::string> model_family_names();

}  // namespace rt

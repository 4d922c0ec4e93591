#include "training/model_family.h"

#include "config/config.h"
#include "config/run_keys.h"
#include "util/error.h"

namespace rt {

std::unique_ptr<ModelFamily> make_model_family(const Config& config) {
  const std::string name = run_keys(config).family;
  const FamilyRegistration* family = find_model_family(name);
  if (family == nullptr) {
    std::string known;
    for (const auto& n : model_family_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("model.family = '" + name + "' is not a known model family (known: " + known + ")");
  }
  return family->factory(config);
}

}  // namespace rt

#include "families/builtin.h"

#include <mutex>

#include "config/family_registry.h"
#include "families/prior/prior_family.h"
#include "families/rave/rave_family.h"
#include "families/ssm/ssm_family.h"

namespace rt {

void register_builtin_model_families() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_model_family(rave_family_registration());
    register_model_family(ssm_family_registration());
    register_model_family(prior_family_registration());
  });
}

}  // namespace rt

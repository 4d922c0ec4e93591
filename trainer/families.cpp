// The built-in model families, registered explicitly on first use of the registry (static
// registration in a static library would be dropped by the linker). A new family adds its
// registration here.
#include "trainer/family_registry.h"
#include "trainer/rave_family.h"
#include "trainer/ssm_family.h"

namespace rt {

std::vector<FamilyRegistration> builtin_model_families() {
  return {rave_family_registration(), ssm_family_registration()};
}

}  // namespace rt

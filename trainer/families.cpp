// The built-in model families, registered explicitly (static registration in a static
// library would be dropped by the linker).
#include "trainer/model_family.h"
#include "trainer/rave_family.h"
#include "trainer/ssm_family.h"

namespace rt {

void register_builtin_model_families() {
  register_model_family("rave", make_rave_family);
  register_model_family("ssm", make_ssm_family);
}

}  // namespace rt

// train_with_faults: the `train` command with the tests' fault injection (tests/support/
// nan_batches.h), configured by the environment so that local ranks inherit it. Only tests run
// it; `train` itself has no fault hooks.
#include <string>
#include <vector>

#include "families/builtin.h"
#include "support/nan_batches.h"
#include "util/blas_kernels.h"
#include "util/signals.h"

namespace {

__attribute__((constructor(101))) void install_handlers_first() { rt::install_stop_signal_handlers(); }

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  rt::register_builtin_model_families();
  return rt::train_command(std::vector<std::string>(argv + 1, argv + argc),
                           rt::testing::nan_options_from_environment());
}

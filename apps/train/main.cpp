// train: parse the command line, then run the job, print the model summary, or start
// --nproc_per_node local ranks of itself (trainer/trainer.h, distributed/local_launcher.h).
#include <string>
#include <vector>

#include "families/builtin.h"
#include "trainer/trainer.h"
#include "util/blas_kernels.h"
#include "util/signals.h"

namespace {

// Before any shared library's initialiser: an executable's DT_PREINIT_ARRAY runs first, before
// the initialisers of the libraries it needs (LibTorch's register thousands of operators, about
// half a second before main), so a signal in those moments (SIGHUP of a closed ssh session, a
// launcher's SIGTERM) is recorded and ends the run with a message, never the default action
// that killed the process with nothing written. What is left before it is the dynamic loader
// mapping and relocating the libraries.
extern "C" void rt_train_install_handlers_at_preinit(int, char**, char**) {
  rt::install_stop_signal_handlers();
}
__attribute__((section(".preinit_array"),
               used)) void (*const rt_train_preinit)(int, char**,
                                                     char**) = &rt_train_install_handlers_at_preinit;

// Again after the libraries' initialisers, before this program's: one of them may have put a
// handler of its own in place (Debian 13's LibTorch 2.6 installs one for SIGHUP). A signal
// recorded meanwhile stays recorded.
__attribute__((constructor(101))) void install_handlers_again() { rt::install_stop_signal_handlers(); }

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();  // first: the local ranks inherit the choice
  rt::register_builtin_model_families();
  return rt::train_command(std::vector<std::string>(argv + 1, argv + argc));
}

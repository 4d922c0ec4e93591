// train: parse the command line, then run the job, print the model summary, or start
// --nproc_per_node local ranks of itself (trainer/trainer.h, distributed/local_launcher.h).
#include <string>
#include <vector>

#include "trainer/trainer.h"
#include "util/signals.h"

namespace {

// Before main, and before the C++ initialisers of this program: a signal in the first moments
// (SIGHUP of a closed ssh session, a launcher's SIGTERM) is recorded, not the default action
// that killed the process with nothing written. Shared libraries' own initialisers run before
// this; they write nothing.
__attribute__((constructor(101))) void install_handlers_first() { rt::install_stop_signal_handlers(); }

}  // namespace

int main(int argc, char** argv) { return rt::train_command(std::vector<std::string>(argv + 1, argv + argc)); }

// train: parse the command line, then run the job, print the model summary, or start
// --nproc_per_node local ranks of itself (distributed/local_launcher.h).
#include <iostream>
#include <string>
#include <vector>

#include "distributed/local_launcher.h"
#include "trainer/cli.h"
#include "trainer/config_reference.h"
#include "trainer/trainer.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/signals.h"

namespace {

// Before main, and before the C++ initialisers of this program: a signal in the first moments
// (SIGHUP of a closed ssh session, a launcher's SIGTERM) is recorded, not the default action
// that killed the process with nothing written. Shared libraries' own initialisers run before
// this; they write nothing.
__attribute__((constructor(101))) void install_handlers_first() { rt::install_stop_signal_handlers(); }

}  // namespace

int main(int argc, char** argv) {
  rt::install_stop_signal_handlers();
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    // Taken out before parsing: the ranks run the rest of the command line.
    const int nproc = rt::dist::take_nproc_per_node(args);
    rt::TrainArgs parsed = rt::parse_train_args(args);
    if (parsed.help) {
      std::cout << parsed.help_text;
      return 0;
    }
    if (parsed.config_reference) {
      std::cout << rt::config_reference_markdown();
      return 0;
    }
    if (parsed.print_config) {
      std::cout << parsed.config.to_toml(true);
      return 0;
    }
    if (parsed.summary) {
      std::cout << rt::model_summary(parsed.config);
      return 0;
    }
    if (nproc > 0) {
      rt::dist::LocalLaunchOptions launch;
      launch.nproc = nproc;
      launch.argv.push_back(rt::dist::current_executable());
      launch.argv.insert(launch.argv.end(), args.begin(), args.end());
      return rt::dist::run_local_ranks(launch);
    }
    rt::throw_if_stop_requested("during start-up; nothing was written");
    return rt::run_training(parsed.config);
  } catch (const rt::StopRequested& e) {
    // SIGINT/SIGTERM while the data was read, before the first step.
    std::cerr << e.what() << "\n";
    return 128 + e.signal();
  } catch (const rt::Error& e) {
    // A stop signal that interrupted a start-up call (reading the config from a pipe) ends as
    // the stop it is; the call's own error follows it.
    if (rt::stop_signal() != 0) {
      std::cerr << "stopped by " << rt::signal_name(rt::stop_signal()) << " during start-up (" << e.what() << ")\n";
      return 128 + rt::stop_signal();
    }
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << rt::error_text(e) << "\n";
    return 1;
  }
}

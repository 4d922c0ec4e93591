#include <iostream>
#include <string>
#include <vector>

#include "config/cli.h"
#include "config/config_reference.h"
#include "distributed/local_launcher.h"
#include "trainer/trainer.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/signals.h"

namespace rt {

int train_command(std::vector<std::string> args, const TrainingJobOptions& options) {
  install_stop_signal_handlers();
  try {
    // Taken out before parsing: the ranks run the rest of the command line.
    const int nproc = dist::take_nproc_per_node(args);
    TrainArgs parsed = parse_train_args(args);
    if (parsed.help) {
      std::cout << parsed.help_text;
      return 0;
    }
    if (parsed.config_reference) {
      std::cout << config_reference_markdown();
      return 0;
    }
    if (parsed.print_config) {
      std::cout << parsed.config.to_toml(true);
      return 0;
    }
    if (parsed.summary) {
      std::cout << model_summary(parsed.config);
      return 0;
    }
    if (nproc > 0) {
      dist::LocalLaunchOptions launch;
      launch.nproc = nproc;
      launch.argv.push_back(dist::current_executable());
      launch.argv.insert(launch.argv.end(), args.begin(), args.end());
      return dist::run_local_ranks(launch);
    }
    throw_if_stop_requested("during start-up; nothing was written");
    return run_training(parsed.config, options);
  } catch (const StopRequested& e) {
    // SIGINT/SIGTERM while the data was read, before the first step.
    std::cerr << e.what() << "\n";
    return 128 + e.signal();
  } catch (const Error& e) {
    // A stop signal that interrupted a start-up call (reading the config from a pipe) ends as
    // the stop it is; the call's own error follows it.
    if (stop_signal() != 0) {
      std::cerr << "stopped by " << signal_name(stop_signal()) << " during start-up (" << e.what() << ")\n";
      return 128 + stop_signal();
    }
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return 1;
  }
}

}  // namespace rt

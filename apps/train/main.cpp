// train: parse the command line, then run the job or print the model summary.
#include <iostream>

#include "trainer/cli.h"
#include "trainer/config_reference.h"
#include "trainer/trainer.h"
#include "util/error.h"

int main(int argc, char** argv) {
  try {
    rt::TrainArgs args = rt::parse_train_args(argc, argv);
    if (args.help) {
      std::cout << args.help_text;
      return 0;
    }
    if (args.config_reference) {
      std::cout << rt::config_reference_markdown();
      return 0;
    }
    if (args.print_config) {
      std::cout << args.config.to_toml(true);
      return 0;
    }
    if (args.summary) {
      std::cout << rt::model_summary(args.config);
      return 0;
    }
    return rt::run_training(args.config);
  } catch (const rt::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

// preprocess: audio files → RAVE-compatible LMDB, NLB-style HDF5 files → neural LMDB;
// --inspect DB (audio or neural); --generate_demo DIR; --generate_neural_demo DIR.
#include <iostream>
#include <thread>

#include "data/data_kind.h"
#include "data/demo_audio.h"
#include "data/lmdb_store.h"
#include "data/neural/hdf5_import.h"
#include "data/neural/neural_inspect.h"
#include "data/neural/synthetic_reaching.h"
#include "data/preprocess.h"
#include "util/cli_parse.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/printable.h"
#include "util/signals.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Build an LMDB dataset from audio files (RAVE-compatible) or from neural HDF5 files, or inspect one."};
  rt::PreprocessOptions opt;
  std::vector<std::string> inputs;
  std::string output, inspect, demo_dir, kind = "audio";
  double demo_seconds = 10.0;
  uint64_t seed = 0;
  app.add_option(
      "--input_path", inputs,
      "audio files or folders (searched recursively); --kind neural: .h5/.hdf5 files or folders of them");
  app.add_option("--output_path", output, "database folder to create");
  app.add_option("--sampling_rate", opt.sampling_rate, "target sampling rate (Hz)")->capture_default_str();
  app.add_option("--channels", opt.channels, "channels stored (downmix / duplicate)")->capture_default_str();
  app.add_option("--num_signal", opt.num_signal, "chunks hold 2 * num_signal samples per channel")
      ->capture_default_str();
  app.add_option("--max_db_size", opt.max_db_size_gb, "database size limit in GB (the LMDB map size)")
      ->capture_default_str();
  app.add_option("--kind", kind, "dataset kind")
      ->check(CLI::IsMember(rt::enum_choices<rt::DataKind>()))
      ->capture_default_str();
  // --kind neural (data/neural/hdf5_import.h).
  rt::neural::NeuralImportOptions nopt;
  std::vector<std::string> group_names;
  app.add_option("--smoothing_sigma_ms", nopt.smoothing_sigma_ms,
                 "neural: Gaussian smoothing sigma applied at import (0 = store counts; "
                 "training smooths with data.smoothing_sigma_ms)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--bin_ms", nopt.bin_ms, "neural: bin width in ms (0 = the files' bin_size_ms, else 5)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--group_names", group_names, "neural: one group name per input file (default: file stems)");
  auto* no_eval_opt = app.add_flag("--no_eval", "neural: do not import the eval_* trials");
  // --generate_neural_demo (data/neural/synthetic_reaching.h).
  std::string neural_demo_dir;
  rt::neural::SyntheticOptions sopt;
  int64_t demo_groups = 3;
  std::vector<int64_t> demo_units;
  app.add_option("--generate_neural_demo", neural_demo_dir,
                 "write synthetic reaching HDF5 files (one per group, NLB layout) to DIR and exit");
  app.add_option("--groups", demo_groups, "neural demo: number of groups (files)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--units", demo_units,
                 "neural demo: units per group (one value for all, or one per group; "
                 "default 64, 48, 32 repeated)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{100000}));
  app.add_option("--trials", sopt.trials, "neural demo: train trials per group")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}))
      ->capture_default_str();
  app.add_option("--eval_trials", sopt.eval_trials, "neural demo: eval trials per group")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  app.add_option("--bins", sopt.bins, "neural demo: bins per trial")
      ->check(CLI::Range(int64_t{2}, int64_t{100000}))
      ->capture_default_str();
  app.add_option("--workers", opt.workers, "decoding threads (0 = all cores)")->capture_default_str();
  app.add_flag("--lazy", opt.lazy,
               "store references to the files, decoded when training draws a chunk (RAVE's --lazy): the same "
               "chunks as without it, not copied");
  std::vector<std::string> extensions;
  app.add_option("--ext", extensions,
                 "extensions searched for in folders, any case, repeated or comma-separated (RAVE's --ext; "
                 "default: aif aiff wav opus mp3 aac flac ogg)")
      ->delimiter(',');
  app.add_option("--inspect", inspect, "print what a database holds and check every record decodes");
  app.add_option("--generate_demo", demo_dir, "write the built-in demo audio folder to DIR and exit");
  bool force = false;
  app.add_flag("--force", force,
               "with --generate_demo / --generate_neural_demo: replace files of the demo's names already in "
               "DIR (without it they are refused, and nothing is written)");
  app.add_option("--demo_seconds", demo_seconds, "length of each demo file (s)")->capture_default_str();
  app.add_option("--seed", seed, "demo generator seed (audio and neural)")->capture_default_str();
  RT_CLI_PARSE(app, argc, argv, "preprocess");
  // Long preparations (decoding, import, demo data, inspecting) stop within a fraction of a
  // second on Ctrl-C or SIGTERM; the trainer's "stopping after this step" does not apply here.
  rt::install_stop_signal_handlers();
  rt::set_stop_messages(false);

  try {
    if (!inspect.empty()) {
      auto bad = rt::neural::is_neural_database(inspect)
                     ? rt::neural::inspect_neural_database(inspect, std::cout)
                     : rt::inspect_database(inspect, std::cout);
      return bad.empty() ? 0 : 1;
    }
    if (!neural_demo_dir.empty()) {
      if (!demo_units.empty() && demo_units.size() != 1 &&
          static_cast<int64_t>(demo_units.size()) != demo_groups) {
        throw rt::Error("--units has " + std::to_string(demo_units.size()) + " values for --groups " +
                        std::to_string(demo_groups) + ": give one value (all groups) or one per group");
      }
      const std::vector<int64_t> cycle = {64, 48, 32};
      sopt.units.clear();
      for (int64_t g = 0; g < demo_groups; ++g) {
        sopt.units.push_back(demo_units.empty()       ? cycle[static_cast<size_t>(g) % cycle.size()]
                             : demo_units.size() == 1 ? demo_units[0]
                                                      : demo_units[static_cast<size_t>(g)]);
      }
      sopt.seed = seed;
      sopt.replace = force;
      auto files = rt::neural::write_synthetic_reaching(neural_demo_dir, sopt);
      for (size_t g = 0; g < files.size(); ++g) {
        std::cout << rt::terminal_safe(files[g].string()) << "  " << sopt.units[g] << " units, "
                  << sopt.trials << " train + " << sopt.eval_trials << " eval trials of " << sopt.bins
                  << " bins (" << sopt.bin_ms << " ms)\n";
      }
      std::cout << "wrote " << files.size() << " synthetic reaching files to "
                << rt::terminal_safe(neural_demo_dir) << "\n";
      return 0;
    }
    if (!demo_dir.empty()) {
      auto files = rt::generate_demo_audio(demo_dir, demo_seconds, seed, force);
      for (const auto& f : files) {
        std::cout << rt::terminal_safe((std::filesystem::path(demo_dir) / f.path).string()) << "  "
                  << f.format << ", " << f.sample_rate << " Hz, " << f.channels << " ch, " << f.seconds
                  << " s\n";
      }
      std::cout << "wrote " << files.size() << " demo files to " << rt::terminal_safe(demo_dir) << "\n";
      return 0;
    }
    if (force) {
      throw rt::Error(
          "--force goes with --generate_demo or --generate_neural_demo (a database is never written over: "
          "--output_path must be a new or empty folder)");
    }
    if (inputs.empty() || output.empty()) {
      std::cerr << "preprocess: --input_path and --output_path are required (or use --inspect DB / "
                   "--generate_demo DIR); see --help\n";
      return 2;
    }
    if (rt::parse_enum<rt::DataKind>(kind, "--kind") == rt::DataKind::kNeural) {
      for (const char* flag :
           {"--sampling_rate", "--channels", "--num_signal", "--workers", "--ext", "--lazy"}) {
        if (app.count(flag) > 0) throw rt::Error(std::string(flag) + " applies to --kind audio only");
      }
      for (const auto& in : inputs) nopt.inputs.emplace_back(in);
      nopt.output = output;
      nopt.groups = group_names;
      nopt.include_eval = no_eval_opt->count() == 0;
      rt::check_max_db_size(opt.max_db_size_gb);
      nopt.max_db_size_bytes = static_cast<uint64_t>(opt.max_db_size_gb * 1073741824.0);
      try {
        auto report = rt::neural::import_neural_hdf5(nopt);
        for (const auto& n : report.notes) std::cerr << "note: " << n << "\n";
        for (const auto& g : report.groups) {
          std::cout << "group " << rt::printable(g.name) << ": " << g.units << " units, " << g.behavior_dims
                    << " behaviour dims, " << g.trials << " trials, " << g.bin_ms << " ms bins\n";
        }
        std::cout << "wrote " << report.trials_written << " trials (" << report.groups.size()
                  << " group(s)) to " << rt::terminal_safe(output)
                  << (nopt.smoothing_sigma_ms > 0
                          ? ", spikes smoothed at sigma " + std::to_string(nopt.smoothing_sigma_ms) + " ms"
                          : std::string(", spikes stored as counts"))
                  << "\n";
        return report.trials_written > 0 ? 0 : 1;
      } catch (const rt::MapFullError& e) {
        std::cerr << "preprocess: the database reached --max_db_size (" << opt.max_db_size_gb
                  << " GB): " << e.what()
                  << "\nthe trials committed so far are usable (see preprocess --inspect "
                  << rt::terminal_safe(output) << ")\n";
        return 1;
      }
    }
    for (const char* flag : {"--smoothing_sigma_ms", "--bin_ms", "--group_names", "--no_eval"}) {
      if (app.count(flag) > 0) throw rt::Error(std::string(flag) + " applies to --kind neural only");
    }
    for (const auto& in : inputs) opt.input_paths.emplace_back(in);
    if (app.count("--ext") > 0) opt.extensions = extensions;
    opt.output_path = output;
    auto result = rt::preprocess_audio(opt, std::cerr);
    return result.chunks > 0 ? 0 : 1;
  } catch (const rt::StopRequested& e) {
    std::cerr << "preprocess: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const std::exception& e) {
    std::cerr << "preprocess: error: " << rt::error_text(e) << "\n";
    return 1;
  }
}

// preprocess: audio files → RAVE-compatible LMDB (SPEC §3, §5); --inspect DB; --generate_demo DIR.
#include <CLI/CLI.hpp>

#include <iostream>
#include <thread>

#include "data/demo_audio.h"
#include "data/preprocess.h"
#include "data/util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Build a RAVE-compatible LMDB dataset from audio files, or inspect one."};
  rt::PreprocessOptions opt;
  std::vector<std::string> inputs;
  std::string output, inspect, demo_dir, kind = "audio";
  double demo_seconds = 10.0;
  uint64_t seed = 0;
  app.add_option("--input_path", inputs, "audio files or folders (searched recursively)");
  app.add_option("--output_path", output, "database folder to create");
  app.add_option("--sampling_rate", opt.sampling_rate, "target sampling rate (Hz)")->capture_default_str();
  app.add_option("--channels", opt.channels, "channels stored (downmix / duplicate)")->capture_default_str();
  app.add_option("--num_signal", opt.num_signal, "chunks hold 2 * num_signal samples per channel")->capture_default_str();
  app.add_option("--max_db_size", opt.max_db_size_gb, "database size limit in GB (the LMDB map size)")->capture_default_str();
  // Only audio is built into this executable's dispatch today; the neural importer
  // (data/neural/) adds "neural" here.
  app.add_option("--kind", kind, "dataset kind")->check(CLI::IsMember({"audio"}))->capture_default_str();
  app.add_option("--workers", opt.workers, "decoding threads (0 = all cores)")->capture_default_str();
  app.add_option("--inspect", inspect, "print what a database holds and check every record decodes");
  app.add_option("--generate_demo", demo_dir, "write the built-in demo audio folder to DIR and exit");
  app.add_option("--demo_seconds", demo_seconds, "length of each demo file (s)")->capture_default_str();
  app.add_option("--seed", seed, "demo generator seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (!inspect.empty()) {
      auto bad = rt::inspect_database(inspect, std::cout);
      return bad.empty() ? 0 : 1;
    }
    if (!demo_dir.empty()) {
      auto files = rt::generate_demo_audio(demo_dir, demo_seconds, seed);
      for (const auto& f : files) {
        std::cout << (std::filesystem::path(demo_dir) / f.path).string() << "  " << f.format << ", "
                  << f.sample_rate << " Hz, " << f.channels << " ch, " << f.seconds << " s\n";
      }
      std::cout << "wrote " << files.size() << " demo files to " << demo_dir << "\n";
      return 0;
    }
    if (inputs.empty() || output.empty()) {
      std::cerr << "preprocess: --input_path and --output_path are required (or use --inspect DB / "
                   "--generate_demo DIR); see --help\n";
      return 2;
    }
    for (const auto& in : inputs) opt.input_paths.emplace_back(in);
    opt.output_path = output;
    auto result = rt::preprocess_audio(opt, std::cerr);
    return result.chunks > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "preprocess: error: " << e.what() << "\n";
    return 1;
  }
}

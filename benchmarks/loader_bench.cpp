// loader_bench: builds a temporary LMDB from the generated demo audio, then measures how many
// examples per second the Loader delivers at RAVE v2 settings (n_signal 131072, batch 8, phase
// mangle p=0.8, dequantize) for each worker count. Prints one JSON object on stdout.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "data/audio_dataset.h"
#include "data/demo_audio.h"
#include "data/loader.h"
#include "data/preprocess.h"
#include "util/json.h"

int main(int argc, char** argv) {
  CLI::App app{"Audio loader throughput at RAVE v2 settings"};
  std::vector<int> workers = {1, 2};
  int batches = 24;
  int64_t n_signal = 131072;
  int64_t batch = 8;
  double demo_seconds = 30.0;
  app.add_option("--workers", workers, "worker counts to measure")->capture_default_str();
  app.add_option("--batches", batches, "batches timed per worker count (after 2 warm-up batches)")
      ->capture_default_str();
  app.add_option("--n_signal", n_signal)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--demo_seconds", demo_seconds, "length of each generated demo file")->capture_default_str();
  bool lazy = false;
  double lazy_cache_mb = 512.0;
  app.add_flag("--lazy", lazy,
               "a lazy database (preprocess --lazy): the files decoded when a chunk is drawn");
  app.add_option("--lazy_cache_mb", lazy_cache_mb, "with --lazy: decoded files kept (0: every draw decodes)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);

  namespace fs = std::filesystem;
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("rt_loader_bench_" + std::to_string(rd()));
  rt::Json result;
  try {
    rt::generate_demo_audio(dir / "audio", demo_seconds, 1);
    rt::PreprocessOptions pre;
    pre.input_paths = {dir / "audio"};
    pre.output_path = dir / "db";
    pre.num_signal = n_signal;
    pre.max_db_size_gb = 1.0;
    pre.lazy = lazy;
    std::ostringstream log;
    auto built = rt::preprocess_audio(pre, log);

    rt::AudioDatasetOptions opt;  // Defaults are v2's: phase mangle p=0.8, dequantize.
    opt.n_signal = n_signal;
    opt.lazy_cache_bytes = static_cast<size_t>(lazy_cache_mb * 1048576.0);
    auto ds = std::make_shared<rt::AudioDataset>(dir / "db", opt);
    result["dataset"] = {{"records", ds->size()},
                         {"seconds", built.seconds},
                         {"n_signal", n_signal},
                         {"batch", batch},
                         {"phase_mangle_p", opt.phase_mangle_p},
                         {"dequantize", opt.dequantize},
                         {"lazy", lazy},
                         {"lazy_cache_mb", lazy ? lazy_cache_mb : 0.0}};
    result["hardware_concurrency"] = std::thread::hardware_concurrency();
    for (int w : workers) {
      rt::LoaderOptions lo;
      lo.batch = batch;
      lo.workers = w;
      lo.seed = 1;
      lo.drop_last = false;
      rt::Loader loader(ds, lo);
      for (int i = 0; i < 2; ++i) loader.next();
      const auto t0 = std::chrono::steady_clock::now();
      int64_t examples = 0;
      for (int i = 0; i < batches; ++i) examples += loader.next()->input.size(0);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      result["runs"].push_back({{"workers", w},
                                {"examples", examples},
                                {"seconds", s},
                                {"examples_per_second", examples / s},
                                {"batches_per_second", batches / s},
                                {"ms_per_example", 1000.0 * s / static_cast<double>(examples)}});
    }
  } catch (const std::exception& e) {
    std::cerr << "loader_bench: " << e.what() << "\n";
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  std::cout << result.dump(2) << "\n";
  return 0;
}

// generate: audio files through a trained RAVE model, as `rave generate` (generate/generate.h).
//   generate --model RUN_DIR|CKPT|FILE.ts --input PATH [--input PATH ...] [--out_path generations]
//            [--name NAME] [--stream [--chunk_size 4096]] [--ema_weights] [--seed N] [--threads N]
//            [--format wavf32] [--force]
//   generate --prior PRIOR_RUN|CKPT|FILE.ts [--model RAVE] [--seconds 10] [--temperature 1] [--seed N]
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "families/builtin.h"
#include "generate/generate.h"
#include "util/blas_kernels.h"
#include "util/cli_parse.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/signals.h"
#include "util/thread_limits.h"
#include "util/torch_compat.h"

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  rt::compat::disable_tensorexpr_fuser();
  rt::register_builtin_model_families();
  rt::install_stop_signal_handlers();
  CLI::App app{
      "Run audio files through a trained RAVE model, offline or in streaming blocks, as `rave generate` "
      "does; each output is written with its duration, realtime factor and spectral distance (docs/export.md "
      "\"Listening\")."};
  rt::exporting::GenerateOptions o;
  std::vector<std::string> inputs;
  std::string out_path = o.out_path.string();
  int threads = 1;
  app.add_option(
      "--model", o.model,
      "a run directory (its best.ckpt, else last.ckpt), a checkpoint, a `latest` pointer, an "
      "exported TorchScript file (.ts: ours or RAVE's own), or the forward graph export --format onnx "
      "writes (.onnx); with --prior, the RAVE (default: the prior's own, model.rave)");
  app.add_option("--input", inputs, "audio files or folders (searched recursively); repeatable");
  app.add_option("--prior", o.prior,
                 "generate from a prior instead of inputs: a prior run or checkpoint (train --config prior), "
                 "or a file export --prior wrote; writes <out_path>/<name>/prior_seed<N>.<ext>");
  app.add_option("--seconds", o.seconds, "with --prior: seconds of audio, more than 0, at most 3600")
      ->capture_default_str();
  app.add_option("--temperature", o.temperature,
                 "with --prior: the prior's sampling temperature (nn~'s prior input softplus(x)/ln 2), more "
                 "than 0, at most 100")
      ->capture_default_str();
  app.add_option("--out_path", out_path, "folder of the generations")->capture_default_str();
  app.add_option(
      "--name", o.name,
      "sub-folder of --out_path, a folder name (no '/', not '.' or '..'; default: the run's name or "
      "the file's stem)");
  app.add_flag("--stream", o.stream,
               "run block by block through the streaming caches, as nn~ does (an exported file must be a "
               "--streaming export); the outputs are aligned with the inputs (the latency removed)");
  app.add_option(
      "--chunk_size", o.chunk_size,
      "with --stream: samples per block, a multiple of the model's ratio, at most 1048576 (default "
      "4096)");
  app.add_flag("--ema_weights", o.ema_weights, "a run trained with --ema: use its moving averages");
  app.add_option("--seed", o.seed, "seed of the model's random draws (posterior sample, noise)")
      ->capture_default_str();
  app.add_option("--threads", threads, "torch intra-op threads, 1 to 4 × the machine's cores")
      ->capture_default_str();
  app.add_option("--format", o.format,
                 "output format: wav16, wav24, wavf32, flac16, flac24, ogg, aiff16, aiff24, opus, mp3 (the "
                 "outputs' extension follows it: .wav, .flac, .ogg, .aiff, .opus, .mp3)")
      ->capture_default_str();
  app.add_flag("--force", o.force, "replace outputs and report.json already there");
  RT_CLI_PARSE(app, argc, argv, "generate");
  try {
    if (o.prior.empty()) {
      if (o.model.empty()) throw rt::Error("--model is required (or --prior to generate from a prior)");
      if (inputs.empty())
        throw rt::Error("--input is required: audio files or folders to run through --model");
      for (const char* flag : {"--seconds", "--temperature"}) {
        if (app.count(flag) > 0) throw rt::Error(std::string(flag) + " goes with --prior");
      }
    }
    rt::check_thread_count("--threads", threads, 1);
    if (app.count("--chunk_size") > 0 && o.chunk_size < 1) {
      throw rt::Error("--chunk_size " + std::to_string(o.chunk_size) +
                      " is not accepted: samples per block, 1 to " +
                      std::to_string(rt::exporting::kMaxChunkSize) + " and a multiple of the model's ratio");
    }
    torch::set_num_threads(threads);
    for (const auto& i : inputs) o.inputs.emplace_back(i);
    o.out_path = out_path;
    o.progress = &std::cerr;
    const rt::exporting::GenerateReport r = rt::exporting::generate(o);
    std::cout << r.text();
    if (r.failed() > 0) {
      std::cerr << "generate: " << r.failed() << " of " << r.files.size()
                << " input(s) skipped (listed above)\n";
      return 1;
    }
    return 0;
  } catch (const rt::StopRequested& e) {
    // The interrupted model call may still be running on its thread (generate/generate.h): the
    // process ends here, without running destructors under it; the outputs written before it
    // and report.json are complete.
    std::cerr << "generate: " << e.what() << "\n";
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(128 + e.signal());
  } catch (const std::exception& e) {
    std::cerr << "generate: error: " << rt::error_text(e) << "\n";
    return 1;
  }
}

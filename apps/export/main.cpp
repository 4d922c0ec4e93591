// export: a trained RAVE run → TorchScript for nn~ (Max/MSP, Pure Data) and the RAVE VST, or
// ONNX graphs for ONNX Runtime hosts (--format onnx).
//   export --run RUN_DIR | --ckpt PATH [--format torchscript|onnx] [--output NAME.ts [--force]] [--streaming]
//   [--fidelity 0.95]
//          [--latent_size N] [--ema_weights] [--quantize none|int8] [--check_seconds 10]
//          [--check_audio FILE] [--prior PRIOR_RUN] [--sr HOST_RATE]
// and whether an exported file keeps up in realtime on this machine (export/checks/realtime_check.h):
//   export --benchmark FILE.ts [--block 2048,4096] [--threads 1] [--seconds 10]
// and what an exported file says about itself (export/checks/file_facts.h):
//   export --inspect FILE.ts | FILE.onnx [--target_libtorch X.Y]
// A TorchScript export or --inspect with --target_libtorch X.Y refuses a file LibTorch X.Y
// cannot load, with the reason (export/checks/libtorch_target.h).
#include <cmath>
#include <iostream>

#include "export/checks/file_facts.h"
#include "export/checks/libtorch_target.h"
#include "export/checks/realtime_check.h"
#include "export/graph/describe.h"
#include "export/rave_export.h"
#include "families/builtin.h"
#include "util/blas_kernels.h"
#include "util/cli_parse.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/signals.h"
#include "util/torch_compat.h"

namespace {

// --benchmark and --inspect read a file that exists; the export's flags have nothing to act on
// there, and the benchmark's flags nothing without it.
void check_modes(const CLI::App& app, bool benchmark) {
  if (app.count("--inspect") > 0) {
    // --target_libtorch checks the inspected file.
    for (const char* flag :
         {"--run", "--ckpt", "--output", "--force", "--streaming", "--ema_weights", "--format", "--fidelity",
          "--latent_size", "--quantize", "--check_seconds", "--check_audio", "--benchmark", "--block",
          "--threads", "--seconds", "--channels", "--prior", "--sr"}) {
      if (app.count(flag) > 0) {
        throw rt::Error(std::string("--inspect and ") + flag +
                        " cannot be combined: --inspect prints what a file already exported records");
      }
    }
    return;
  }
  if (benchmark) {
    for (const char* flag : {"--run", "--ckpt", "--output", "--force", "--streaming", "--ema_weights",
                             "--format", "--fidelity", "--latent_size", "--quantize", "--check_seconds",
                             "--check_audio", "--target_libtorch", "--channels", "--prior", "--sr"}) {
      if (app.count(flag) > 0) {
        throw rt::Error(
            std::string("--benchmark and ") + flag +
            " cannot be combined: --benchmark measures a file already exported; export first "
            "(export --run RUN --streaming), then run export --benchmark on the .ts file it writes");
      }
    }
    return;
  }
  for (const char* flag : {"--block", "--threads", "--seconds"}) {
    if (app.count(flag) > 0) {
      throw rt::Error(std::string(flag) +
                      " goes with --benchmark FILE.ts (the realtime check of an exported file)");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  rt::compat::disable_tensorexpr_fuser();
  rt::register_builtin_model_families();
  CLI::App app{"Export a trained RAVE model as TorchScript for nn~ and the RAVE VST (docs/export.md)."};
  rt::exporting::ExportOptions opt;
  std::string run, ckpt, output;
  app.add_option("--run", run, "run directory: exports checkpoints/best.ckpt (else last.ckpt)");
  app.add_option("--ckpt", ckpt, "checkpoint file to export instead");
  app.add_option("--output", output, "file to write (default <run>/export/<name>[_streaming].ts)");
  app.add_flag("--force", opt.force,
               "replace the file at --output (or the default path) when it exists; a checkpoint, a run's "
               "own files and anything that is not a regular file are never replaced");
  std::string format = "torchscript";
  app.add_option("--format", format,
                 "torchscript: one file for nn~ and the RAVE VST. onnx: encode, decode and forward as three "
                 "ONNX graphs (opset 17) for ONNX Runtime hosts, streaming state as explicit inputs and "
                 "outputs (docs/export.md)")
      ->capture_default_str();
  app.add_flag("--streaming", opt.streaming, "cached convolutions for block-wise realtime use (nn~, VST)");
  app.add_flag("--ema_weights", opt.ema_weights,
               "export the parameters' moving averages of a run trained with --ema (RAVE's --ema_weights)");
  app.add_option("--fidelity", opt.fidelity, "share of the latent variance the kept PCA dimensions explain")
      ->capture_default_str();
  app.add_option("--latent_size", opt.latent_size, "keep exactly N latent dimensions instead");
  app.add_option(
      "--channels", opt.channels,
      "decode's and forward's output channels (RAVE's --channels): more than the model's decode the "
      "latent once per copy, fewer keep the first (TorchScript)");
  std::string quantize = "none";
  app.add_option(
         "--quantize", quantize,
         "none: float32 weights, lossless. int8: the large layers' weights as int8 (one scale per "
         "output channel), a quarter of the weight reads. TorchScript: aten's dynamic quantized linear, "
         "2-2.6x faster than none on PyPI's x86 LibTorch 2.x (fbgemm), little or nothing on Debian's "
         "1.13 (oneDNN). ONNX: DynamicQuantizeLinear + MatMulInteger, 1.9-2.2x faster than none under "
         "ONNX Runtime 1.17 (BENCHMARKS.md). Lossy (activations quantized per call), so opt-in: "
         "export prints what it adds on your model; on a v2 at capacity 32 trained 3000 steps on the "
         "demo database it added 0.8% of the model's own reconstruction distance on the database and "
         "0.3% on recorded speech (SNR 52 and 43 dB), too unconverged a model to make it the default "
         "(docs/export.md)")
      ->capture_default_str();
  std::string check_audio;
  app.add_option("--sr", opt.sr,
                 "the host's sampling rate: the file runs at it, resampling to the model's rate and back "
                 "inside (RAVE's --sr; an integer multiple, 2x or more, of the model's rate; TorchScript)");
  app.add_option("--prior", opt.prior,
                 "a prior trained over this RAVE (train --config prior --model RUN): its run directory or "
                 "checkpoint, written as nn~'s `prior` method (a temperature signal in, latent signals "
                 "out; TorchScript)");
  app.add_option("--check_audio", check_audio,
                 "an audio file (any format libsndfile reads, any rate and channel count: resampled and "
                 "mapped as preprocess does) to run the fidelity check on instead of the run's database, "
                 "e.g. speech or your own material");
  app.add_option("--check_seconds", opt.check_seconds,
                 "seconds of the run's database the written file is compared on with the float32 model "
                 "(SNR, multi-scale spectral distance); 0 = skip the check")
      ->capture_default_str();
  rt::exporting::RealtimeCheckOptions bench;
  std::string benchmark, blocks;
  app.add_option("--benchmark", benchmark,
                 "instead of exporting: time an exported FILE.ts block by block, as nn~ runs it, and say "
                 "whether it keeps up in realtime on this machine");
  app.add_option("--block", blocks,
                 "with --benchmark: block sizes in samples, comma-separated (default 2048,4096)");
  app.add_option("--threads", bench.threads,
                 "with --benchmark: torch threads (default: one voice's cost on one core)")
      ->capture_default_str();
  app.add_option("--seconds", bench.seconds, "with --benchmark: seconds of audio timed per block size")
      ->capture_default_str();
  app.add_option("--target_libtorch", opt.target_libtorch,
                 "X.Y: the LibTorch release the host loads TorchScript with (nn~'s, the VST's): refuse, "
                 "with the reason and writing nothing, a file that release cannot load (its file format "
                 "version or an operator it lacks, checked against each release's own headers: "
                 "docs/export.md). With --inspect: check that file");
  std::string inspect;
  app.add_option(
      "--inspect", inspect,
      "instead of exporting: print what an exported FILE.ts records (LibTorch it was written with, "
      "file format version, nn~ methods, sampling rate, block sizes, latency, checkpoint and step, "
      "fidelity check, the run's model config); RAVE's own files record fewer");
  RT_CLI_PARSE(app, argc, argv, "export");
  // Ctrl-C and SIGTERM stop the fidelity check and the benchmark between blocks; an export
  // stopped before its last write leaves --output as it was (export/rave_export.h).
  rt::install_stop_signal_handlers();
  rt::set_stop_messages(false);
  opt.run = run;
  opt.checkpoint = ckpt;
  opt.output = output;
  opt.check_audio = check_audio;
  try {
    // Explicit values outside what the flags mean (0 is the default's own "choose by --fidelity").
    if (app.count("--latent_size") > 0 && opt.latent_size < 1) {
      throw rt::Error("--latent_size " + std::to_string(opt.latent_size) +
                      " is not accepted: the number of latent dimensions to keep, at least 1 (omit the flag "
                      "to choose by --fidelity)");
    }
    if (app.count("--channels") > 0) rt::exporting::graph::check_output_channels(opt.channels);
    if (!(opt.check_seconds >= 0.0 && opt.check_seconds <= 3600.0)) {
      throw rt::Error("--check_seconds " + app.get_option("--check_seconds")->as<std::string>() +
                      " is not accepted: seconds of audio, 0 to 3600 (0 skips the check)");
    }
    opt.quantize = rt::parse_enum<rt::exporting::Quantize>(quantize, "--quantize");
    opt.format = rt::parse_enum<rt::exporting::ExportFormat>(format, "--format");
    const bool benchmarking = app.count("--benchmark") > 0;
    check_modes(app, benchmarking);
    // A bad --target_libtorch is refused before anything is read or written.
    if (app.count("--target_libtorch") > 0)
      rt::exporting::parse_target_libtorch(opt.target_libtorch, nullptr);
    if (app.count("--inspect") > 0) {
      std::string refusal;
      std::cout << rt::exporting::inspect_export(inspect, opt.target_libtorch, &refusal);
      if (!refusal.empty()) {
        std::cout.flush();
        std::cerr << "export: error: " << refusal << "\n";
        return 1;
      }
      return 0;
    }
    if (benchmarking) {
      bench.file = benchmark;
      if (app.count("--block") > 0) bench.blocks = rt::exporting::parse_block_sizes(blocks);
      std::cout << rt::exporting::format_realtime_check(rt::exporting::run_realtime_check(bench));
      return 0;
    }
    std::cout << rt::exporting::format_report(rt::exporting::export_rave(opt));
    return 0;
  } catch (const rt::StopRequested& e) {
    std::cerr << "export: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const std::exception& e) {
    std::cerr << "export: error: " << rt::error_text(e) << "\n";
    return 1;
  }
}

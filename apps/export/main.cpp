// export: a trained RAVE run → TorchScript for nn~ (Max/MSP, Pure Data) and the RAVE VST.
//   export --run RUN_DIR | --ckpt PATH [--output NAME.ts] [--streaming] [--fidelity 0.95]
//          [--latent_size N]
#include <CLI/CLI.hpp>
#include <iostream>

#include "export/rave_export.h"
#include "util/error_text.h"

int main(int argc, char** argv) {
  CLI::App app{"Export a trained RAVE model as TorchScript for nn~ and the RAVE VST (docs/export.md)."};
  rt::exporting::ExportOptions opt;
  std::string run, ckpt, output;
  app.add_option("--run", run, "run directory: exports checkpoints/best.ckpt (else last.ckpt)");
  app.add_option("--ckpt", ckpt, "checkpoint file to export instead");
  app.add_option("--output", output, "file to write (default <run>/export/<name>[_streaming].ts)");
  app.add_flag("--streaming", opt.streaming, "cached convolutions for block-wise realtime use (nn~, VST)");
  app.add_flag("--ema_weights", opt.ema_weights,
               "export the parameters' moving averages of a run trained with --ema (RAVE's --ema_weights)");
  app.add_option("--fidelity", opt.fidelity, "share of the latent variance the kept PCA dimensions explain")
      ->capture_default_str();
  app.add_option("--latent_size", opt.latent_size, "keep exactly N latent dimensions instead");
  CLI11_PARSE(app, argc, argv);
  opt.run = run;
  opt.checkpoint = ckpt;
  opt.output = output;
  try {
    std::cout << rt::exporting::format_report(rt::exporting::export_rave(opt));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "export: error: " << rt::error_text(e) << "\n";
    return 1;
  }
}

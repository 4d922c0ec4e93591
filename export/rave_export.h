// `export`: a trained RAVE run → a TorchScript file that nn~ (Max/MSP, Pure Data) and the RAVE
// VST load, as acids-ircam/RAVE's `rave export --run RUN [--streaming]` does, without Python.
//
// The checkpoint is <run>/checkpoints/best.ckpt, else last.ckpt (or --ckpt). The latent is
// cropped as RAVE does: to the PCA dimensions that reach `fidelity` (the smallest power of two
// n with fidelity[n-1] >= fidelity), unless latent_size names the size. A checkpoint without
// a fitted PCA (validation never ran in phase 1) gets one fitted on the run's database, or
// the export stops saying so; it never exports a 1-dimensional latent silently.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "export/checks/fidelity.h"
#include "export/torchscript/rave_script.h"
#include "util/enum_names.h"

namespace rt::exporting {

// export --format: TorchScript for nn~ and the RAVE VST (the default), or ONNX for ONNX Runtime
// hosts (export/onnx/onnx_rave.h: encode, decode and forward as three graph files).
enum class ExportFormat { kTorchScript, kOnnx, kMaxValue = kOnnx };
constexpr EnumNames<ExportFormat> enum_names(ExportFormat) { return {{"torchscript", "onnx"}}; }

struct ExportOptions {
  ExportFormat format = ExportFormat::kTorchScript;
  std::filesystem::path run;         // a run directory (train's "run directory: …")
  std::filesystem::path checkpoint;  // or a checkpoint file
  std::filesystem::path output;      // default <run>/export/<train.name>[_streaming].ts (.onnx)
  bool streaming = false;
  double fidelity = 0.95;
  int64_t latent_size = 0;   // 0 = from fidelity
  int64_t channels = 0;      // --channels: decode's and forward's output channels; 0 = the model's
  bool ema_weights = false;  // the parameters' moving averages (train.ema), as RAVE's --ema_weights
  Quantize quantize = Quantize::kNone;  // --quantize
  double check_seconds = 10.0;          // audio of the run's database the fidelity check compares; 0 = none
  std::filesystem::path check_audio;  // --check_audio: this file instead of the database (any rate, channels)
  bool force = false;  // --force: replace an existing file at `output` (never a checkpoint, a run's
                       // own file or something that is not a regular file)
  // --target_libtorch X.Y: the TorchScript file must load in that LibTorch release
  // (export/checks/libtorch_target.h), else nothing is written.
  std::string target_libtorch;
  // --prior RUN|CKPT: a prior trained over this RAVE (train --config prior), written as nn~'s
  // `prior` method; refused when it was trained over another latent rotation.
  std::string prior;
  // --sr N: the file runs at the host's rate N, an integer multiple (2× or more) of the model's,
  // resampling inside as RAVE's --sr does; 0: the model's rate.
  int64_t sr = 0;
};

struct ExportReport {
  ExportFormat format = ExportFormat::kTorchScript;
  std::filesystem::path output, checkpoint;
  // ONNX: the encode and decode graphs written beside `output` (the forward graph).
  std::filesystem::path onnx_encode, onnx_decode;
  std::vector<std::string> onnx_states;     // the streaming state inputs of the forward graph
  int64_t step = 0;                         // the checkpoint's training step
  int64_t channels = 0, sampling_rate = 0;  // the file's rate (--sr's, else the model's)
  int64_t model_sampling_rate = 0;
  int64_t output_channels = 0;  // decode's and forward's (--channels; the model's by default)
  int64_t latent_size = 0, full_latent_size = 0;
  std::vector<double> fidelity;  // cumulative explained variance, per dimension
  std::string latent_rule;       // how latent_size was chosen
  bool pca_fitted_now = false;   // the checkpoint had none: fitted on the database
  bool streaming = false;
  ScriptInfo script;
  Quantize quantize = Quantize::kNone;
  FidelityFigures check;  // the written file against the float32 model (export/checks/fidelity.h)
  // TorchScript: the LibTorch releases that load the file and what was checked
  // (export/checks/libtorch_target.h, loads_in_text).
  std::string loads_in;
  std::vector<std::string> warnings;
  std::filesystem::path prior;    // --prior's checkpoint
  int64_t prior_latent_size = 0;  // the prior method's output dimensions
};

// Throws rt::Error with a message for the user: no checkpoint in the run, a checkpoint of
// another family ("export supports RAVE models") or of another config, a corrupt file, an
// invalid --latent_size or --fidelity, an `output` it must not replace (rave_export.cpp,
// check_output_target), before anything is written. The file (ONNX: the three files) is
// written beside the output first, loaded and run from there (and the fidelity check run on
// it); the output is written only then, so an error or a stop signal (StopRequested, between
// the check's blocks) leaves what was at --output as it was and no file of the export behind.
ExportReport export_rave(const ExportOptions& options);

// The report as printed by the `export` command.
std::string format_report(const ExportReport& report);

}  // namespace rt::exporting

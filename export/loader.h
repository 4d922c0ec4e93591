// A model loaded to run as a host runs it, for `generate` (its one door into export/): an exported
// TorchScript file (ours or RAVE's own), an ONNX forward graph (export --format onnx), or a run,
// a `latest` pointer or a checkpoint scripted in memory exactly as `export` writes it, so that
// what is heard is what nn~ would play.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace rt::exporting {

namespace onnx {
class Runner;
}

// forward on one block (or the whole signal offline), keeping a stream's state between calls.
using ForwardCall = std::function<torch::Tensor(const torch::Tensor&)>;

struct LoadRequest {
  std::string model;         // a run directory, a checkpoint, a `latest` pointer, a .ts or .onnx file
  bool stream = false;       // block by block through the streaming caches
  bool ema_weights = false;  // a run trained with --ema: its moving averages
  // generate --prior: a prior run or checkpoint scripted beside the RAVE (whose run is `model`, or
  // when empty the prior's model.rave), or an export made with --prior (then `model` is empty).
  std::string prior;
  // An exported file runs in the mode it was exported in (streaming or not), whatever `stream` says.
  bool file_mode = false;
};

struct LoadedModel {
  std::string description, name;  // what was loaded, in words; the default output folder's name
  int64_t sampling_rate = 0, channels = 0, ratio = 0, latency = 0;
  int64_t prior_latent_size = 0;  // the module's `prior` method's latent signals; 0: none

  // The model's forward with a fresh state (a streaming one starts from silence).
  ForwardCall start();

  std::string bytes;  // the TorchScript file, read or scripted once
  torch::jit::Module module;
  std::shared_ptr<onnx::Runner> onnx_forward;  // or an ONNX forward graph
  // A module loaded anew from `bytes`.
  torch::jit::Module fresh() const;
};

// Throws rt::Error naming --model and what it is when it cannot be loaded or run in the mode
// asked for (an offline export with `stream`, a streaming one without, an ONNX half, audio, a
// damaged file, a dangling `latest`), and with `prior` when the prior cannot be loaded, was trained
// over another RAVE latent, or the file named has no prior method.
LoadedModel load_model(const LoadRequest& request);

}  // namespace rt::exporting

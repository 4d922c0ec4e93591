// What an exported file loses against the float32 model it comes from, measured on real audio:
// the file (as written, loaded back with torch::jit::load, run as nn~ runs it: streaming files
// block by block, noise_scale 0) against the C++ model offline (posterior mean, the same latent
// crop, noise off), in SNR and in RAVE's multi-scale spectral distance. The budget compares
// the distance the file adds with the model's own reconstruction distance (model vs input):
// an optimisation that loses information is on by default only when it adds at most
// kFidelityBudget of it (export --quantize, docs/export.md).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <string>

#include "export/torchscript/rave_script.h"
#include "models/rave/rave.h"

namespace rt::exporting {

constexpr double kFidelityBudget = 0.05;

struct FidelityFigures {
  bool measured = false;
  std::string not_measured;     // why not, when !measured
  std::string audio;            // where the audio came from
  double seconds = 0.0;         // audio compared (after the stream's warm-up)
  double snr_db = 0.0;          // file vs model; +inf when they agree exactly
  double added_distance = 0.0;  // spectral distance, model → file
  double own_distance = 0.0;    // spectral distance, input → model (its reconstruction)
  double max_abs_diff = 0.0;    // max |file − model|
  // added_distance / own_distance: the share of the model's own error the file adds.
  double share() const;
  bool within_budget() const { return measured && share() <= kFidelityBudget; }
};

// `audio` [channels, samples] at the model's rate. The file must be the export of `model`
// with `options` (latent crop, streaming); `info` its ScriptInfo. The model's noise synthesis
// is switched off for the reference and restored. Throws rt::Error when the file cannot run.
FidelityFigures measure_fidelity(rave::RaveModelImpl& model, const std::filesystem::path& file,
                                 const ScriptOptions& options, const ScriptInfo& info,
                                 const torch::Tensor& audio, const std::string& audio_source);

// The same check for any exported file: `forward` runs the file's forward, deterministic
// (noise off), on (1, channels, samples): the whole signal offline, or each block in turn of a
// stream (the file keeping its state between calls).
using ForwardFn = std::function<torch::Tensor(const torch::Tensor& x)>;
FidelityFigures measure_fidelity(rave::RaveModelImpl& model, const ForwardFn& forward,
                                 const ScriptOptions& options, const ScriptInfo& info,
                                 const torch::Tensor& audio, const std::string& audio_source);

// Audio samples a streaming comparison needs to compare `seconds` after the stream's warm-up.
int64_t fidelity_samples(const ScriptInfo& info, int64_t sampling_rate, double seconds, bool streaming);

// One line: "fidelity vs the float32 model on <audio> (<s> s): SNR …, spectral distance added …
// = …% of the model's own …" or why it was not measured.
std::string format_fidelity(const FidelityFigures& f);

}  // namespace rt::exporting

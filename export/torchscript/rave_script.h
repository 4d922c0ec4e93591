// A trained RaveModel as a TorchScript module for nn~ and the RAVE VST, without Python: the
// counterpart of acids-ircam/RAVE v2.3.1 scripts/export.py (ScriptedRAVE).
//
// Layout of the module (Python: torch.jit.load; C++: torch::jit::load):
//   encode(x: (B, C, T)) -> (B, latent_size, T/ratio)   posterior sample, PCA-rotated, cropped
//   decode(z: (B, n ≤ full_latent_size, T)) -> (B, C, T·ratio)
//   forward(x) = decode(encode(x))
//   submodules pqmf (forward = analysis, inverse = synthesis), encoder, decoder
//   buffers latent_pca, latent_mean, fidelity (from the checkpoint), <method>_params
//   attributes sr, sampling_rate, n_channels, latent_size, full_latent_size, streaming,
//     encode_latency / decode_latency / forward_latency (samples; 0 unless streaming)
//   nn~ attribute noise_scale (float, 1): scales every random draw — the posterior sample of
//     encode, the unit-Gaussian fill of the cropped latent dimensions in decode (RAVE's
//     pre_process_latent), and the noise synthesis. 0 makes every method deterministic.
// Streaming (cached_conv semantics, export/graph/graph.h): state per batch slot, up to 64;
// every call's length must be a multiple of the ratio. Strided convolutions count the delay
// their input carries, so the encoder's latency is a whole number of latent frames: streaming encode then
// equals offline encode shifted by encode_latency / ratio frames, and forward the offline forward shifted by
// forward_latency samples.
#pragma once

#include <torch/script.h>

#include "export/graph/export_options.h"
#include "export/graph/graph.h"

namespace rt::exporting {

// The module of a description (export/graph/describe.h) with the writer's options (int8
// weights, the sampling rate and noise_scale attributes); `info` gets what it holds.
torch::jit::Module script_description(const graph::Rave& description, const ScriptOptions& options,
                                      ScriptInfo* info = nullptr);

// Describes the model (options.streaming, options.latent_size) and writes its module. Throws
// rt::Error when the options cannot be exported or a tensor of the model is left unaccounted.
torch::jit::Module script_rave(rave::RaveModelImpl& model, const ScriptOptions& options,
                               ScriptInfo* info = nullptr);

}  // namespace rt::exporting

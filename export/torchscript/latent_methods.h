// The TorchScript file's helper methods for the latent kinds and the mel front end, written out in
// TorchScript as RAVE's scripted modules compute them (export/torchscript/rave_script.cpp calls
// them from encode and decode).
#pragma once

#include <torch/script.h>

#include "export/graph/graph.h"

namespace rt::exporting {

// mel_features(x) and its buffers mel_window, mel_fb (model.input_mode = mel).
void define_mel_features(torch::jit::Module& top, const graph::Mel& mel);
// quantize_latent(z) and dequantize_latent(codes) with the codebooks buffer (model.encoder = discrete).
void define_codebook_methods(torch::jit::Module& top, const graph::Latent& latent);
// latent_to_angles(x) and angles_to_latent(angles) (model.encoder = spherical).
void define_angle_methods(torch::jit::Module& top);

}  // namespace rt::exporting

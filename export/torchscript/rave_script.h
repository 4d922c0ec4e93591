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
// Streaming (cached_conv semantics, export/torchscript/emit_layers.h): state per batch slot, up to 64;
// every call's length must be a multiple of the ratio. Strided convolutions count the delay
// their input carries, so the encoder's latency is a whole number of latent frames: streaming encode then
// equals offline encode shifted by encode_latency / ratio frames, and forward the offline forward shifted by
// forward_latency samples.
#pragma once

#include <torch/script.h>

#include <map>
#include <string>
#include <vector>

#include "models/rave/rave.h"
#include "util/enum_names.h"

namespace rt::exporting {

// export --quantize: none keeps every weight float32 (lossless); int8 stores the large layers'
// weights as int8 with one scale per output channel and runs them through aten's dynamic
// quantized linear (activations quantized per call), a quarter of the weight reads.
enum class Quantize { kNone, kInt8, kMaxValue = kInt8 };
constexpr EnumNames<Quantize> enum_names(Quantize) { return {{"none", "int8"}}; }

struct ScriptOptions {
  bool streaming = false;
  Quantize quantize = Quantize::kNone;
  int64_t int8_min_weights = 1 << 18;  // with kInt8: layers with at least this many weights
  int64_t latent_size = 0;             // exported latent dimensions (1 … the model's); 0 = all
  int64_t sampling_rate = 44100;
  double noise_scale = 1.0;  // initial value of the nn~ attribute
};

struct ScriptInfo {
  int64_t ratio = 0;           // audio samples per latent frame
  int64_t encode_latency = 0;  // streaming delays, audio samples
  int64_t decode_latency = 0;
  int64_t int8_layers = 0, int8_weights = 0, float_weights = 0;  // weight elements by storage
  int64_t forward_latency() const { return encode_latency + decode_latency; }
  // Model tensors with no place in the module, by reason (the discriminator, flags).
  std::map<std::string, std::vector<std::string>> dropped;
};

// What encode returns and decode takes: the PCA-cropped latent (`requested` dimensions, 0: all),
// the whole latent (wasserstein), its angles (spherical: one fewer), one code index per codebook
// (discrete). The ONNX export's too.
int64_t exported_latent_size(const rave::RaveOptions& o, int64_t requested);

// Throws rt::Error when the options cannot be exported (shared by the ONNX export, which adds
// its own limits): a spherical latent under 2 dimensions, a latent size out of range or given
// for a kind that exports its whole latent, and for streaming the mel encoder, an odd product of
// ratios with a PQMF, noise ratios that do not divide the ratios.
void check_exportable(const rave::RaveOptions& o, const ScriptOptions& s);

// Builds the module from the model's options and tensors. Every tensor of the model is used
// or dropped with a reason, else rt::Error names the ones left. Throws rt::Error when the
// options cannot be exported (e.g. streaming with an odd product of ratios and a PQMF).
torch::jit::Module script_rave(rave::RaveModelImpl& model, const ScriptOptions& options,
                               ScriptInfo* info = nullptr);

}  // namespace rt::exporting

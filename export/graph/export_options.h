// What an export is asked for and what it reports, whatever the format: shared by the writers
// (export/torchscript, export/onnx), the checks and the export command.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/rave/prior.h"
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
  int64_t channels =
      0;  // export --channels: decode's and forward's output channels (RAVE's); 0 = the model's
  int64_t sampling_rate = 44100;  // the model's
  // export --sr: the file's rate (resampled inside: RAVE's resampler at an integer multiple of
  // the model's, the rational converter otherwise); 0: the model's.
  int64_t host_rate = 0;
  double noise_scale = 1.0;  // initial value of the nn~ attribute
  // export --prior: a trained prior (models/rave/prior.h) over this RAVE's latent, written as nn~'s
  // `prior` method (TorchScript only); null: none.
  rave::VariationalPriorImpl* prior = nullptr;
};

struct ScriptInfo {
  int64_t ratio = 0;           // audio samples per latent frame
  int64_t encode_latency = 0;  // streaming delays, audio samples
  int64_t decode_latency = 0;
  int64_t int8_layers = 0, int8_weights = 0, float_weights = 0;  // weight elements by storage
  // export --sr at a rational ratio: forward's latency in host samples (encode_latency and
  // decode_latency are then the model's own, inside forward); -1 otherwise.
  int64_t rational_latency = -1;
  int64_t rational_model_delay = 0, rational_host_delay = 0;  // graph.h RationalRate's priming
  int64_t forward_latency() const {
    return rational_latency >= 0 ? rational_latency : encode_latency + decode_latency;
  }
  int64_t forward_latency_at_model_rate() const { return encode_latency + decode_latency; }
  // Model tensors with no place in the module, by reason (the discriminator, flags).
  std::map<std::string, std::vector<std::string>> dropped;
};

// What encode returns and decode takes: the PCA-cropped latent (`requested` dimensions, 0: all),
// the whole latent (wasserstein), its angles (spherical: one fewer), one code index per codebook
// (discrete).
int64_t exported_latent_size(const rave::RaveOptions& o, int64_t requested);

// Throws rt::Error when the options cannot be exported (the ONNX writer adds its own limits): a
// spherical latent under 2 dimensions, a latent size out of range or given for a kind that
// exports its whole latent, and for streaming the mel encoder, an odd product of ratios with a
// PQMF, noise ratios that do not divide the ratios.
void check_exportable(const rave::RaveOptions& o, const ScriptOptions& s);

}  // namespace rt::exporting

#include "export/graph/export_options.h"

#include <string>

#include "util/error.h"

namespace rt::exporting {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

int64_t exported_latent_size(const rave::RaveOptions& o, int64_t requested) {
  switch (o.encoder) {
    case rave::EncoderKind::kVariational:
      return requested > 0 ? requested : o.latent_size;
    case rave::EncoderKind::kSpherical:
      return o.latent_size - 1;
    case rave::EncoderKind::kDiscrete:
      return o.num_quantizers;
    default:
      return o.latent_size;
  }
}

void check_exportable(const rave::RaveOptions& o, const ScriptOptions& s) {
  if (o.encoder == rave::EncoderKind::kSpherical && o.latent_size < 2) {
    throw Error("a spherical latent needs model.latent_size >= 2 (it is exported as latent_size - 1 angles)");
  }
  if (o.encoder != rave::EncoderKind::kVariational && s.latent_size != 0 &&
      s.latent_size != exported_latent_size(o, 0)) {
    throw Error("model.encoder = " + std::string(enum_name(o.encoder)) + " exports its whole latent");
  }
  if (o.encoder == rave::EncoderKind::kVariational && (s.latent_size < 0 || s.latent_size > o.latent_size)) {
    throw Error("latent size " + str(s.latent_size) + " is outside 1 … " + str(o.latent_size) +
                " (the model's model.latent_size)");
  }
  if (!s.streaming) return;
  if (o.input_mode == rave::InputMode::kMel) {
    throw Error(
        "--streaming: the mel encoder (model.input_mode = mel) frames a centred STFT that needs "
        "future samples and carries no state between blocks; export without --streaming");
  }
  if (o.n_band > 1 && o.hop() % 2 != 0) {
    throw Error(
        "--streaming needs an even product of model.ratios with a PQMF (its band signs alternate per "
        "sample); the model's is " +
        str(o.hop()));
  }
  int64_t noise_hop = 1;
  for (auto r : o.noise_ratios) noise_hop *= r;
  if (o.noise_bands > 0 && o.hop() % noise_hop != 0) {
    throw Error("--streaming needs model.noise_ratios (product " + str(noise_hop) +
                ") to divide the product of model.ratios (" + str(o.hop()) + ")");
  }
}

}  // namespace rt::exporting

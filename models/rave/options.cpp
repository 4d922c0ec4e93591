#include "models/rave/options.h"

#include <numeric>
#include <string>

#include "util/error.h"

namespace rt::rave {

RaveOptions RaveOptions::preset(RaveVersion version) {
  RaveOptions o;  // defaults are v2.gin
  switch (version) {
    case RaveVersion::kV2:
      return o;
    case RaveVersion::kV3:
      // v3.gin = v2 + adain.gin + snake.gin + descript_discriminator.gin
      o.version = RaveVersion::kV3;
      o.activation = models::Activation::kSnake;
      o.adain = true;
      o.discriminator = DiscriminatorKind::kDescript;
      return o;
    case RaveVersion::kV1:
      o.version = RaveVersion::kV1;
      o.capacity = 64;
      o.dilations = {{1, 1}, {3, 1}, {5, 1}};  // blocks.ResidualStack dilations_list
      o.amplitude_modulation = false;
      o.noise_bands = 5;
      o.noise_ratios = {4, 4, 4};
      o.discriminator = DiscriminatorKind::kPeriodScale;
      o.periods = {};  // v1: MultiScaleDiscriminator only
      o.discriminator_capacity = 64;
      return o;
  }
  return o;
}

int64_t RaveOptions::hop() const {
  return std::accumulate(ratios.begin(), ratios.end(), int64_t{1}, std::multiplies<>());
}

namespace {

void require(bool ok, const std::string& key, const std::string& message) {
  if (!ok) throw rt::Error("model." + key + ": " + message);
}

}  // namespace

void RaveOptions::validate() const {
  require(sampling_rate >= 1, "sampling_rate", "must be >= 1");
  require(channels >= 1, "channels", "must be >= 1");
  if (version != RaveVersion::kV1) {  // v1 stacks every dilation list in each residual block
    // The generator's ratios take model.dilations; the encoder's take model.encoder_dilations
    // when set, else model.dilations too.
    const size_t generator = generator_ratios().size();
    require(dilations.size() == generator || dilations.size() == 1, "dilations",
            "needs one list per ratio (" + std::to_string(generator) + ") or a single list, got " +
                std::to_string(dilations.size()));
    const auto& enc = encoder_dilations.empty() ? dilations : encoder_dilations;
    require(enc.size() == ratios.size() || enc.size() == 1,
            encoder_dilations.empty() ? "dilations" : "encoder_dilations",
            "needs one list per encoder ratio (" + std::to_string(ratios.size()) +
                ") or a single list, got " + std::to_string(enc.size()));
  }
  {
    // The decoder must give back what the encoder took: per latent frame, hop() band samples
    // (PQMF output) or compression() audio samples (raw output).
    int64_t up = 1;
    for (int64_t r : generator_ratios()) up *= r;
    const int64_t want = output_mode == OutputMode::kRaw ? compression() : compression() / n_band;
    require(up == want, decoder_ratios.empty() ? "ratios" : "decoder_ratios",
            "the generator's ratios multiply to " + std::to_string(up) +
                ", but each latent frame stands for " + std::to_string(want) +
                (output_mode == OutputMode::kRaw ? " audio samples (model.output_mode = raw: "
                                                   "n_band × the product of model.ratios)"
                                                 : " band samples (model.n_band's bands of "
                                                   "the latent frame's audio)"));
    require(output_mode == OutputMode::kPqmf || version != RaveVersion::kV1, "output_mode",
            "raw output needs RAVE's GeneratorV2: model.version v2 or v3");
  }
  if (input_mode == InputMode::kMel) {
    require(version != RaveVersion::kV1, "input_mode",
            "the mel encoder is RAVE's EncoderV2: model.version v2 or v3");
    require(n_mels >= 1, "n_mels", "must be >= 1");
    require(mel_n_fft >= 2 && mel_hop >= 1, "mel_n_fft", "needs model.mel_n_fft >= 2 and model.mel_hop >= 1");
    require(compression() % n_band == 0, "mel_hop",
            "model.mel_hop × the product of model.ratios (" + std::to_string(compression()) +
                ") must be a multiple of model.n_band, the decoder's bands");
  }
  require(gru_layers == 0 || version != RaveVersion::kV1, "gru_layers",
          "the GRU belongs to RAVE's GeneratorV2: model.version v2 or v3");
  if (noise_bands > 0) {
    require(!noise_ratios.empty(), "noise_ratios", "must not be empty when model.noise_bands > 0");
  }
  if (encoder != EncoderKind::kVariational) {
    require(version != RaveVersion::kV1, "encoder",
            std::string(enum_name(encoder)) + " wraps RAVE's EncoderV2: it needs model.version v2 or v3");
  }
  require(
      noise_augmentation == 0 || encoder == EncoderKind::kWasserstein || encoder == EncoderKind::kDiscrete,
      "noise_augmentation",
      "noise channels are appended by RAVE's WasserteinEncoder and DiscreteEncoder only: set "
      "model.encoder = wasserstein or discrete, or model.noise_augmentation = 0");
  if (encoder == EncoderKind::kDiscrete) {
    require(num_quantizers >= 1, "num_quantizers", "must be >= 1");
    require(codebook_size >= 2, "codebook_size", "must be >= 2");
  }
  if (discriminator == DiscriminatorKind::kScaleSpectral) {
    require(!spectral_scales.empty(), "spectral_scales",
            "the spectral discriminator needs at least one STFT size");
  }
  if (discriminator == DiscriminatorKind::kDescript) {
    require(!periods.empty() || !mrd_n_ffts.empty(), "mrd_n_ffts",
            "the descript discriminator needs periods or mrd_n_ffts");
  }
}

}  // namespace rt::rave

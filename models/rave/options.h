// RAVE model options. Field names are the [model] keys of docs/config.md (plus sampling_rate,
// channels), bound to them in families/rave/rave_family.cpp, whose key specs take their defaults
// from the initialisers below; presets give acids-ircam/RAVE's v1.gin / v2.gin / v3.gin values.
#pragma once

#include <cstdint>
#include <vector>

#include "models/common/blocks.h"
#include "models/common/conv.h"
#include "util/enum_names.h"

namespace rt::rave {

// model.version: architecture and losses (configs/v1.toml, v2.toml, v3.toml).
enum class RaveVersion { kV1, kV2, kV3, kMaxValue = kV3 };
constexpr EnumNames<RaveVersion> enum_names(RaveVersion) { return {{"v1", "v2", "v3"}}; }

// model.discriminator: none, RAVE's Combine[MultiPeriod, MultiScale] (v1, v2), or the
// descript discriminator (MPD + MRD, v3).
// scale_spectral: spectral_discriminator.gin's Combine[MultiScale, MultiScaleSpectral] (EnCodec's
// STFT discriminator, spectral_scales, spectral_capacity).
enum class DiscriminatorKind { kNone, kPeriodScale, kDescript, kScaleSpectral, kMaxValue = kScaleSpectral };
constexpr EnumNames<DiscriminatorKind> enum_names(DiscriminatorKind) {
  return {{"none", "period_scale", "descript", "scale_spectral"}};
}

// model.encoder: the latent regularisation, RAVE's encoder wrapper (rave/blocks.py):
// VariationalEncoder (ELBO, v1/v2 default), WasserteinEncoder (wasserstein.gin: MMD against a
// standard normal, optional noise channels for the decoder), SphericalEncoder (spherical.gin: the
// latent projected on the unit sphere, no regularisation, not frozen in phase 2), DiscreteEncoder
// (discrete.gin: residual vector quantisation, models/rave/quantization.h; commitment loss, noise
// channels for the decoder, not frozen in phase 2).
enum class EncoderKind { kVariational, kWasserstein, kSpherical, kDiscrete, kMaxValue = kDiscrete };
constexpr EnumNames<EncoderKind> enum_names(EncoderKind) {
  return {{"variational", "wasserstein", "spherical", "discrete"}};
}

// model.output_mode: what the decoder makes (RAVE's output_mode): PQMF bands that the synthesis
// filter bank turns into audio (v1, v2, v3), or the audio itself (v2_nopqmf.gin: "raw"; the
// multiband distance then analyses the decoder's output).
enum class OutputMode { kPqmf, kRaw, kMaxValue = kRaw };
constexpr EnumNames<OutputMode> enum_names(OutputMode) { return {{"pqmf", "raw"}}; }

// model.input_mode: what the encoder reads (RAVE's input_mode): the PQMF bands of the audio, or
// (hybrid.gin: "mel") the log1p of its mel spectrogram (torchaudio's MelSpectrogram, models/rave/mel.h).
enum class InputMode { kPqmf, kMel, kMaxValue = kMel };
constexpr EnumNames<InputMode> enum_names(InputMode) { return {{"pqmf", "mel"}}; }

struct RaveOptions {
  RaveVersion version = RaveVersion::kV2;
  int64_t sampling_rate = 44100;
  int64_t channels = 1;  // audio channels (RAVE n_channels); folded into the batch by PQMF
  int64_t capacity = 96;
  int64_t latent_size = 128;
  int64_t n_band = 16;
  std::vector<int64_t> ratios{4, 4, 4, 2};
  // The generator's own ratios when they differ from the encoder's (v2_nopqmf.gin: 8 8 8 4, the
  // raw output's whole compression); empty: model.ratios.
  std::vector<int64_t> decoder_ratios{};
  OutputMode output_mode = OutputMode::kPqmf;
  InputMode input_mode = InputMode::kPqmf;
  // hybrid.gin's mel front end (N_MELS, N_FFT = window, HOP_LENGTH) and its encoder's own
  // dilations (blocks.EncoderV2.dilations = [1]; empty: model.dilations).
  int64_t n_mels = 128;
  int64_t mel_n_fft = 2048;
  int64_t mel_hop = 256;
  std::vector<std::vector<int64_t>> encoder_dilations{};
  // blocks.GRU layers before the generator's first convolution (hybrid.gin: 2); 0 = none.
  int64_t gru_layers = 0;
  std::vector<std::vector<int64_t>> dilations{{1, 3, 9}, {1, 3, 9}, {1, 3, 9}, {1, 3}};
  int64_t kernel_size = 3;
  models::Activation activation = models::Activation::kLeakyRelu;
  models::PaddingMode padding = models::PaddingMode::kCentered;  // also the PQMF's, as in causal.gin
  bool amplitude_modulation = true;
  // Noise synthesis: v1 blocks.NoiseGenerator (noise_ratios, noise_bands); for v2/v3 a value
  // > 0 adds blocks.NoiseGeneratorV2 (hidden 128). 0 = off.
  int64_t noise_bands = 0;
  std::vector<int64_t> noise_ratios{4, 4, 4};
  int64_t noise_hidden = 128;  // NoiseGeneratorV2 hidden_size (noise.gin 128, v2_small.gin 64); v2/v3 only
  EncoderKind encoder = EncoderKind::kVariational;
  // Standard normal channels appended to the latent before the decoder (RAVE's
  // NOISE_AUGMENTATION, get_augmented_latent_size; wasserstein.gin and discrete.gin: 128).
  // Wasserstein and discrete encoders only.
  int64_t noise_augmentation = 0;
  // discrete.gin: ResidualVectorQuantization's NUM_QUANTIZERS codebooks of CODEBOOK_SIZE codes.
  int64_t num_quantizers = 16;
  int64_t codebook_size = 1024;
  bool adain = false;  // v3 adain.gin: AdaIN before each residual unit (identity in training)
  DiscriminatorKind discriminator = DiscriminatorKind::kPeriodScale;
  // ConvNet width of the period/scale discriminators. RAVE binds it to CAPACITY (96 in v2,
  // 64 in v1): that is what v2's discriminator count of 27,130,952 parameters requires.
  int64_t discriminator_capacity = 96;
  int64_t discriminator_n_layers = 4;
  std::vector<int64_t> periods{2, 3, 5, 7, 11};  // empty: scales only (v1)
  int64_t n_scales = 3;
  std::vector<int64_t> mrd_n_ffts{2048, 1024, 512};
  // spectral_discriminator.gin: MultiScaleSpectralDiscriminator scales and EncodecConvNet capacity.
  std::vector<int64_t> spectral_scales{4096, 2048, 1024, 512, 256};
  int64_t spectral_capacity = 32;
  std::vector<int64_t> stft_scales{2048, 1024, 512, 256, 128};  // spectral distance

  // v1 | v2 | v3 as in RAVE's gin configs (configs/v1.toml … v3.toml hold the same values).
  static RaveOptions preset(RaveVersion version);
  // The checks across fields (ranges of single keys are in their key specs): dilations per
  // ratio, noise ratios when noise bands are on, what the descript discriminator needs.
  // Throws rt::Error naming the `model.<key>` at fault and what is accepted.
  void validate() const;
  // Product of ratios (samples of a band per latent frame), and n_band × that.
  int64_t hop() const;
  // The generator's ratios (decoder_ratios, else ratios), encoder order.
  const std::vector<int64_t>& generator_ratios() const {
    return decoder_ratios.empty() ? ratios : decoder_ratios;
  }
  // Audio samples per latent frame: the encoder's input rate (n_band, or the mel hop) × hop().
  int64_t compression() const { return hop() * (input_mode == InputMode::kMel ? mel_hop : n_band); }
  // The encoder's input channels per audio channel: bands or mel bins.
  int64_t encoder_input_size() const { return input_mode == InputMode::kMel ? n_mels : n_band; }
};

}  // namespace rt::rave

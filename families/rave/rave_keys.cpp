#include "families/rave/rave_keys.h"

#include <algorithm>
#include <cmath>

#include "config/config.h"
#include "data/augment.h"
#include "util/error.h"

namespace rt {

const OptionsTable<rave::RaveOptions>& rave_model_keys() {
  using keys::Field;
  using rave::RaveOptions;
  // Defaults: the RaveOptions initialisers (acids-ircam/RAVE configs/v1.gin + v2.gin).
  static const OptionsTable<RaveOptions> table = {
      {&RaveOptions::version,
       Field("model.version", "RAVE version (architecture and losses)").defines_architecture()},
      {&RaveOptions::capacity,
       Field("model.capacity", "RAVE channel capacity (base width of encoder/decoder)")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::latent_size,
       Field("model.latent_size", "RAVE latent dimensions").ge(1).defines_architecture()},
      {&RaveOptions::n_band,
       Field("model.n_band", "PQMF bands").one_of({1, 2, 4, 8, 16, 32, 64}).defines_architecture()},
      {&RaveOptions::ratios, Field("model.ratios", "RAVE up/downsampling ratio per block")
                                 .ge(1)
                                 .not_empty()
                                 .defines_architecture()},
      {&RaveOptions::decoder_ratios,
       Field(
           "model.decoder_ratios",
           "the generator's upsampling ratios when they differ from model.ratios (v2_nopqmf.gin: 8 8 8 4 for "
           "raw output); empty: model.ratios")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::output_mode,
       Field("model.output_mode",
             "what the decoder makes: pqmf (bands, then the synthesis filter bank) or raw (the audio itself, "
             "v2_nopqmf.gin; RAVE's output_mode)")
           .defines_architecture()},
      {&RaveOptions::input_mode, Field("model.input_mode",
                                       "what the encoder reads: pqmf (the audio's bands) or mel (log1p mel "
                                       "spectrogram, hybrid.gin; RAVE's "
                                       "input_mode)")
                                     .defines_architecture()},
      {&RaveOptions::n_mels,
       Field("model.n_mels", "mel bins of the mel encoder (hybrid.gin N_MELS)").ge(1).defines_architecture()},
      {&RaveOptions::mel_n_fft,
       Field("model.mel_n_fft", "FFT size and window of the mel encoder's STFT (hybrid.gin N_FFT)")
           .ge(2)
           .defines_architecture()},
      {&RaveOptions::mel_hop, Field("model.mel_hop", "hop of the mel encoder's STFT (hybrid.gin HOP_LENGTH)")
                                  .ge(1)
                                  .defines_architecture()},
      {&RaveOptions::encoder_dilations,
       Field("model.encoder_dilations",
             "the encoder's own residual dilations per block (hybrid.gin: [[1]]); empty: model.dilations")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::gru_layers, Field("model.gru_layers",
                                       "layers of the GRU before the generator's first convolution "
                                       "(hybrid.gin NUM_GRU_LAYERS: 2); 0 = none")
                                     .ge(0)
                                     .defines_architecture()},
      {&RaveOptions::dilations, Field("model.dilations", "RAVE residual dilations per block")
                                    .ge(1)
                                    .not_empty()
                                    .defines_architecture()},
      {&RaveOptions::kernel_size,
       Field("model.kernel_size", "RAVE convolution kernel size").ge(1).is_odd().defines_architecture()},
      {&RaveOptions::activation,
       Field(
           "model.activation",
           "RAVE activation between stages (v3: snake); the dilated units keep LeakyReLU(0.2), as RAVE's do")
           .defines_architecture()},
      {&RaveOptions::padding, Field("model.padding", "convolution padding mode").defines_architecture()},
      {&RaveOptions::amplitude_modulation,
       Field("model.amplitude_modulation", "RAVE generator amplitude modulation").defines_architecture()},
      {&RaveOptions::adain,
       Field("model.adain", "AdaIN after encoder convs (v3; identity in training, shifts layer names)")
           .defines_architecture()},
      {&RaveOptions::noise_bands,
       Field("model.noise_bands",
             "noise generator bands: v1's NoiseGenerator, or for v2/v3 NoiseGeneratorV2 (0 = off; v1: 5)")
           .ge(0)
           .defines_architecture()},
      {&RaveOptions::noise_ratios,
       Field("model.noise_ratios", "noise generator downsampling ratios").ge(1).defines_architecture()},
      {&RaveOptions::noise_hidden,
       Field("model.noise_hidden", "v2/v3 noise generator (NoiseGeneratorV2) hidden width (noise.gin: 128)")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::discriminator,
       Field("model.discriminator", "discriminator (v3: descript)").defines_architecture()},
      {&RaveOptions::spectral_scales,
       Field("model.spectral_scales",
             "STFT sizes of the spectral discriminator (model.discriminator = scale_spectral; "
             "spectral_discriminator.gin)")
           .ge(2)
           .defines_architecture()},
      {&RaveOptions::spectral_capacity,
       Field("model.spectral_capacity", "channels of each EncodecConvNet of the spectral discriminator")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::encoder,
       Field(
           "model.encoder",
           "latent regularisation: variational (ELBO), wasserstein (MMD, wasserstein.toml), spherical (unit "
           "sphere, spherical.toml), discrete (residual vector quantisation, discrete.toml); RAVE's encoder "
           "wrappers")
           .defines_architecture()},
      {&RaveOptions::noise_augmentation,
       Field("model.noise_augmentation",
             "standard normal channels appended to the latent before the decoder (RAVE's NOISE_AUGMENTATION; "
             "wasserstein and discrete encoders)")
           .ge(0)
           .defines_architecture()},
      {&RaveOptions::num_quantizers, Field("model.num_quantizers",
                                           "codebooks of the discrete encoder's residual vector quantisation "
                                           "(discrete.gin NUM_QUANTIZERS); the "
                                           "exported latent has one index channel per codebook")
                                         .ge(1)
                                         .defines_architecture()},
      {&RaveOptions::codebook_size,
       Field("model.codebook_size", "codes per codebook of the discrete encoder (discrete.gin CODEBOOK_SIZE)")
           .ge(2)
           .defines_architecture()},
      {&RaveOptions::discriminator_capacity,
       Field("model.discriminator_capacity", "discriminator base channels (RAVE ties it to capacity)")
           .ge(1)
           .defines_architecture()},
      {&RaveOptions::discriminator_n_layers,
       Field("model.discriminator_n_layers", "discriminator layers").ge(1).defines_architecture()},
      {&RaveOptions::periods,
       Field("model.periods", "multi-period discriminator periods").ge(1).defines_architecture()},
      {&RaveOptions::n_scales,
       Field("model.n_scales", "multi-scale discriminator scales").ge(1).defines_architecture()},
      {&RaveOptions::mrd_n_ffts, Field("model.mrd_n_ffts", "multi-resolution discriminator FFT sizes")
                                     .ge(16)
                                     .multiple_of(4)
                                     .defines_architecture()},
      // A loss setting: no part of the architecture signature.
      {&RaveOptions::stft_scales,
       Field("model.stft_scales", "multiscale spectral distance scales").ge(4).multiple_of(4).not_empty()},
  };
  return table;
}

rave::RaveOptions rave_options_from(const Config& config) { return rave_model_keys().from(config); }

const OptionsTable<RaveTrainOptions>& rave_train_keys() {
  using keys::Field;
  using T = RaveTrainOptions;
  static const OptionsTable<T> table = {
      {&T::phase_1_duration,
       Field("train.phase_1_duration", "RAVE: steps of phase 1 (representation learning)").ge(0)},
      {&T::update_discriminator_every,
       Field("train.update_discriminator_every", "RAVE: discriminator update period").ge(1)},
      {&T::beta_start, Field("train.beta_start", "RAVE: KL weight at step 0").gt(0)},
      {&T::beta_end, Field("train.beta_end", "RAVE: KL weight after warmup").gt(0)},
      {&T::beta_warmup_steps, Field("train.beta_warmup_steps", "RAVE: KL weight warmup steps").ge(0)},
      {&T::adam_beta1, Field("train.adam_beta1", "Adam beta1").ge(0).lt(1)},
      {&T::adam_beta2, Field("train.adam_beta2", "Adam beta2").ge(0).lt(1)},
      {&T::lr_end_factor, Field("train.lr_end_factor", "RAVE: LinearLR end factor over phase 1").gt(0).le(1)},
      {&T::discriminator_lr, Field("train.discriminator_lr", "RAVE: discriminator learning rate").gt(0)},
      {&T::warmup_quantize,
       Field("train.warmup_quantize",
             "the discrete encoder quantises from this step on (RAVE's warmup_quantize; discrete.gin's -1 "
             "means from the first step). RAVE 2.3.1's QuantizeCallback never runs, so RAVE itself never "
             "quantises: docs/rave_fidelity.md")
           .ge(0)},
      {&T::ema,
       Field("train.ema",
             "RAVE's --ema: exponential moving average of every parameter with this factor (e.g. "
             "0.999), used for validation, kept in checkpoints, exported by export --ema_weights; 0 = "
             "off")
           .ge(0)
           .lt(1)
           .cli("ema")},
      {&T::lr, "train.lr"},
      {&T::fused_optimizer, "train.fused_optimizer"},
      {&T::batch_norm, "train.distributed.batch_norm"},
  };
  return table;
}

const OptionsTable<rave::RaveLossOptions>& rave_loss_keys() {
  using keys::Field;
  using L = rave::RaveLossOptions;
  // Defaults: the RaveLossOptions initialisers (v2.gin); the version's preset is the base the
  // keys are read over (rave_loss_options_from).
  static const OptionsTable<L> table = {
      {&L::feature_matching_weight, Field("train.feature_matching_weight",
                                          "RAVE: feature matching loss weight (weights['feature_matching'])")
                                        .ge(0)},
      {&L::feature_matching_weight_twice,
       Field(
           "train.feature_matching_weight_twice",
           "RAVE: apply the feature matching weight twice, as RAVE's training_step does (effective weight²: "
           "400 for v2's 20); false applies it once")},
      {&L::valid_signal_crop, Field("train.valid_signal_crop",
                                    "RAVE: crop both multiband signals to the receptive field before the "
                                    "multiband distance (v2/v3 valid_signal_crop; v1: false)")},
      {&L::fullband_distance_weight, Field("train.fullband_distance_weight",
                                           "RAVE: weights['fullband_spectral_distance'] (wasserstein.gin: 2)")
                                         .ge(0)},
      {&L::multiband_distance_weight,
       Field("train.multiband_distance_weight",
             "RAVE: weights['multiband_spectral_distance'] (wasserstein.gin: 2)")
           .ge(0)},
      {&L::adversarial_weight,
       Field("train.adversarial_weight",
             "RAVE: weights['adversarial'] (wasserstein.gin: 2), applied twice as RAVE's training_step does "
             "when train.feature_matching_weight_twice")
           .ge(0)},
      {&L::log_epsilon, Field("train.log_epsilon",
                              "RAVE: AudioDistanceV1.log_epsilon, inside the spectral distance's "
                              "log-magnitude term (discrete.gin: 1)")
                            .gt(0)},
      {&L::num_skipped_features,
       keys::I("train.num_skipped_features", -1,
               "RAVE: num_skipped_features, the first feature maps of each discriminator scale left out of "
               "feature matching (-1: the version's, v1 0, v2/v3 1; discrete.gin: 0)")
           .ge(-1),
       [](const Config& c, const std::string& key, int64_t* field) {
         if (const int64_t n = c.get_int(key); n >= 0) *field = n;  // -1 keeps the preset's
       }},
      {&L::stft_scales, "model.stft_scales"},
  };
  return table;
}

rave::RaveLossOptions rave_loss_options_from(const Config& config) {
  return rave_loss_keys().from(config, rave::RaveLossOptions::preset(rave_options_from(config).version));
}

const OptionsTable<AudioDatasetOptions>& rave_data_keys() {
  using A = AudioDatasetOptions;
  static const OptionsTable<A> table = {
      {&A::n_signal, "data.n_signal"},
      {&A::channels, "data.channels"},
      {&A::phase_mangle, "data.phase_mangle"},
      {&A::phase_mangle_p, "data.phase_mangle_p"},
      {&A::dequantize, "data.dequantize"},
      {&A::slowdown_ms, "data.slowdown_ms"},
      {&A::rand_pitch, "data.rand_pitch"},
      {&A::normalize, "data.normalize"},
      {&A::derivative, "data.derivative"},
      // Refused with where the names came from (--augment NAME appends one).
      {&A::augmentations, "data.augment",
       [](const Config& c, const std::string& key, std::vector<Augmentation>* field) {
         const std::string origin = c.origin(key);
         *field =
             parse_augmentations(c.get_string(key), origin == "default" ? key : key + " (" + origin + ")");
       }},
  };
  return table;
}

double rave_beta_at(int64_t step, double beta_start, double beta_end, int64_t warmup_steps) {
  // BetaWarmupCallback counts the batch before it computes: batch k sees (k + 1) / warmup_len.
  if (warmup_steps <= 0 || step + 1 >= warmup_steps) return beta_end;
  const double t = static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  return std::exp(std::log(beta_start) + t * (std::log(beta_end) - std::log(beta_start)));
}

double rave_lr_factor_at(int64_t step, double end_factor, int64_t total) {
  if (total <= 0) return end_factor;
  const double t = std::min<double>(1.0, static_cast<double>(step) / static_cast<double>(total));
  return 1.0 + (end_factor - 1.0) * t;
}

}  // namespace rt

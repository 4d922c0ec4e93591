// RAVE decoders (acids-ircam/RAVE rave/blocks.py). Keys mirror RAVE, e.g. v2
// `decoder.net.0.weight_g`, `decoder.net.2.weight_v` (the first ConvTranspose1d),
// v1 `decoder.synth.branches.0.weight_g` (waveform), `decoder.synth.branches.2.net.0.weight`
// (noise generator).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "models/common/blocks.h"
#include "models/rave/options.h"

namespace rt::rave {

// Latent (B, latent_size, T') → multiband audio (B, n_band·channels, T'·hop).
struct DecoderBase : torch::nn::Module {
  virtual torch::Tensor forward(const torch::Tensor& z) = 0;
  // Phase 2 switch (v1: the noise branch is added only once warmed up).
  virtual void set_warmed_up(bool) {}
};

// RAVE mod_sigmoid: 2·sigmoid(x)^2.3 + 1e-7.
torch::Tensor mod_sigmoid(const torch::Tensor& x);

// Filtered-noise synthesis shared by both noise generators: per frame, `amp` (…, n_bins)
// magnitude responses become windowed, zero-phase impulse responses of `target_size` taps
// (RAVE amp_to_impulse_response) that filter uniform noise (fft_convolve).
torch::Tensor amp_to_impulse_response(const torch::Tensor& amp, int64_t target_size);
torch::Tensor fft_convolve(const torch::Tensor& signal, const torch::Tensor& kernel);

// blocks.NoiseGenerator (v1) and blocks.NoiseGeneratorV2 (v2 noise.gin): strided convs to
// data_size·noise_bands channels per ∏ratios samples, then filtered noise
// (B, data_size, T). Convs without weight norm or bias. `net.<i>.weight`, buffer `target_size`.
struct NoiseGeneratorImpl : torch::nn::Module {
  NoiseGeneratorImpl(int64_t in_size, int64_t hidden_size, int64_t data_size,
                     const std::vector<int64_t>& ratios, int64_t noise_bands, bool v2, models::Activation act,
                     models::PaddingMode mode);
  torch::Tensor forward(const torch::Tensor& x);
  models::Seq net;
  torch::Tensor target_size;
  int64_t data_size, hop;
  // Scales the uniform noise before filtering (1: RAVE's training; 0: silent, what an export's
  // noise_scale attribute does, so that a test can compare deterministic outputs).
  double noise_scale = 1.0;
  // Where the uniform noise comes from when set: called with the impulse responses, returns
  // uniform [0, 1) draws of their shape (a replay of the real RAVE's draws, as the golden step
  // tests feed them). Unset: models::batch_rand_like.
  std::function<torch::Tensor(const torch::Tensor& like)> noise_source;
};
TORCH_MODULE(NoiseGenerator);

// blocks.GRU (hybrid.gin's recurrent_layer): a batch-first torch GRU over the latent frames,
// `gru.weight_ih_l<k>`…, and the buffer `gru_state` (RAVE keeps it, unused). RAVE disables it
// while it measures the receptive field (core.get_rave_receptive_field); set_enabled does that.
struct GruLayerImpl : torch::nn::Module {
  GruLayerImpl(int64_t latent_size, int64_t num_layers);
  torch::Tensor forward(const torch::Tensor& x);  // (B, L, T) → (B, L, T)
  void set_enabled(bool state) { enabled = state; }
  torch::nn::GRU gru{nullptr};
  bool enabled = true;
};
TORCH_MODULE(GruLayer);

// blocks.GeneratorV2: WNConv(latent, 2^n·capacity, kernel) → per reversed ratio r: act,
// WNConvTranspose(C, C/2, 2r, stride r, padding r/2), [AdaIN] Residual(DilatedUnit(d)) for the
// reversed dilations → act → WNConv(capacity, n_band·(2 if amplitude modulation), 2·kernel+1).
// `act` is model.activation; the units' own are LeakyReLU(0.2), as RAVE builds them
// (models::kRaveUnitActivation).
// Output tanh(x·sigmoid(a)) with amplitude modulation (plus filtered noise when noise_bands>0).
struct GeneratorV2Impl : DecoderBase {
  explicit GeneratorV2Impl(const RaveOptions& o);
  torch::Tensor forward(const torch::Tensor& z) override;
  models::Seq net;
  models::WNConv1d waveform_module{nullptr};  // only with a noise module (RAVE layout)
  NoiseGenerator noise_module{nullptr};
  bool amplitude_modulation;
};

// blocks.Generator (v1.gin): WNConv(latent, 2^n·capacity, 7) → per ratio: UpsampleLayer
// (`net` = [act, WNConvTranspose]) and ResidualStack (kernel_size, `dilations` as the ResidualLayers' lists:
// v1 [[1,1],[3,1],[5,1]]) → synth branches [waveform WNConv k7, loudness WNConv k3, noise]. Output
// tanh(wave)·mod_sigmoid(loudness) (+ noise once warmed up).
struct GeneratorV1Impl : DecoderBase {
  explicit GeneratorV1Impl(const RaveOptions& o);
  torch::Tensor forward(const torch::Tensor& z) override;
  void set_warmed_up(bool state) override;
  models::Seq net;
  models::Branches synth{nullptr};
  torch::Tensor warmed_up_;
  bool warm_ = false, use_noise;
};

}  // namespace rt::rave

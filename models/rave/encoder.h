// RAVE encoders (acids-ircam/RAVE rave/blocks.py). Keys mirror RAVE: the variational wrapper
// holds the network as `encoder`, whose layers are `net.<i>` — e.g. for v2
// `encoder.encoder.net.0.weight_g`, `encoder.encoder.net.1.aligned.branches.0.net.1.weight_v`.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <utility>

#include "models/common/blocks.h"
#include "models/rave/options.h"
#include "models/rave/quantization.h"

namespace rt::rave {

// Multiband audio (B, n_band·channels, T) → raw latent statistics (B, 2·latent_size, T/hop).
struct EncoderBase : torch::nn::Module {
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

// blocks.EncoderV2: WNConv(k=2·kernel+1) → per ratio r: [AdaIN] Residual(DilatedUnit(d)) for
// each dilation, act, WNConv(C, 2C, 2r, stride r) → act → WNConv(2^n·capacity, 2·latent, kernel).
// `act` is model.activation; the units' own are LeakyReLU(0.2), as RAVE builds them
// (models::kRaveUnitActivation).
struct EncoderV2Impl : EncoderBase {
  explicit EncoderV2Impl(const RaveOptions& o);
  torch::Tensor forward(const torch::Tensor& x) override { return net->forward(x); }
  models::Seq net;
};

// blocks.Encoder (v1.gin): plain convs (no weight norm, no bias) with BatchNorm1d + LeakyReLU
// before each strided conv (kernel 2r+1), final grouped conv (k5, groups 2).
struct EncoderV1Impl : EncoderBase {
  explicit EncoderV1Impl(const RaveOptions& o);
  torch::Tensor forward(const torch::Tensor& x) override { return net->forward(x); }
  models::Seq net;
};

// The encoder wrapper, named as RAVE's (`encoder.encoder.…`); by model.encoder one of
// blocks.VariationalEncoder, WasserteinEncoder, SphericalEncoder or DiscreteEncoder (which adds
// `encoder.rvq.…` and the buffer `encoder.enabled`). Variational: mean/scale halves,
// std = softplus(scale) + 1e-4, kl = (μ² + σ² − log σ² − 1).sum(1).mean() (no ½, as RAVE).
// After set_warmed_up(true) (phase 2) the variational and wasserstein encoders' output is
// detached, freezing them; the spherical and discrete ones train on, as RAVE's.
struct VariationalEncoderImpl : torch::nn::Module {
  explicit VariationalEncoderImpl(const RaveOptions& o);
  torch::Tensor forward(const torch::Tensor& x);  // raw statistics (B, n_out·L, T')
  // (z, regularisation) for the encoder kind (model.encoder):
  //   variational  z = μ + σ·noise, KL. `noise`: draws shaped like μ.
  //   wasserstein  z = the statistics (+ `augmentation`: (B, noise_augmentation, T') standard
  //                normal channels), MMD against `noise`: draws shaped (B·T', L).
  //   spherical    z / ‖z‖₂, 0.
  //   discrete     once quantising (set_quantizing): z = the residual vector quantisation of the
  //                statistics (training it in train mode), the summed commitment losses; before:
  //                the statistics, 0. Then `augmentation`'s noise channels, as wasserstein's.
  // Undefined draws come from torch's generator (given draws make a step independent of RNG
  // streams, as the golden tests need). REQUIRES (variational): stats.size(1) even.
  std::pair<torch::Tensor, torch::Tensor> reparametrize(const torch::Tensor& stats,
                                                        const torch::Tensor& noise = {},
                                                        const torch::Tensor& augmentation = {});
  EncoderKind kind = EncoderKind::kVariational;
  int64_t noise_augmentation = 0;
  void set_warmed_up(bool state);
  bool warmed_up() const;
  // Whether the encoder is frozen in phase 2 (variational, wasserstein).
  bool frozen_in_phase_2() const {
    return kind == EncoderKind::kVariational || kind == EncoderKind::kWasserstein;
  }
  // The discrete encoder's `enabled` buffer: RAVE's QuantizeCallback sets it from batch
  // warmup_quantize on (discrete.gin: -1, the first). Reads the buffer (a checkpoint's value).
  void set_quantizing(bool state);
  bool quantizing() const;
  ResidualVectorQuantization rvq{nullptr};  // discrete only
  // Where reparametrize's draws come from when it is given none: by default torch's generator
  // (models::batch_randn_like); set, it is called with the latent mean and returns standard
  // normal draws of its shape (a replay of another implementation's draws, as the golden
  // trajectory test feeds RAVE's).
  std::function<torch::Tensor(const torch::Tensor& mean)> noise_source;
  std::shared_ptr<EncoderBase> encoder;
  torch::Tensor warmed_up_;  // buffer "warmed_up", as RAVE (kept in step with warm_)
  torch::Tensor enabled_;    // buffer "enabled" (discrete)
  bool warm_ = false;        // host copy, so forward needs no device sync
};
TORCH_MODULE(VariationalEncoder);

}  // namespace rt::rave

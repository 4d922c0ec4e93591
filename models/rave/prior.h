// RAVE's prior (acids-ircam/RAVE v2.3.1 rave/prior/): an autoregressive model of a trained RAVE's
// latent trajectories, from which nn~ and `generate` draw new ones.
//
//   VariationalPrior (model.py)  the frozen RAVE's posterior sample (its reparametrisation), minus
//                                latent_mean, rotated by latent_pca and cropped to the prior's
//                                latent_size (a power of two: Prior.__init__ rounds it up);
//   DiagonalShift (core.py)      the latent's D dimensions staggered along time: dimension d
//                                advanced by D−1−d frames (frame t holds dimension 0 of frame
//                                t+D−1 … dimension D−1 of frame t);
//   QuantizedNormal (core.py)    each value mapped through the normal CDF to `resolution` bins,
//                                one-hot, stacked as channel d·resolution + bin;
//   the network (model.py)       a causal WaveNet: pre_net (grouped causal conv + LeakyReLU .2),
//                                n_layers gated residual blocks (residual_block.py: dilated causal
//                                conv to 2·res_size, sigmoid·tanh, 1×1 residual and skip convs;
//                                dilation 2^(i mod cycle_size)), post_net on the skip sum
//                                (1×1 conv, LeakyReLU .2, grouped 1×1 conv to D·resolution logits);
//   the loss (training_step)     cross-entropy of frame t's logits against frame t+1's bins.
//
// Module and parameter names are RAVE's (pre_net.0, residuals.<i>.dconv/rconv/sconv, post_net.0,
// post_net.2), so RAVE's prior state dict loads as it is.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace rt::rave {

struct RaveModelImpl;

// prior_v1.gin's values.
struct PriorOptions {
  int64_t resolution = 32;
  int64_t res_size = 512;
  int64_t skp_size = 256;
  int64_t kernel_size = 3;
  int64_t cycle_size = 4;
  int64_t n_layers = 10;
  int64_t latent_size = 8;  // the prior's dimensions: a power of two (prior_latent_size)
  // Throws rt::Error naming the field when a value is out of range.
  void validate() const;
};

// Prior.__init__'s rounding: 2^ceil(log2(n)).
int64_t prior_latent_size(int64_t n);

// RAVE's count of the frames one logit sees (model.py:71, which sizes its training examples
// from it): (kernel_size − 1) · Σ dilations + 1. The pre_net's kernel reaches kernel_size − 1
// frames further back.
int64_t prior_receptive_field(const PriorOptions& options);

struct PriorResidualBlockImpl : torch::nn::Module {
  PriorResidualBlockImpl(int64_t res_size, int64_t skp_size, int64_t kernel_size, int64_t dilation);
  // (residual, skip) → (residual + rconv(gated), skip + sconv(gated)).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& skip);

  torch::nn::Conv1d dconv{nullptr}, rconv{nullptr}, sconv{nullptr};
  int64_t pad = 0;  // (kernel_size − 1) · dilation samples of causal padding
};
TORCH_MODULE(PriorResidualBlock);

struct VariationalPriorImpl : torch::nn::Module {
  explicit VariationalPriorImpl(PriorOptions options);
  // One-hot stacked input (B, D·resolution, T) → logits (B, D·resolution, T); causal: logits at t
  // depend on frames ≤ t only.
  torch::Tensor forward(const torch::Tensor& x);
  const PriorOptions& options() const { return options_; }
  int64_t receptive_field() const;  // prior_receptive_field(options())

  torch::nn::Sequential pre_net{nullptr}, post_net{nullptr};
  torch::nn::ModuleList residuals{nullptr};

 private:
  PriorOptions options_;
  int64_t pre_pad_ = 0;
};
TORCH_MODULE(VariationalPrior);

// QuantizedNormal.encode: (B, D, T) normal values → (B, D·resolution, T) one-hot of their bins
// floor(Φ(x)·resolution) clamped to [0, resolution).
torch::Tensor quantized_normal_encode(const torch::Tensor& z, int64_t resolution);
// (B, D·resolution, T) one-hot or logits → (B, D, T, resolution) (Prior.split_classes).
torch::Tensor split_classes(const torch::Tensor& x, int64_t latent_size);
// Bins (B, D, T) → (B, D·resolution, T) one-hot (QuantizedNormal.to_stack_one_hot).
torch::Tensor stack_one_hot(const torch::Tensor& bins, int64_t resolution);
// QuantizedNormal.decode: one-hot or logits (B, D·resolution, T) → normal values (B, D, T): the
// argmax bin's lower edge plus `dither` (uniform in [0, 1/resolution), drawn when undefined),
// through Φ⁻¹, clamped to ±4.
torch::Tensor quantized_normal_decode(const torch::Tensor& x, int64_t resolution,
                                      const torch::Tensor& dither = {});

// DiagonalShift.forward: (B, D, T) → (B, D, T − D + 1), dimension d cut to frames
// [D − 1 − d, T − d).
torch::Tensor diagonal_shift(const torch::Tensor& z);
// DiagonalShift.inverse.
torch::Tensor diagonal_shift_inverse(const torch::Tensor& z);

// VariationalPrior.post_process_latent of Prior.encode: the RAVE's posterior sample for audio
// `x` (its reparametrisation with `noise`, drawn when undefined), minus latent_mean, rotated by
// latent_pca, cropped to `latent_size` dimensions. No gradient flows into the RAVE.
torch::Tensor prior_latent(RaveModelImpl& rave, const torch::Tensor& x, int64_t latent_size,
                           const torch::Tensor& noise = {});

// VariationalPrior.pre_process_latent: the inverse rotation of `z` (B, latent_size, T), the
// missing dimensions filled with `noise` (standard normal, drawn when undefined), plus
// latent_mean: what the RAVE's decoder takes.
torch::Tensor prior_to_rave_latent(RaveModelImpl& rave, const torch::Tensor& z,
                                   const torch::Tensor& noise = {});

// Prior.generate: from the first frame of `start` (B, D·resolution, T), each next frame the
// prediction from the frames before it, as a one-hot: the most likely bin (`argmax`) or a draw
// from the softmax of the logits (RAVE's multinomial). Returns the T frames; `start`'s later
// frames are not read.
torch::Tensor prior_generate(VariationalPriorImpl& prior, const torch::Tensor& start, bool argmax);

// Prior.training_step's loss on a latent (B, D, T): shift, quantise, predict, cross-entropy of
// each frame's logits against the next frame's bins (mean over every dimension and frame).
struct PriorLoss {
  torch::Tensor loss;
  torch::Tensor one_hot;  // the network's input (B, D·resolution, T − D + 1)
};
PriorLoss prior_loss(VariationalPriorImpl& prior, const torch::Tensor& latent);

}  // namespace rt::rave

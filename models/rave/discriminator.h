// RAVE discriminators (acids-ircam/RAVE rave/discriminator.py, rave/descript_discriminator.py).
// Every discriminator returns, per sub-discriminator, its list of feature maps; the last map
// of each list is the score. Keys mirror RAVE, e.g. v2
// `discriminator.discriminators.0.layers.0.net.0.weight_g` (period 2, first conv),
// `discriminator.discriminators.1.layers.2.net.8.weight` (third scale, post conv);
// v3 `discriminator.discriminators.0.convs.0.0.weight_g`,
// `discriminator.discriminators.5.band_convs.0.0.0.weight_v`, `...5.conv_post.weight_g`.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "models/common/blocks.h"
#include "models/rave/options.h"

namespace rt::rave {

using Features = std::vector<std::vector<torch::Tensor>>;

struct DiscriminatorBase : torch::nn::Module {
  // x: audio (B, channels, T).
  virtual Features forward(const torch::Tensor& x) = 0;
};

// discriminator.ConvNet: n_layers × [weight-normed conv (stride 4, centred padding, bias),
// LeakyReLU(0.2)] with channels capacity·2^i, then a plain 1×1 conv to one channel. Conv1d
// (kernel 15) for scales, Conv2d (kernel (5,1), stride (4,1)) for periods. Features: every
// conv output (before its activation).
struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl(int64_t in_size, int64_t capacity, int64_t n_layers, bool two_d);
  std::vector<torch::Tensor> forward(torch::Tensor x);
  models::Seq net;
  std::vector<bool> is_conv;
};
TORCH_MODULE(ConvNet);

// MultiPeriodDiscriminator: fold (B,C,T) to (B,C,T/p,p) after zero-padding T to a multiple of p.
struct MultiPeriodDiscriminatorImpl : DiscriminatorBase {
  MultiPeriodDiscriminatorImpl(const RaveOptions& o);
  Features forward(const torch::Tensor& x) override;
  torch::nn::ModuleList layers;
  std::vector<ConvNet> nets;
  std::vector<int64_t> periods;
};

// MultiScaleDiscriminator: n_scales ConvNets, avg_pool1d(2) between scales.
struct MultiScaleDiscriminatorImpl : DiscriminatorBase {
  MultiScaleDiscriminatorImpl(const RaveOptions& o);
  Features forward(const torch::Tensor& x) override;
  torch::nn::ModuleList layers;
  std::vector<ConvNet> nets;
};

// CombineDiscriminators: concatenated feature lists of its `discriminators`.
struct CombineDiscriminatorsImpl : DiscriminatorBase {
  explicit CombineDiscriminatorsImpl(std::vector<std::shared_ptr<DiscriminatorBase>> discs);
  Features forward(const torch::Tensor& x) override;
  torch::nn::ModuleList discriminators;
  std::vector<std::shared_ptr<DiscriminatorBase>> discs;
};

// Descript (DAC) multi-period discriminator: reflect-pad T by p − T mod p, fold, 5 WNConv2d
// (k(5,1), stride (3,1) ×4 then 1, channels 32,128,512,1024,1024, LeakyReLU 0.1) + conv_post.
struct MPDImpl : torch::nn::Module {
  MPDImpl(int64_t period, int64_t channels);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::ModuleList convs;
  std::vector<models::Seq> conv_seq;
  models::WNConv2d conv_post{nullptr};
  int64_t period;
};
TORCH_MODULE(MPD);

// Descript multi-resolution STFT discriminator: complex STFT (hann, hop n_fft/4, centred) as
// (B, 2C, frames, freq), split into 5 bands at [0,.1,.25,.5,.75,1]·(n_fft/2+1); per band 5
// WNConv2d (32 ch, (3,9) with frequency stride 2, then (3,3)); bands re-joined → conv_post.
struct MRDImpl : torch::nn::Module {
  MRDImpl(int64_t n_fft, int64_t channels);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::ModuleList band_convs;
  std::vector<std::vector<models::Seq>> band_seq;
  models::WNConv2d conv_post{nullptr};
  int64_t n_fft;
  std::vector<std::pair<int64_t, int64_t>> bands;
  torch::Tensor window;  // `stft.window` as torchaudio's Spectrogram
};
TORCH_MODULE(MRD);

// DescriptDiscriminator: DC removal and peak normalisation to 0.8, then MPDs for `periods` and
// MRDs for `mrd_n_ffts` (rates = [] in RAVE, so no MSD).
struct DescriptDiscriminatorImpl : DiscriminatorBase {
  explicit DescriptDiscriminatorImpl(const RaveOptions& o);
  Features forward(const torch::Tensor& x) override;
  torch::nn::ModuleList discriminators;
  std::vector<MPD> mpds;
  std::vector<MRD> mrds;
};

// EnCodec's STFT discriminator as RAVE's discriminator.EncodecConvNet: on the complex spectrogram
// (torchaudio Spectrogram: hann, hop n/4, not centred, normalised by the window's L2 norm) as
// (B, 2C, freq, frames), six weight-normed Conv2d: (9,3) → (9,3) stride (2,1) dilation (1,1),
// (1,2), (1,4) → (3,3) → (3,3) to one channel, LeakyReLU(0.2) after all but the last; features:
// every block's output.
struct EncodecConvNetImpl : torch::nn::Module {
  EncodecConvNetImpl(int64_t capacity, int64_t channels);
  std::vector<torch::Tensor> forward(torch::Tensor x);
  torch::nn::ModuleList net;
  std::vector<models::Seq> blocks;
};
TORCH_MODULE(EncodecConvNet);

// discriminator.MultiScaleSpectralDiscriminator: one EncodecConvNet per STFT size (`specs.<i>`
// hold the windows, `nets.<i>` the networks).
struct MultiScaleSpectralDiscriminatorImpl : DiscriminatorBase {
  explicit MultiScaleSpectralDiscriminatorImpl(const RaveOptions& o);
  Features forward(const torch::Tensor& x) override;
  torch::nn::ModuleList specs, nets;
  std::vector<EncodecConvNet> convnets;
  std::vector<torch::Tensor> windows;
  std::vector<int64_t> scales;
};

// From options.discriminator: kPeriodScale (Combine[MultiPeriod, MultiScale], or the bare
// MultiScale when periods is empty, as v1), kDescript, kScaleSpectral (Combine[MultiScale,
// MultiScaleSpectral]), or kNone (nullptr).
std::shared_ptr<DiscriminatorBase> make_discriminator(const RaveOptions& o);

}  // namespace rt::rave

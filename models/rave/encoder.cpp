#include "models/rave/encoder.h"

#include "distributed/sync_batch_norm.h"
#include "models/common/batch_slice.h"

namespace rt::rave {

using models::WNConv1d;
using models::WNConv1dOptions;

namespace {

std::vector<std::vector<int64_t>> encoder_dilations_per_ratio(const RaveOptions& o) {
  // RAVE normalize_dilations: a single list applies to every ratio. The encoder's own
  // (model.encoder_dilations, hybrid.gin) when set.
  const auto& d = o.encoder_dilations.empty() ? o.dilations : o.encoder_dilations;
  if (d.size() == 1 && o.ratios.size() > 1) return std::vector<std::vector<int64_t>>(o.ratios.size(), d[0]);
  return d;
}

}  // namespace

EncoderV2Impl::EncoderV2Impl(const RaveOptions& o) {
  const auto act = o.activation;
  const auto mode = o.padding;
  const auto dil = encoder_dilations_per_ratio(o);
  const int64_t k_in = 2 * o.kernel_size + 1;
  auto pad = models::get_padding(k_in, 1, mode);
  net->push_back(WNConv1d(WNConv1dOptions(o.encoder_input_size() * o.channels, o.capacity, k_in)
                              .pad_left(pad.first)
                              .pad_right(pad.second)));
  int64_t c = o.capacity;
  for (size_t i = 0; i < o.ratios.size(); ++i) {
    const int64_t r = o.ratios[i];
    for (int64_t d : dil[i]) {
      if (o.adain) net->push_back(models::AdaIN(c));
      net->push_back(models::Residual(
          torch::nn::AnyModule(models::DilatedUnit(c, o.kernel_size, d, models::kRaveUnitActivation, mode))));
    }
    net->push_back(models::make_activation(act, c));
    pad = models::get_padding(2 * r, 1, mode);
    net->push_back(
        WNConv1d(WNConv1dOptions(c, 2 * c, 2 * r).stride(r).pad_left(pad.first).pad_right(pad.second)));
    c *= 2;
  }
  net->push_back(models::make_activation(act, c));
  pad = models::get_padding(o.kernel_size, 1, mode);
  // n_out: 2 (mean and scale) for the variational encoder, 1 for the others (spherical.gin,
  // wasserstein.gin: blocks.EncoderV2.n_out = 1).
  const int64_t n_out = o.encoder == EncoderKind::kVariational ? 2 : 1;
  net->push_back(WNConv1d(
      WNConv1dOptions(c, n_out * o.latent_size, o.kernel_size).pad_left(pad.first).pad_right(pad.second)));
  register_module("net", net);
}

EncoderV1Impl::EncoderV1Impl(const RaveOptions& o) {
  const auto mode = o.padding;
  auto pad = models::get_padding(7, 1, mode);
  net->push_back(WNConv1d(WNConv1dOptions(o.n_band * o.channels, o.capacity, 7)
                              .weight_norm(false)
                              .pad_left(pad.first)
                              .pad_right(pad.second)));
  int64_t c = o.capacity;
  for (int64_t r : o.ratios) {
    net->push_back(dist::SyncableBatchNorm1d(
        c));  // synchronised in data-parallel training (train.distributed.batch_norm)
    net->push_back(models::make_activation(models::Activation::kLeakyRelu, c));
    pad = models::get_padding(2 * r + 1, 1, mode);
    net->push_back(WNConv1d(WNConv1dOptions(c, 2 * c, 2 * r + 1)
                                .stride(r)
                                .weight_norm(false)
                                .pad_left(pad.first)
                                .pad_right(pad.second)));
    c *= 2;
  }
  net->push_back(models::make_activation(models::Activation::kLeakyRelu, c));
  pad = models::get_padding(5, 1, mode);
  net->push_back(WNConv1d(WNConv1dOptions(c, 2 * o.latent_size, 5)
                              .groups(2)
                              .weight_norm(false)
                              .pad_left(pad.first)
                              .pad_right(pad.second)));
  register_module("net", net);
}

VariationalEncoderImpl::VariationalEncoderImpl(const RaveOptions& o)
    : kind(o.encoder), noise_augmentation(o.noise_augmentation) {
  if (o.version == RaveVersion::kV1) {
    encoder = register_module("encoder", std::make_shared<EncoderV1Impl>(o));
  } else {
    encoder = register_module("encoder", std::make_shared<EncoderV2Impl>(o));
  }
  // SphericalEncoder has no warmed_up buffer (and is never frozen).
  warmed_up_ = torch::zeros({}, torch::kLong);
  if (kind != EncoderKind::kSpherical) warmed_up_ = register_buffer("warmed_up", warmed_up_);
  if (kind == EncoderKind::kDiscrete) {
    rvq =
        register_module("rvq", ResidualVectorQuantization(o.num_quantizers, o.latent_size, o.codebook_size));
    enabled_ = register_buffer("enabled", torch::zeros({}, torch::kLong));
  }
}

torch::Tensor VariationalEncoderImpl::forward(const torch::Tensor& x) {
  auto z = encoder->forward(x);
  return warmed_up() && frozen_in_phase_2() ? z.detach() : z;
}

std::pair<torch::Tensor, torch::Tensor> VariationalEncoderImpl::reparametrize(
    const torch::Tensor& stats, const torch::Tensor& noise, const torch::Tensor& augmentation) {
  auto append_noise = [&](const torch::Tensor& z) {
    if (noise_augmentation == 0) return z;
    auto extra = augmentation.defined()
                     ? augmentation
                     : torch::randn({stats.size(0), noise_augmentation, stats.size(2)}, stats.options());
    return torch::cat({z, extra.to(z.dtype())}, 1);
  };
  if (kind == EncoderKind::kDiscrete) {
    // DiscreteEncoder.reparametrize: the quantiser once enabled, else zeros_like(z).mean().
    if (!quantizing()) return {append_noise(stats), torch::zeros({}, stats.options())};
    auto [z, commitment, indices] = rvq->forward(stats);
    return {append_noise(z), commitment};
  }
  if (kind == EncoderKind::kSpherical) {
    // z / ‖z‖₂ over the latent channels; the regularisation is zeros_like(z).mean(). A frame
    // whose norm is 0 (digital silence can give exactly 0) is the first axis, where RAVE's
    // division makes it NaN: the point the exported file's angles give it (all angles 0, the
    // convention of hyperspherical coordinates; export/torchscript/rave_script.cpp), so the file and the
    // model agree there too. Every other frame is RAVE's.
    const auto norm = stats.norm(2, {1}, /*keepdim=*/true);
    auto axis = torch::zeros_like(stats);
    axis.select(1, 0).fill_(1.0);
    return {torch::where(norm > 0, stats / norm.clamp_min(1e-30), axis), torch::zeros({}, stats.options())};
  }
  if (kind == EncoderKind::kWasserstein) {
    // MMD between the latent frames (B·T', L) and as many standard normal draws, with RAVE's
    // kernel exp(−mean_d (x_i − y_j)² / L) averaged over all pairs.
    const int64_t L = stats.size(1);
    auto frames = stats.permute({0, 2, 1}).reshape({-1, L});
    const auto draws = noise.defined() ? noise : torch::randn_like(frames);
    // mean_d (a_i − b_j)² as the squared pairwise distance over L, computed without
    // materialising the (N, N, L) differences RAVE's broadcast makes: at 8192 frames that alone
    // is N·N·L doubles per kernel, and autograd keeps copies of it. cdist without the matmul
    // shortcut sums the same squared differences (no cancellation), so values and gradients
    // agree with RAVE's to rounding (step golden rave_v2_wasserstein_step).
    auto kernel = [L](const torch::Tensor& a, const torch::Tensor& b) {
      const auto d2 = torch::cdist(a, b, 2.0, /*compute_mode=*/2).pow(2);
      return torch::exp(-(d2 / static_cast<double>(L)) / static_cast<double>(L)).mean();
    };
    auto mmd = kernel(frames, frames) + kernel(draws, draws) - 2 * kernel(frames, draws);
    return {append_noise(stats), mmd};
  }
  auto halves = stats.chunk(2, 1);
  const auto& mean = halves[0];
  auto std = torch::softplus(halves[1]) + 1e-4;
  auto var = std * std;
  // Split-invariant noise (batch_slice.h) unless given or replayed.
  const auto draws = noise.defined() ? noise
                     : noise_source  ? noise_source(mean)
                                     : models::batch_randn_like(mean);
  auto z = draws * std + mean;
  auto kl = (mean * mean + var - var.log() - 1).sum(1).mean();
  return {z, kl};
}

void VariationalEncoderImpl::set_warmed_up(bool state) {
  warm_ = state;
  warmed_up_.fill_(state ? 1 : 0);
}

bool VariationalEncoderImpl::warmed_up() const { return warm_; }

void VariationalEncoderImpl::set_quantizing(bool state) {
  TORCH_CHECK(kind == EncoderKind::kDiscrete, "set_quantizing: only the discrete encoder quantises");
  enabled_.fill_(state ? 1 : 0);
}

bool VariationalEncoderImpl::quantizing() const {
  return kind == EncoderKind::kDiscrete && enabled_.item<int64_t>() != 0;
}

}  // namespace rt::rave

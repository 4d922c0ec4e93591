#include "models/rave/prior.h"

#include <cmath>
#include <string>

#include "models/rave/latent_pca.h"
#include "models/rave/rave.h"
#include "util/error.h"

namespace rt::rave {
namespace {

namespace F = torch::nn::functional;

torch::nn::Conv1d conv(int64_t in, int64_t out, int64_t kernel, int64_t dilation = 1, int64_t groups = 1) {
  return torch::nn::Conv1d(torch::nn::Conv1dOptions(in, out, kernel).dilation(dilation).groups(groups));
}

// cached_conv's causal padding: every sample of the receptive field on the left.
torch::Tensor causal(const torch::Tensor& x, int64_t pad) {
  return pad == 0 ? x : F::pad(x, F::PadFuncOptions({pad, 0}));
}

}  // namespace

void PriorOptions::validate() const {
  auto at_least = [](const char* name, int64_t v, int64_t low) {
    if (v < low) {
      throw Error(std::string("model.prior_") + name + " = " + std::to_string(v) + ": must be at least " +
                  std::to_string(low));
    }
  };
  at_least("resolution", resolution, 2);
  at_least("res_size", res_size, 1);
  at_least("skp_size", skp_size, 1);
  at_least("kernel_size", kernel_size, 1);
  at_least("cycle_size", cycle_size, 1);
  at_least("n_layers", n_layers, 1);
  at_least("latent_size", latent_size, 1);
  if (prior_latent_size(latent_size) != latent_size) {
    throw Error("model.prior_latent_size = " + std::to_string(latent_size) +
                ": must be a power of two (RAVE's Prior rounds it up: " +
                std::to_string(prior_latent_size(latent_size)) + ")");
  }
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"res_size", res_size}, {"skp_size", skp_size}}) {
    if (v % latent_size != 0) {
      throw Error(std::string("model.prior_") + name + " = " + std::to_string(v) +
                  ": must be a multiple of model.prior_latent_size = " + std::to_string(latent_size) +
                  " (the first and last convolutions are grouped by dimension)");
    }
  }
}

int64_t prior_latent_size(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

PriorResidualBlockImpl::PriorResidualBlockImpl(int64_t res_size, int64_t skp_size, int64_t kernel_size,
                                               int64_t dilation)
    : pad((kernel_size - 1) * dilation) {
  dconv = register_module("dconv", conv(res_size, 2 * res_size, kernel_size, dilation));
  rconv = register_module("rconv", conv(res_size, res_size, 1));
  sconv = register_module("sconv", conv(res_size, skp_size, 1));
}

std::pair<torch::Tensor, torch::Tensor> PriorResidualBlockImpl::forward(const torch::Tensor& x,
                                                                        const torch::Tensor& skip) {
  const auto h = dconv->forward(causal(x, pad));
  const auto halves = h.chunk(2, 1);
  const auto gated = torch::sigmoid(halves[0]) * torch::tanh(halves[1]);
  return {x + rconv->forward(gated), skip + sconv->forward(gated)};
}

VariationalPriorImpl::VariationalPriorImpl(PriorOptions options) : options_(std::move(options)) {
  options_.validate();
  const auto& o = options_;
  const int64_t classes = o.resolution * o.latent_size;
  pre_pad_ = o.kernel_size - 1;
  pre_net = register_module(
      "pre_net",
      torch::nn::Sequential(conv(classes, o.res_size, o.kernel_size, 1, o.latent_size),
                            torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2))));
  residuals = register_module("residuals", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.n_layers; ++i) {
    residuals->push_back(
        PriorResidualBlock(o.res_size, o.skp_size, o.kernel_size, int64_t{1} << (i % o.cycle_size)));
  }
  post_net = register_module(
      "post_net",
      torch::nn::Sequential(conv(o.skp_size, o.skp_size, 1),
                            torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                            conv(o.skp_size, classes, 1, 1, o.latent_size)));
}

torch::Tensor VariationalPriorImpl::forward(const torch::Tensor& x) {
  auto res = pre_net->forward(causal(x, pre_pad_));
  // RAVE starts the skip sum at a 0-d zero: the first block's skip output is its sconv's.
  torch::Tensor skip = torch::zeros({}, res.options());
  for (const auto& m : *residuals) {
    std::tie(res, skip) = m->as<PriorResidualBlockImpl>()->forward(res, skip);
  }
  return post_net->forward(skip);
}

int64_t prior_receptive_field(const PriorOptions& o) {
  int64_t dilations = 0;
  for (int64_t i = 0; i < o.n_layers; ++i) dilations += int64_t{1} << (i % o.cycle_size);
  return (o.kernel_size - 1) * dilations + 1;
}

int64_t VariationalPriorImpl::receptive_field() const { return prior_receptive_field(options_); }

torch::Tensor stack_one_hot(const torch::Tensor& bins, int64_t resolution) {
  // (B, D, T) → (B, D, T, R) → (B, T, D·R) → (B, D·R, T): channel d·R + r.
  const auto h = F::one_hot(bins, resolution).permute({0, 2, 1, 3});
  return h.reshape({h.size(0), h.size(1), -1}).permute({0, 2, 1});
}

torch::Tensor quantized_normal_encode(const torch::Tensor& z, int64_t resolution) {
  const auto cdf = 0.5 * (1.0 + torch::erf(z / std::sqrt(2.0)));
  const auto bins = torch::floor(cdf * static_cast<double>(resolution)).clamp(0, resolution - 1);
  return stack_one_hot(bins.to(torch::kLong), resolution).to(z.scalar_type());
}

torch::Tensor split_classes(const torch::Tensor& x, int64_t latent_size) {
  const auto t = x.permute({0, 2, 1});
  return t.reshape({t.size(0), t.size(1), latent_size, -1}).permute({0, 2, 1, 3});
}

torch::Tensor quantized_normal_decode(const torch::Tensor& x, int64_t resolution,
                                      const torch::Tensor& dither) {
  const int64_t latent_size = x.size(1) / resolution;
  const auto r = static_cast<double>(resolution);
  auto v = split_classes(x, latent_size).argmax(-1).to(x.scalar_type()) / r;  // (B, D, T)
  v = v + (dither.defined() ? dither.to(v.dtype()) : torch::rand_like(v)) / r;
  return (torch::erfinv(2.0 * v - 1.0) * std::sqrt(2.0)).clamp(-4.0, 4.0);
}

torch::Tensor diagonal_shift(const torch::Tensor& z) {
  const int64_t d = z.size(1), t = z.size(2);
  if (t < d) {
    throw Error("the prior's diagonal shift needs at least " + std::to_string(d) + " frames, got " +
                std::to_string(t));
  }
  std::vector<torch::Tensor> parts;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t start = d - 1 - i;
    parts.push_back(z.slice(1, i, i + 1).slice(2, start, t - i));
  }
  return torch::cat(parts, 1);
}

torch::Tensor diagonal_shift_inverse(const torch::Tensor& z) { return diagonal_shift(z.flip({1})).flip({1}); }

torch::Tensor prior_latent(RaveModelImpl& rave, const torch::Tensor& x, int64_t latent_size,
                           const torch::Tensor& noise) {
  torch::NoGradGuard no_grad;
  const auto stats = rave.encode_stats(x);
  auto z = rave.encoder->reparametrize(stats, noise).first;
  const LatentPca stored = stored_latent_pca(rave);
  const auto mean = stored.mean.to(z.dtype()), pca = stored.components.to(z.dtype());
  z = F::conv1d(z - mean.unsqueeze(-1), pca.unsqueeze(-1));
  return z.slice(1, 0, latent_size);
}

torch::Tensor prior_to_rave_latent(RaveModelImpl& rave, const torch::Tensor& z, const torch::Tensor& noise) {
  const LatentPca stored = stored_latent_pca(rave);
  const auto mean = stored.mean.to(z.dtype()), pca = stored.components.to(z.dtype());
  const int64_t missing = pca.size(0) - z.size(1);
  auto full = z;
  if (missing > 0) {
    const auto fill =
        noise.defined() ? noise.to(z.dtype()) : torch::randn({z.size(0), missing, z.size(2)}, z.options());
    full = torch::cat({z, fill}, 1);
  }
  return F::conv1d(full, pca.t().unsqueeze(-1)) + mean.unsqueeze(-1);
}

torch::Tensor prior_generate(VariationalPriorImpl& prior, const torch::Tensor& start, bool argmax) {
  torch::NoGradGuard no_grad;
  const auto& o = prior.options();
  auto x = start.clone();
  for (int64_t i = 0; i + 1 < x.size(2); ++i) {
    const auto logits = split_classes(prior.forward(x.slice(2, 0, i + 1)).slice(2, i, i + 1), o.latent_size);
    torch::Tensor bins;
    if (argmax) {
      bins = logits.argmax(-1);
    } else {
      const auto p = torch::softmax(logits.reshape({-1, o.resolution}), -1);
      bins = torch::multinomial(p, 1, /*replacement=*/true).reshape(logits.sizes().slice(0, 3));
    }
    x.slice(2, i + 1, i + 2).copy_(stack_one_hot(bins, o.resolution));
  }
  return x;
}

PriorLoss prior_loss(VariationalPriorImpl& prior, const torch::Tensor& latent) {
  const auto& o = prior.options();
  PriorLoss out;
  out.one_hot = quantized_normal_encode(diagonal_shift(latent), o.resolution);
  const auto logits = prior.forward(out.one_hot);
  const int64_t t = out.one_hot.size(2);
  const auto target = split_classes(out.one_hot.slice(2, 1, t), o.latent_size).argmax(-1);
  const auto pred = split_classes(logits.slice(2, 0, t - 1), o.latent_size);
  out.loss = F::cross_entropy(pred.reshape({-1, o.resolution}), target.reshape({-1}));
  return out;
}

}  // namespace rt::rave

#include "models/rave/generator.h"

#include <numeric>

#include "models/common/batch_slice.h"
#include "models/common/fft_input.h"

namespace rt::rave {

using models::WNConv1d;
using models::WNConv1dOptions;
using models::WNConvTranspose1d;
using models::WNConvTranspose1dOptions;

torch::Tensor mod_sigmoid(const torch::Tensor& x) { return 2 * torch::sigmoid(x).pow(2.3) + 1e-7; }

torch::Tensor amp_to_impulse_response(const torch::Tensor& amplitude, int64_t target_size) {
  const auto amp = models::fft_input(amplitude);  // float32 under autocast
  auto ir = torch::fft::irfft(torch::complex(amp, torch::zeros_like(amp)));
  const int64_t filter_size = ir.size(-1);
  ir = torch::roll(ir, filter_size / 2, -1);
  ir = ir * torch::hann_window(filter_size, amp.options());
  ir = torch::constant_pad_nd(ir, {0, target_size - filter_size}, 0);
  // Python's -filter_size // 2 floors.
  const int64_t back = (filter_size + 1) / 2;
  return torch::roll(ir, -back, -1);
}

torch::Tensor fft_convolve(const torch::Tensor& signal, const torch::Tensor& kernel) {
  auto s = torch::constant_pad_nd(models::fft_input(signal), {0, signal.size(-1)}, 0);
  auto k = torch::constant_pad_nd(models::fft_input(kernel), {kernel.size(-1), 0}, 0);
  auto out = torch::fft::irfft(torch::fft::rfft(s) * torch::fft::rfft(k));
  return out.narrow(-1, out.size(-1) / 2, out.size(-1) - out.size(-1) / 2);
}

NoiseGeneratorImpl::NoiseGeneratorImpl(int64_t in_size, int64_t hidden_size, int64_t data_size_,
                                       const std::vector<int64_t>& ratios, int64_t noise_bands, bool v2,
                                       models::Activation act, models::PaddingMode mode)
    : data_size(data_size_) {
  const size_t n = ratios.size();
  std::vector<int64_t> channels{in_size};
  for (size_t i = 0; i + 1 < n; ++i) channels.push_back(v2 ? hidden_size : in_size);
  channels.push_back(data_size * noise_bands);
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = ratios[i];
    auto opts = WNConv1dOptions(channels[i], channels[i + 1], v2 ? 2 * r : 3).stride(r).weight_norm(false);
    if (v2) {
      opts.pad_left(r).pad_right(0);  // NoiseGeneratorV2: padding=(r, 0) whatever the mode
    } else {
      const auto pad = models::get_padding(3, 1, mode);
      opts.pad_left(pad.first).pad_right(pad.second);
    }
    net->push_back(WNConv1d(opts));
    if (i + 1 != n)
      net->push_back(models::make_activation(v2 ? act : models::Activation::kLeakyRelu, channels[i + 1]));
  }
  register_module("net", net);
  hop = std::accumulate(ratios.begin(), ratios.end(), int64_t{1}, std::multiplies<>());
  target_size = register_buffer("target_size", torch::tensor(hop, torch::kLong));
}

torch::Tensor NoiseGeneratorImpl::forward(const torch::Tensor& x) {
  auto amp = mod_sigmoid(net->forward(x) - 5).permute({0, 2, 1});  // (B, T'', data·bands)
  amp = amp.reshape({amp.size(0), amp.size(1), data_size, -1});
  auto ir = amp_to_impulse_response(amp, hop);
  auto noise = (noise_source ? noise_source(ir) : models::batch_rand_like(ir)) * 2 -
               1;  // split-invariant (batch_slice.h)
  if (noise_scale != 1.0) noise = noise * noise_scale;
  noise = fft_convolve(noise, ir).permute({0, 2, 1, 3});  // (B, data, T'', hop)
  return noise.reshape({noise.size(0), noise.size(1), -1});
}

namespace {

// RAVE normalize_dilations, over the generator's own ratios.
std::vector<std::vector<int64_t>> decoder_dilations_per_ratio(const RaveOptions& o) {
  const size_t n = o.generator_ratios().size();
  if (o.dilations.size() == 1 && n > 1) return std::vector<std::vector<int64_t>>(n, o.dilations[0]);
  return o.dilations;
}

WNConv1d same_conv(int64_t in, int64_t out, int64_t k, models::PaddingMode mode) {
  const auto pad = models::get_padding(k, 1, mode);
  return WNConv1d(WNConv1dOptions(in, out, k).pad_left(pad.first).pad_right(pad.second));
}

WNConvTranspose1d upsample_conv(int64_t in, int64_t out, int64_t r) {
  return WNConvTranspose1d(WNConvTranspose1dOptions(in, out, 2 * r).stride(r).padding(r / 2));
}

// blocks.UpsampleLayer (v1): `net` = [act, WNConvTranspose] (or a k3 conv when r == 1).
struct UpsampleLayerImpl : torch::nn::Module {
  UpsampleLayerImpl(int64_t in, int64_t out, int64_t r, models::PaddingMode mode) {
    net->push_back(models::make_activation(models::Activation::kLeakyRelu, in));
    if (r > 1) {
      net->push_back(upsample_conv(in, out, r));
    } else {
      net->push_back(same_conv(in, out, 3, mode));
    }
    register_module("net", net);
  }
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }
  models::Seq net;
};
TORCH_MODULE(UpsampleLayer);

}  // namespace

GruLayerImpl::GruLayerImpl(int64_t latent_size, int64_t num_layers) {
  gru = register_module(
      "gru", torch::nn::GRU(
                 torch::nn::GRUOptions(latent_size, latent_size).num_layers(num_layers).batch_first(true)));
  register_buffer("gru_state", torch::zeros({}, torch::kLong));
}

torch::Tensor GruLayerImpl::forward(const torch::Tensor& x) {
  if (!enabled) return x;
  return std::get<0>(gru->forward(x.permute({0, 2, 1}))).permute({0, 2, 1});
}

GeneratorV2Impl::GeneratorV2Impl(const RaveOptions& o) : amplitude_modulation(o.amplitude_modulation) {
  const auto act = o.activation;
  const auto mode = o.padding;
  auto dil = decoder_dilations_per_ratio(o);
  const auto& own = o.generator_ratios();
  std::vector<int64_t> ratios(own.rbegin(), own.rend());
  std::reverse(dil.begin(), dil.end());
  // RAVE's data_size: the bands of every channel, or (raw output) the channels.
  const int64_t data_size = o.output_mode == OutputMode::kRaw ? o.channels : o.n_band * o.channels;
  int64_t c = (int64_t{1} << ratios.size()) * o.capacity;
  // hybrid.gin: the recurrent layer first (decoder.net.0), over the latent as the decoder gets it.
  if (o.gru_layers > 0) net->push_back(GruLayer(o.latent_size + o.noise_augmentation, o.gru_layers));
  net->push_back(same_conv(o.latent_size + o.noise_augmentation, c, o.kernel_size, mode));
  for (size_t i = 0; i < ratios.size(); ++i) {
    net->push_back(models::make_activation(act, c));
    net->push_back(upsample_conv(c, c / 2, ratios[i]));
    c /= 2;
    for (int64_t d : dil[i]) {
      if (o.adain) net->push_back(models::AdaIN(c));
      net->push_back(models::Residual(
          torch::nn::AnyModule(models::DilatedUnit(c, o.kernel_size, d, models::kRaveUnitActivation, mode))));
    }
  }
  net->push_back(models::make_activation(act, c));
  auto waveform = same_conv(c, amplitude_modulation ? 2 * data_size : data_size, 2 * o.kernel_size + 1, mode);
  if (o.noise_bands > 0) {
    waveform_module = register_module("waveform_module", waveform);
    noise_module = register_module("noise_module",
                                   NoiseGenerator(c, o.noise_hidden, data_size, o.noise_ratios, o.noise_bands,
                                                  /*v2=*/true, act, mode));
  } else {
    net->push_back(waveform);
  }
  register_module("net", net);
}

torch::Tensor GeneratorV2Impl::forward(const torch::Tensor& z) {
  auto x = net->forward(z);
  torch::Tensor noise;
  if (noise_module) {
    noise = noise_module->forward(x);
    x = waveform_module->forward(x);
  }
  if (amplitude_modulation) {
    auto parts = x.split(x.size(1) / 2, 1);
    x = parts[0] * torch::sigmoid(parts[1]);
  }
  if (noise.defined()) x = x + noise;
  return torch::tanh(x);
}

GeneratorV1Impl::GeneratorV1Impl(const RaveOptions& o) : use_noise(o.noise_bands > 0) {
  const auto mode = o.padding;
  const auto act = models::Activation::kLeakyRelu;
  const int64_t n = static_cast<int64_t>(o.ratios.size());
  net->push_back(same_conv(o.latent_size, (int64_t{1} << n) * o.capacity, 7, mode));
  int64_t out_dim = o.capacity;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t in_dim = (int64_t{1} << (n - i)) * o.capacity;
    out_dim = (int64_t{1} << (n - i - 1)) * o.capacity;
    net->push_back(UpsampleLayer(in_dim, out_dim, o.ratios[static_cast<size_t>(i)], mode));
    // v1.gin blocks.ResidualStack: kernel_sizes [3], dilations_list [[1,1],[3,1],[5,1]]
    // (the v1 preset's kernel_size and dilations).
    net->push_back(
        models::ResidualStack(out_dim, std::vector<int64_t>{o.kernel_size}, o.dilations, act, mode));
  }
  register_module("net", net);
  const int64_t data_size = o.n_band * o.channels;
  std::vector<torch::nn::AnyModule> branches{torch::nn::AnyModule(same_conv(out_dim, data_size, 7, mode)),
                                             torch::nn::AnyModule(same_conv(out_dim, 1, 3, mode))};
  if (use_noise) {
    branches.emplace_back(
        NoiseGenerator(out_dim, out_dim, data_size, o.noise_ratios, o.noise_bands, /*v2=*/false, act, mode));
  }
  synth = register_module("synth", models::Branches(std::move(branches)));
  warmed_up_ = register_buffer("warmed_up", torch::zeros({}, torch::kLong));
}

torch::Tensor GeneratorV1Impl::forward(const torch::Tensor& z) {
  auto x = net->forward(z);
  auto outs = synth->forward(x);
  auto loudness = outs[1].reshape({x.size(0), 1, -1});
  auto waveform = torch::tanh(outs[0]) * mod_sigmoid(loudness);
  if (warm_ && use_noise) waveform = waveform + outs[2];
  return waveform;
}

void GeneratorV1Impl::set_warmed_up(bool state) {
  warm_ = state;
  warmed_up_.fill_(state ? 1 : 0);
}

}  // namespace rt::rave

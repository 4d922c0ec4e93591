#include "models/rave/discriminator.h"

#include "models/common/fft_input.h"

namespace rt::rave {

using models::Size2;
using models::WNConv1d;
using models::WNConv1dOptions;
using models::WNConv2d;
using models::WNConv2dOptions;

ConvNetImpl::ConvNetImpl(int64_t in_size, int64_t capacity, int64_t n_layers, bool two_d) {
  std::vector<int64_t> channels{in_size};
  for (int64_t i = 0; i < n_layers; ++i) channels.push_back(capacity << i);
  const int64_t stride = 4;  // v1.gin discriminator.ConvNet.stride
  for (int64_t i = 0; i < n_layers; ++i) {
    const auto in = channels[static_cast<size_t>(i)], out = channels[static_cast<size_t>(i + 1)];
    if (two_d) {
      const int64_t pad = models::get_padding(5).first;
      net->push_back(
          WNConv2d(WNConv2dOptions(in, out, Size2{5, 1}).stride(Size2{stride, 1}).padding(Size2{pad, 0})));
    } else {
      const int64_t pad = models::get_padding(15).first;
      net->push_back(
          WNConv1d(WNConv1dOptions(in, out, 15).stride(stride).bias(true).pad_left(pad).pad_right(pad)));
    }
    is_conv.push_back(true);
    net->push_back(models::make_activation(models::Activation::kLeakyRelu, out));
    is_conv.push_back(false);
  }
  if (two_d) {
    net->push_back(WNConv2d(WNConv2dOptions(channels.back(), 1, Size2{1, 1}).weight_norm(false)));
  } else {
    net->push_back(WNConv1d(WNConv1dOptions(channels.back(), 1, 1).weight_norm(false).bias(true)));
  }
  is_conv.push_back(true);
  register_module("net", net);
}

std::vector<torch::Tensor> ConvNetImpl::forward(torch::Tensor x) {
  std::vector<torch::Tensor> features;
  size_t i = 0;
  for (auto& m : *net) {
    x = m.forward(x);
    if (is_conv[i++]) features.push_back(x);
  }
  return features;
}

MultiPeriodDiscriminatorImpl::MultiPeriodDiscriminatorImpl(const RaveOptions& o) : periods(o.periods) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (size_t i = 0; i < periods.size(); ++i) {
    nets.emplace_back(o.channels, o.discriminator_capacity, o.discriminator_n_layers, true);
    layers->push_back(nets.back());
  }
}

Features MultiPeriodDiscriminatorImpl::forward(const torch::Tensor& x) {
  Features out;
  for (size_t i = 0; i < nets.size(); ++i) {
    const int64_t p = periods[i];
    const int64_t pad = (p - x.size(-1) % p) % p;
    auto folded = torch::constant_pad_nd(x, {0, pad}, 0);
    folded = folded.reshape({x.size(0), x.size(1), -1, p});
    out.push_back(nets[i]->forward(folded));
  }
  return out;
}

MultiScaleDiscriminatorImpl::MultiScaleDiscriminatorImpl(const RaveOptions& o) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.n_scales; ++i) {
    nets.emplace_back(o.channels, o.discriminator_capacity, o.discriminator_n_layers, false);
    layers->push_back(nets.back());
  }
}

Features MultiScaleDiscriminatorImpl::forward(const torch::Tensor& x_in) {
  Features out;
  torch::Tensor x = x_in;
  for (size_t i = 0; i < nets.size(); ++i) {
    out.push_back(nets[i]->forward(x));
    if (i + 1 < nets.size()) x = torch::avg_pool1d(x, {2});
  }
  return out;
}

CombineDiscriminatorsImpl::CombineDiscriminatorsImpl(std::vector<std::shared_ptr<DiscriminatorBase>> discs_)
    : discs(std::move(discs_)) {
  discriminators = register_module("discriminators", torch::nn::ModuleList());
  for (auto& d : discs) discriminators->push_back(d);
}

Features CombineDiscriminatorsImpl::forward(const torch::Tensor& x) {
  Features out;
  for (auto& d : discs) {
    auto f = d->forward(x);
    for (auto& v : f) out.push_back(std::move(v));
  }
  return out;
}

namespace {

// DAC WNConv2d(..., act=True): Sequential(weight-normed conv with bias, LeakyReLU(0.1)).
models::Seq wn_conv2d_act(int64_t in, int64_t out, Size2 k, Size2 stride, Size2 pad) {
  models::Seq seq;
  seq->push_back(WNConv2d(WNConv2dOptions(in, out, k).stride(stride).padding(pad)));
  seq->push_back(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.1)));
  return seq;
}

// Holds torchaudio Spectrogram's `window` buffer so the key reads `stft.window`.
struct WindowHolderImpl : torch::nn::Module {
  explicit WindowHolderImpl(torch::Tensor w) { window = register_buffer("window", std::move(w)); }
  torch::Tensor window;
};
TORCH_MODULE(WindowHolder);

}  // namespace

MPDImpl::MPDImpl(int64_t period_, int64_t channels) : period(period_) {
  convs = register_module("convs", torch::nn::ModuleList());
  const std::vector<int64_t> ch{channels, 32, 128, 512, 1024, 1024};
  for (size_t i = 0; i < 5; ++i) {
    const int64_t s = i < 4 ? 3 : 1;
    conv_seq.push_back(wn_conv2d_act(ch[i], ch[i + 1], Size2{5, 1}, Size2{s, 1}, Size2{2, 0}));
    convs->push_back(conv_seq.back());
  }
  conv_post =
      register_module("conv_post", WNConv2d(WNConv2dOptions(1024, 1, Size2{3, 1}).padding(Size2{1, 0})));
}

std::vector<torch::Tensor> MPDImpl::forward(const torch::Tensor& x_in) {
  // DAC pads by period − T mod period (a whole period when T is already a multiple).
  auto x = torch::nn::functional::pad(
      x_in,
      torch::nn::functional::PadFuncOptions({0, period - x_in.size(-1) % period}).mode(torch::kReflect));
  x = x.reshape({x.size(0), x.size(1), -1, period});
  std::vector<torch::Tensor> fmap;
  for (auto& layer : conv_seq) {
    x = layer->forward(x);
    fmap.push_back(x);
  }
  fmap.push_back(conv_post->forward(x));
  return fmap;
}

MRDImpl::MRDImpl(int64_t n_fft_, int64_t channels) : n_fft(n_fft_) {
  const int64_t n_bins = n_fft / 2 + 1;
  const double edges[][2] = {{0.0, 0.1}, {0.1, 0.25}, {0.25, 0.5}, {0.5, 0.75}, {0.75, 1.0}};
  for (const auto& e : edges)
    bands.emplace_back(static_cast<int64_t>(e[0] * n_bins), static_cast<int64_t>(e[1] * n_bins));
  band_convs = register_module("band_convs", torch::nn::ModuleList());
  const int64_t ch = 32;
  for (size_t b = 0; b < bands.size(); ++b) {
    std::vector<models::Seq> stack{wn_conv2d_act(2 * channels, ch, Size2{3, 9}, Size2{1, 1}, Size2{1, 4}),
                                   wn_conv2d_act(ch, ch, Size2{3, 9}, Size2{1, 2}, Size2{1, 4}),
                                   wn_conv2d_act(ch, ch, Size2{3, 9}, Size2{1, 2}, Size2{1, 4}),
                                   wn_conv2d_act(ch, ch, Size2{3, 9}, Size2{1, 2}, Size2{1, 4}),
                                   wn_conv2d_act(ch, ch, Size2{3, 3}, Size2{1, 1}, Size2{1, 1})};
    torch::nn::ModuleList list;
    for (auto& s : stack) list->push_back(s);
    band_convs->push_back(list);
    band_seq.push_back(std::move(stack));
  }
  conv_post =
      register_module("conv_post", WNConv2d(WNConv2dOptions(ch, 1, Size2{3, 3}).padding(Size2{1, 1})));
  auto holder = register_module("stft", WindowHolder(torch::hann_window(n_fft)));
  window = holder->window;
}

std::vector<torch::Tensor> MRDImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1);
  const auto xs = models::fft_input(x);  // float32 under autocast
  auto spec = torch::stft(xs.reshape({b * c, xs.size(-1)}), n_fft, n_fft / 4, n_fft, window.to(xs.options()),
                          /*center=*/true, "reflect",
                          /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
  auto ri = torch::view_as_real(spec);  // (B·C, F, frames, 2)
  ri = ri.reshape({b, c, ri.size(1), ri.size(2), 2}).permute({0, 1, 4, 3, 2});
  ri = ri.reshape({b, 2 * c, ri.size(3), ri.size(4)});  // "b c f t p -> b (c p) t f"
  std::vector<torch::Tensor> fmap, joined;
  for (size_t i = 0; i < bands.size(); ++i) {
    auto band = ri.narrow(-1, bands[i].first, bands[i].second - bands[i].first);
    for (auto& layer : band_seq[i]) {
      band = layer->forward(band);
      fmap.push_back(band);
    }
    joined.push_back(band);
  }
  fmap.push_back(conv_post->forward(torch::cat(joined, -1)));
  return fmap;
}

DescriptDiscriminatorImpl::DescriptDiscriminatorImpl(const RaveOptions& o) {
  discriminators = register_module("discriminators", torch::nn::ModuleList());
  for (int64_t p : o.periods) {
    mpds.emplace_back(p, o.channels);
    discriminators->push_back(mpds.back());
  }
  for (int64_t n : o.mrd_n_ffts) {
    mrds.emplace_back(n, o.channels);
    discriminators->push_back(mrds.back());
  }
}

Features DescriptDiscriminatorImpl::forward(const torch::Tensor& x_in) {
  auto x = x_in - x_in.mean(-1, true);
  x = 0.8 * x / (std::get<0>(x.abs().max(-1, true)) + 1e-9);
  Features out;
  for (auto& d : mpds) out.push_back(d->forward(x));
  for (auto& d : mrds) out.push_back(d->forward(x));
  return out;
}

EncodecConvNetImpl::EncodecConvNetImpl(int64_t capacity, int64_t channels) {
  net = register_module("net", torch::nn::ModuleList());
  // rectified_2d_conv_block: padding k//2 without dilation, ((k−1)·d)//2 with.
  auto block = [&](int64_t in, int64_t out, Size2 k, Size2 stride, Size2 dilation, bool activation) {
    const Size2 pad{(k[0] - 1) * dilation[0] / 2, (k[1] - 1) * dilation[1] / 2};
    auto conv = WNConv2d(WNConv2dOptions(in, out, k).stride(stride).padding(pad).dilation(dilation));
    models::Seq seq;
    seq->push_back(conv);
    if (activation) seq->push_back(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)));
    return seq;
  };
  blocks = {block(2 * channels, capacity, {9, 3}, {1, 1}, {1, 1}, true),
            block(capacity, capacity, {9, 3}, {2, 1}, {1, 1}, true),
            block(capacity, capacity, {9, 3}, {2, 1}, {1, 2}, true),
            block(capacity, capacity, {9, 3}, {2, 1}, {1, 4}, true),
            block(capacity, capacity, {3, 3}, {1, 1}, {1, 1}, true),
            block(capacity, 1, {3, 3}, {1, 1}, {1, 1}, false)};
  for (auto& b : blocks) {
    // RAVE's last block is the bare conv (net.5.weight_g); the others a Sequential (net.<i>.0).
    if (&b == &blocks.back()) {
      net->push_back(b[0]);
    } else {
      net->push_back(b);
    }
  }
}

std::vector<torch::Tensor> EncodecConvNetImpl::forward(torch::Tensor x) {
  std::vector<torch::Tensor> features;
  for (auto& b : blocks) {
    x = b->forward(x);
    features.push_back(x);
  }
  return features;
}

MultiScaleSpectralDiscriminatorImpl::MultiScaleSpectralDiscriminatorImpl(const RaveOptions& o)
    : scales(o.spectral_scales) {
  specs = register_module("specs", torch::nn::ModuleList());
  nets = register_module("nets", torch::nn::ModuleList());
  for (int64_t n : scales) {
    auto holder = WindowHolder(torch::hann_window(n));
    specs->push_back(holder);
    windows.push_back(holder->window);
    convnets.emplace_back(o.spectral_capacity, o.channels);
    nets->push_back(convnets.back());
  }
}

Features MultiScaleSpectralDiscriminatorImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1);
  const auto xs = models::fft_input(x);  // float32 under autocast
  Features out;
  for (size_t i = 0; i < scales.size(); ++i) {
    const int64_t n = scales[i];
    const auto& w = windows[i];
    auto spec =
        torch::stft(xs.reshape({b * c, xs.size(-1)}), n, n / 4, n, w.to(xs.options()), /*center=*/false,
                    "reflect", /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
    // torchaudio's normalized=True ("window"): divided by the window's L2 norm.
    spec = spec / w.to(xs.options()).pow(2).sum().sqrt();
    auto ri = torch::view_as_real(spec);  // (B·C, F, frames, 2)
    ri = ri.reshape({b, c, ri.size(1), ri.size(2), 2});
    // torch.cat([spec.real, spec.imag], 1) on (B, C, F, frames)
    auto input = torch::cat({ri.select(-1, 0), ri.select(-1, 1)}, 1);
    out.push_back(convnets[i]->forward(input));
  }
  return out;
}

std::shared_ptr<DiscriminatorBase> make_discriminator(const RaveOptions& o) {
  switch (o.discriminator) {
    case DiscriminatorKind::kNone:
      return nullptr;
    case DiscriminatorKind::kDescript:
      return std::make_shared<DescriptDiscriminatorImpl>(o);
    case DiscriminatorKind::kScaleSpectral:
      return std::make_shared<CombineDiscriminatorsImpl>(std::vector<std::shared_ptr<DiscriminatorBase>>{
          std::make_shared<MultiScaleDiscriminatorImpl>(o),
          std::make_shared<MultiScaleSpectralDiscriminatorImpl>(o)});
    case DiscriminatorKind::kPeriodScale: {
      auto scales = std::make_shared<MultiScaleDiscriminatorImpl>(o);
      if (o.periods.empty()) return scales;
      return std::make_shared<CombineDiscriminatorsImpl>(std::vector<std::shared_ptr<DiscriminatorBase>>{
          std::make_shared<MultiPeriodDiscriminatorImpl>(o), scales});
    }
  }
  return nullptr;
}

}  // namespace rt::rave

#include "models/common/conv.h"

#include <cmath>

#include "models/common/conv1d_backward.h"
#include "models/common/onednn_check.h"

namespace rt::models {

std::pair<int64_t, int64_t> get_padding(int64_t kernel_size, int64_t dilation, PaddingMode mode) {
  if (kernel_size == 1) return {0, 0};
  const int64_t p = (kernel_size - 1) * dilation + 1;
  if (mode == PaddingMode::kCausal) return {p / 2 + (p - 1) / 2, 0};
  return {(p - 1) / 2, p / 2};
}

namespace {

// Registers either (weight_g, weight_v) or weight, initialised like a fresh torch conv wrapped
// by weight_norm: v ~ U(−b, b) with b = 1/sqrt(fan_in), g = ||v|| over all dims but 0.
void register_weight(torch::nn::Module& m, bool weight_norm, at::IntArrayRef shape, int64_t fan_in,
                     torch::Tensor& g, torch::Tensor& v, torch::Tensor& w) {
  ensure_correct_cpu_convolutions();  // before the first convolution runs (onednn_check.h)
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  torch::Tensor init = torch::empty(shape).uniform_(-bound, bound);
  if (weight_norm) {
    torch::Tensor norm = torch::norm_except_dim(init, 2, 0);
    g = m.register_parameter("weight_g", norm);
    v = m.register_parameter("weight_v", init);
  } else {
    w = m.register_parameter("weight", init);
  }
}

torch::Tensor register_bias(torch::nn::Module& m, bool bias, int64_t n, int64_t fan_in) {
  if (!bias) return {};
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return m.register_parameter("bias", torch::empty({n}).uniform_(-bound, bound));
}

torch::Tensor effective_weight(bool weight_norm, const torch::Tensor& g, const torch::Tensor& v,
                               const torch::Tensor& w) {
  return weight_norm ? torch::_weight_norm(v, g, 0) : w;
}

// Training on the CPU: the convolution nodes of models/common/conv1d_backward.h (products of
// our own, forward and backward; WNConv1d's weight norm inside the node in float32) when
// something needs a gradient and the switch is on; the nodes check the rest.
bool wants_gemm_backward(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad()) && conv1d_backward_gemm();
}

}  // namespace

WNConv1dImpl::WNConv1dImpl(WNConv1dOptions options_) : options(std::move(options_)) { reset(); }

void WNConv1dImpl::reset() {
  const auto& o = options;
  TORCH_CHECK(o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0,
              "WNConv1d: channels must be divisible by groups");
  const int64_t fan_in = o.in_channels() / o.groups() * o.kernel_size();
  register_weight(*this, o.weight_norm(), {o.out_channels(), o.in_channels() / o.groups(), o.kernel_size()},
                  fan_in, weight_g, weight_v, weight_);
  bias = register_bias(*this, o.bias(), o.out_channels(), fan_in);
}

torch::Tensor WNConv1dImpl::weight() const {
  return effective_weight(options.weight_norm(), weight_g, weight_v, weight_);
}

torch::Tensor WNConv1dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  int64_t symmetric = 0;
  torch::Tensor in = x;
  if (o.pad_left() == o.pad_right()) {
    symmetric = o.pad_left();  // let the convolution pad: no extra copy
  } else {
    in = torch::constant_pad_nd(x, {o.pad_left(), o.pad_right()}, 0);
  }
  if (o.weight_norm() && o.groups() == 1 && wants_gemm_backward(in, weight_v) &&
      wn_conv1d_gemm_applies(in, weight_v, weight_g, o.stride(), symmetric, o.dilation())) {
    return wn_conv1d_gemm(in, weight_v, weight_g, bias, o.stride(), symmetric, o.dilation());
  }
  const torch::Tensor w = weight();
  if (o.groups() == 1 && wants_gemm_backward(in, w) &&
      conv1d_gemm_applies(in, w, o.stride(), symmetric, o.dilation())) {
    return conv1d_gemm(in, w, bias, o.stride(), symmetric, o.dilation());
  }
  return torch::conv1d(in, w, bias, o.stride(), symmetric, o.dilation(), o.groups());
}

WNConvTranspose1dImpl::WNConvTranspose1dImpl(WNConvTranspose1dOptions options_)
    : options(std::move(options_)) {
  reset();
}

void WNConvTranspose1dImpl::reset() {
  const auto& o = options;
  // torch computes fan_in of a transposed conv from weight.size(1) (= out channels) × kernel.
  const int64_t fan_in = o.out_channels() * o.kernel_size();
  register_weight(*this, o.weight_norm(), {o.in_channels(), o.out_channels(), o.kernel_size()}, fan_in,
                  weight_g, weight_v, weight_);
  bias = register_bias(*this, o.bias(), o.out_channels(), fan_in);
}

torch::Tensor WNConvTranspose1dImpl::weight() const {
  return effective_weight(options.weight_norm(), weight_g, weight_v, weight_);
}

torch::Tensor WNConvTranspose1dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  const torch::Tensor w = weight();
  if (wants_gemm_backward(x, w) && conv_transpose1d_gemm_applies(x, w, o.stride(), o.padding())) {
    return conv_transpose1d_gemm(x, w, bias, o.stride(), o.padding());
  }
  return torch::conv_transpose1d(x, w, bias, o.stride(), o.padding());
}

WNConv2dImpl::WNConv2dImpl(WNConv2dOptions options_) : options(std::move(options_)) { reset(); }

void WNConv2dImpl::reset() {
  const auto& o = options;
  const auto k = o.kernel_size();
  const int64_t fan_in = o.in_channels() * k[0] * k[1];
  register_weight(*this, o.weight_norm(), {o.out_channels(), o.in_channels(), k[0], k[1]}, fan_in, weight_g,
                  weight_v, weight_);
  bias = register_bias(*this, o.bias(), o.out_channels(), fan_in);
}

torch::Tensor WNConv2dImpl::weight() const {
  return effective_weight(options.weight_norm(), weight_g, weight_v, weight_);
}

torch::Tensor WNConv2dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  const auto s = o.stride();
  const auto p = o.padding();
  const auto d = o.dilation();
  return torch::conv2d(x, weight(), bias, {s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]});
}

}  // namespace rt::models

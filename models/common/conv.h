// Convolutions as RAVE builds them (acids-ircam/RAVE rave/blocks.py, cached_conv convs.py):
// optional weight normalisation with torch's parameter names (`weight_g`, `weight_v`, else
// `weight`), optional `bias`, and explicit left/right padding so "centered" and "causal"
// layouts (cached_conv get_padding) are both expressible. Names are chosen so a state dict of
// ours reads like one of RAVE's.
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>
#include <utility>

#include "util/enum_names.h"

namespace rt::models {

// model.padding (cached_conv get_padding modes).
enum class PaddingMode { kCentered, kCausal, kMaxValue = kCausal };
constexpr EnumNames<PaddingMode> enum_names(PaddingMode) { return {{"centered", "causal"}}; }

// cached_conv get_padding: p = (kernel−1)·dilation + 1; centered → ((p−1)/2, p/2),
// causal → (p−1, 0); kernel 1 → (0, 0). Stride does not enter (as in cached_conv).
std::pair<int64_t, int64_t> get_padding(int64_t kernel_size, int64_t dilation = 1,
                                        PaddingMode mode = PaddingMode::kCentered);

struct WNConv1dOptions {
  WNConv1dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(int64_t, dilation) = 1;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(bool, weight_norm) = true;  // false: a plain conv with a `weight` parameter.
  TORCH_ARG(int64_t, pad_left) = 0;     // zero padding applied before the convolution
  TORCH_ARG(int64_t, pad_right) = 0;
};

// Conv1d, optionally weight-normed (torch.nn.utils.weight_norm, dim 0: g has shape (out,1,1)).
// Init: torch's default (kaiming-uniform, bound 1/sqrt(fan_in)), then g = ||v||, as
// weight_norm does. Input (B, C_in, T) → (B, C_out, T').
struct WNConv1dImpl : torch::nn::Module {
  explicit WNConv1dImpl(WNConv1dOptions options);
  void reset();
  torch::Tensor weight() const;  // the effective kernel (g·v/||v|| when weight-normed)
  torch::Tensor forward(const torch::Tensor& x);
  WNConv1dOptions options;
  torch::Tensor weight_g, weight_v, weight_, bias;
};
TORCH_MODULE(WNConv1d);

struct WNConvTranspose1dOptions {
  WNConvTranspose1dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(int64_t, padding) = 0;  // torch ConvTranspose1d padding (crops both ends)
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(bool, weight_norm) = true;
};

// ConvTranspose1d, weight (C_in, C_out, k); weight norm over dim 0 (g: (C_in,1,1)).
struct WNConvTranspose1dImpl : torch::nn::Module {
  explicit WNConvTranspose1dImpl(WNConvTranspose1dOptions options);
  void reset();
  torch::Tensor weight() const;
  torch::Tensor forward(const torch::Tensor& x);
  WNConvTranspose1dOptions options;
  torch::Tensor weight_g, weight_v, weight_, bias;
};
TORCH_MODULE(WNConvTranspose1d);

using Size2 = std::array<int64_t, 2>;

struct WNConv2dOptions {
  WNConv2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(Size2, kernel_size);
  TORCH_ARG(Size2, stride) = Size2{1, 1};
  TORCH_ARG(Size2, padding) = Size2{0, 0};  // symmetric, as torch Conv2d
  TORCH_ARG(Size2, dilation) = Size2{1, 1};
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, weight_norm) = true;
};

// Conv2d (discriminators), weight norm over dim 0.
struct WNConv2dImpl : torch::nn::Module {
  explicit WNConv2dImpl(WNConv2dOptions options);
  void reset();
  torch::Tensor weight() const;
  torch::Tensor forward(const torch::Tensor& x);
  WNConv2dOptions options;
  torch::Tensor weight_g, weight_v, weight_, bias;
};
TORCH_MODULE(WNConv2d);

}  // namespace rt::models

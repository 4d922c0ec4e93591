// RAVE's resampler of an exported model (acids-ircam/RAVE v2.3.1 rave/resampler.py, used by
// scripts/export.py --sr): a host rate that is an integer multiple of the model's. Down to the
// model's rate: a Kaiser lowpass (cutoff π/ratio, 140 dB, RAVE's kaiser_filter) as a strided
// convolution; up from it: the same filter's polyphase components, one output phase per
// channel, interleaved. Both convolutions are padded as cached_conv's centred "same" padding.
// RAVE's own builds at ratios 2 and 3 only (its polyphase reshape fails at 4, 5, 6, 8: its filter
// is padded by taps mod ratio); here every integer ratio builds, the same filters where RAVE's do.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace rt::rave {

// Whether RAVE's resampler takes host_rate: a multiple (≥ 2) of model_rate, and even when
// `streaming` (cached_conv's streaming convolutions need an even stride; RAVE's message asks for
// a power of two, its check refuses odd ratios). export --sr takes other rates through the
// rational converter (models/rave/rational_resampler.h).
bool integer_resampling(int64_t host_rate, int64_t model_rate, bool streaming);

struct ResamplerImpl : torch::nn::Module {
  // Throws rt::Error naming the rates where integer_resampling is false.
  ResamplerImpl(int64_t host_rate, int64_t model_rate, bool streaming = false);
  // (B, C, T) at the host's rate → (B, C, T / ratio) at the model's.
  torch::Tensor to_model_rate(const torch::Tensor& x);
  // (B, C, T) at the model's rate → (B, C, T · ratio) at the host's.
  torch::Tensor from_model_rate(const torch::Tensor& x);

  int64_t ratio = 1;
  torch::Tensor down_filter;  // (1, 1, K)
  torch::Tensor up_filter;    // (ratio, 1, K')
  // cached_conv's centred padding of each convolution: (K − 1) / 2 left, K / 2 right.
  int64_t down_left = 0, down_right = 0, up_left = 0, up_right = 0;
};
TORCH_MODULE(Resampler);

}  // namespace rt::rave

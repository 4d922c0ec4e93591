// The signal an FFT (torch::stft) is given under autocast (train.precision bf16 / fp16).
#pragma once

#include <torch/torch.h>

namespace rt::models {

// cuFFT has no bfloat16 (and its float16 takes power-of-two sizes only), so under autocast a
// decoder's reduced-precision output would stop the spectral losses. They are transformed in
// float32 instead, the precision autocast gives losses and reductions; other dtypes pass as
// they are (float64 runs stay float64).
inline torch::Tensor fft_input(const torch::Tensor& x) {
  const auto t = x.scalar_type();
  return t == torch::kBFloat16 || t == torch::kHalf ? x.to(torch::kFloat) : x;
}

}  // namespace rt::models

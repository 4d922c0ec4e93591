#include "models/rave/mel.h"

#include <cmath>

namespace rt::rave {

namespace {

// RAVE's module names: spectrogram.spectrogram.window, spectrogram.mel_scale.fb.
struct BufferHolderImpl : torch::nn::Module {};
TORCH_MODULE(BufferHolder);

}  // namespace

torch::Tensor htk_mel_filter_bank(int64_t n_freqs, int64_t n_mels, int64_t sample_rate) {
  // torchaudio.functional.melscale_fbanks, htk scale, norm None, in its order of operations.
  const auto all_freqs = torch::linspace(0, static_cast<double>(sample_rate / 2), n_freqs);
  const double f_max = static_cast<double>(sample_rate / 2);
  auto hz_to_mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double m_min = hz_to_mel(0.0), m_max = hz_to_mel(f_max);
  const auto m_pts = torch::linspace(m_min, m_max, n_mels + 2);
  const auto f_pts = 700.0 * (torch::pow(10.0, m_pts / 2595.0) - 1.0);
  const auto f_diff = f_pts.slice(0, 1) - f_pts.slice(0, 0, -1);
  const auto slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1);
  const auto down = -1.0 * slopes.slice(1, 0, -2) / f_diff.slice(0, 0, -1);
  const auto up = slopes.slice(1, 2) / f_diff.slice(0, 1);
  return torch::clamp_min(torch::min(down, up), 0.0);
}

MelSpectrogramImpl::MelSpectrogramImpl(int64_t sample_rate, int64_t n_fft_, int64_t hop_, int64_t n_mels_)
    : n_fft(n_fft_), hop(hop_), n_mels(n_mels_) {
  auto spectrogram = register_module("spectrogram", BufferHolder());
  window = spectrogram->register_buffer("window", torch::hann_window(n_fft));
  auto mel_scale = register_module("mel_scale", BufferHolder());
  filter_bank = mel_scale->register_buffer("fb", htk_mel_filter_bank(n_fft / 2 + 1, n_mels, sample_rate));
}

torch::Tensor MelSpectrogramImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3, "mel spectrogram: expected audio (batch, channels, time), got ", x.sizes());
  const int64_t b = x.size(0), c = x.size(1);
  auto spec =
      torch::stft(x.reshape({b * c, x.size(2)}), n_fft, hop, n_fft, window, /*center=*/true, "reflect",
                  /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
  spec = spec / window.pow(2.0).sum().sqrt();  // normalized = True: the window's L2 energy
  auto power = spec.abs().pow(2.0);            // (B·C, freq, frames)
  auto mel = torch::matmul(power.transpose(-1, -2), filter_bank).transpose(-1, -2);
  mel = mel.slice(-1, 0, mel.size(-1) - 1);  // RAVE: [..., :-1]
  return torch::log1p(mel).reshape({b, c * n_mels, mel.size(-1)});
}

}  // namespace rt::rave

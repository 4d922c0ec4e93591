// The mel front end of RAVE's hybrid configuration (acids-ircam/RAVE 2.3.1 hybrid.gin, model.py
// `_mel_encode`): torchaudio's MelSpectrogram(sample_rate, n_fft, win_length = n_fft, hop_length,
// normalized = True, n_mels) — a centred, reflect-padded STFT with a periodic hann window, its
// values divided by the window's L2 norm, squared magnitudes, then the HTK mel filter bank
// (torchaudio.functional.melscale_fbanks, f_min 0, f_max sr/2, no normalisation) — and RAVE's
// own last step: the final frame dropped and log1p, channels folded into the mel bins.
// Keys as RAVE's state_dict holds them: `spectrogram.window` (n_fft) and `mel_scale.fb`
// (n_fft/2 + 1, n_mels), under the model's `spectrogram`.
#pragma once

#include <torch/torch.h>

namespace rt::rave {

// torchaudio's melscale_fbanks(n_freqs, 0, sample_rate / 2, n_mels, sample_rate, None, "htk"),
// computed as it computes it (float32): (n_freqs, n_mels).
torch::Tensor htk_mel_filter_bank(int64_t n_freqs, int64_t n_mels, int64_t sample_rate);

struct MelSpectrogramImpl : torch::nn::Module {
  MelSpectrogramImpl(int64_t sample_rate, int64_t n_fft, int64_t hop, int64_t n_mels);
  // Audio (B, C, T) → log1p mel features (B, C·n_mels, T / hop), as RAVE's _mel_encode.
  torch::Tensor forward(const torch::Tensor& x);
  int64_t n_fft, hop, n_mels;
  torch::Tensor window, filter_bank;  // spectrogram.window, mel_scale.fb
};
TORCH_MODULE(MelSpectrogram);

}  // namespace rt::rave

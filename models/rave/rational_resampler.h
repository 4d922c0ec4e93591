// Sample-rate conversion by a rational factor, for export --sr at a host rate that is not an
// integer multiple of the model's (48000 Hz for a 44100 Hz model: 160/147). RAVE's own Resampler
// (models/rave/resampler.h) takes integer multiples only; its export turns 48000 into ratio 1 and
// writes a file that claims 48 kHz while running at 44.1 kHz.
//
// The converter is the textbook polyphase one: up by L, a Kaiser-windowed sinc lowpass on the
// L-times grid (passband to 0.45 × the lower rate, stopband from 0.5 ×, 100 dB), down by M. Output
// sample n is the band-limited input at n·M/L input samples: zero phase, no delay of its own. A
// cycle is M input samples → L output samples; the L output phases of a cycle are one strided
// convolution with L output channels (each phase's taps at its own offset in a shared window), so
// offline and streamed conversion are the same convolution over the same zero history.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace rt::rave {

// The largest L or M accepted (in lowest terms): 48000/44100 is 160/147, 44100/32000 441/320.
inline constexpr int64_t kMaxRationalTerm = 1000;

struct RationalResampling {
  int64_t from_rate = 0, to_rate = 0;
  int64_t up = 1, down = 1;  // L, M in lowest terms: to_rate / from_rate = L / M
  // (L, 1, window) float64: output phase j's taps, placed in a window of `window` input samples
  // that starts `history` samples before the cycle's first input.
  torch::Tensor weights;
  int64_t window = 0, history = 0;
  // How many input samples past a cycle's first the cycle's last output needs: window − history.
  int64_t lookahead() const { return window - history; }
  // Complete cycles a buffer of `buffered` samples (history included) can give.
  int64_t cycles_in(int64_t buffered) const { return buffered < window ? 0 : (buffered - window) / down + 1; }
};

// Designs the converter from `from_rate` to `to_rate` (both > 0, different). Throws rt::Error
// naming `flag` and the rates when L or M exceeds kMaxRationalTerm.
RationalResampling design_rational_resampling(int64_t from_rate, int64_t to_rate, const std::string& flag);

// The outputs of the first `cycles` cycles of `buffer` (B, C, T): buffer[..., 0] is `history`
// samples before cycle 0's first input. (B, C, cycles · L).
torch::Tensor resample_cycles(const RationalResampling& r, const torch::Tensor& buffer, int64_t cycles);

// Offline: (B, C, T) at from_rate → (B, C, ceil(T · L / M)) at to_rate, zeros before and after.
torch::Tensor resample_rational(const RationalResampling& r, const torch::Tensor& x);

}  // namespace rt::rave

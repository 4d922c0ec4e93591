// RAVE's waveform transforms after the crop, phase mangle and dequantisation
// (acids-ircam/RAVE 2.3.1 rave/dataset.py get_dataset, rave/transforms.py), in its order:
//   normalize (--normalize)  → derivative (--derivative) → augmentations (--augment …, in order)
//
// - normalize: peak normalisation, at most +30 dB (normalize_signal).
// - derivative: y[n] = (x[n] − x[n−1]) / 2 (lfilter([.5, −.5], [1])); RAVE integrates the
//   validation audio it logs back with its integrator (integrate_derivative below).
// - mute: RandomMute, the whole example silenced with probability 0.1.
// - compress: RandomCompress, with probability 0.8 SoX's `compand 0.1,0.1 6:-80,-40,A`, A
//   uniform in [−60, 0) dB, run by libsox as torchaudio.sox_effects runs it (float32 → int32
//   samples ×2^31 truncated, back ÷2^31), so that the output equals RAVE's sample for sample.
//   RAVE builds it with sr = 44100 whatever the data; here the data's rate sets attack/release.
// - gain: RandomGain, with probability 0.5 a gain uniform in [−6, 3] dB, divided back to a peak
//   of 1 where it clips. RAVE 2.3.1's RandomGain computes this but returns its input unchanged
//   (transforms.py: `return x` after computing x_amp), so its `--augment gain` trains on the
//   audio as it is; this one applies the gain the flag promises (docs/config.md).
// - normalize_ambient: normalize_ambient.gin's fixed Compress: `compand 0.01,0.01
//   6:-30,-15,-10,-8,0,-5 0` on every example.
#pragma once

#include <torch/torch.h>

#include <random>
#include <string>
#include <vector>

namespace rt {

enum class Augmentation { kMute, kCompress, kGain, kNormalizeAmbient };

// "mute,compress" → the list; throws rt::Error naming `key` and the accepted names.
std::vector<Augmentation> parse_augmentations(const std::string& text, const std::string& key);
const char* augmentation_name(Augmentation a);

// x: [channels, length] contiguous float32, changed in place (compress may replace it).
void apply_augmentation(Augmentation a, torch::Tensor& x, int sampling_rate, std::mt19937_64& rng);
void normalize_peak(torch::Tensor& x, double max_gain_db = 30.0);
void take_derivative(torch::Tensor& x);
// RAVE's integrator for --derivative runs (lfilter([α², −α²], [1, −2α, α²]), α = 1/(1 + 2π·10/sr)),
// per row, zero initial state; float64 inside as scipy.
void integrate_derivative(torch::Tensor& x, int sampling_rate);

// scipy.signal.resample_poly(x, up, down, axis=-1, window=('kaiser', 5.0), padtype='mean') per
// row of x ([rows, length] float32): a Kaiser-windowed sinc FIR (firwin, 20·max(up, down) + 1
// taps) applied polyphase to the signal minus its mean, the mean added back. Float64 inside.
torch::Tensor resample_poly(const torch::Tensor& x, int64_t up, int64_t down);

// RAVE's RandomPitch (--rand_pitch LO,HI; rave/transforms.py), applied to the whole record before
// the crop: with probability 0.5 a factor uniform in [LO, min(HI, length / n_signal)], rounded up
// to the nearest ratio x/y of integers 1…19 (x ≠ y) in [LO, HI], resamples the record by x/y.
class RandomPitch {
 public:
  RandomPitch(double lo, double hi, int64_t n_signal);
  // The record, resampled or not.
  torch::Tensor operator()(const torch::Tensor& record, std::mt19937_64& rng) const;
  // The (up, down) pair a factor maps to (bisect_left over the sorted factors, the last one past them).
  std::pair<int64_t, int64_t> ratio_for(double factor) const;

 private:
  double lo_, hi_;
  int64_t n_signal_;
  std::vector<double> factors_;
  std::vector<std::pair<int64_t, int64_t>> ratios_;
};

// SoX's compand effect through libsox (thread-safe: calls are serialised), with sox's own
// argument strings ("0.1,0.1", "6:-80,-40,-30.5", optionally a gain "0"). Returns a new tensor
// of x's shape. Throws rt::Error with sox's message for arguments it refuses.
torch::Tensor sox_compand(const torch::Tensor& x, int sampling_rate, const std::vector<std::string>& args);

}  // namespace rt

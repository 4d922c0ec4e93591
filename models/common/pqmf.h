// Pseudo-quadrature mirror filter bank (acids-ircam/RAVE rave/pqmf.py, CachedPQMF).
// The prototype is a Kaiser-windowed sinc for `attenuation` dB (β = 0.1102·(A − 8.7), odd tap
// count from Kaiser's formula); its cutoff wc minimises the aliasing max|g[k·2M]| (k ≥ 1) of
// g = h ∗ h[::-1], searched by Nelder–Mead from 1/M as scipy.optimize.fmin does. For M = 16,
// A = 100: wc ≈ 0.10752 rad, 377 taps. Analysis and synthesis are polyphase convolutions.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "models/common/conv.h"

namespace rt::models {

// Modified Bessel function of the first kind, order 0 (power series).
double bessel_i0(double x);

// Symmetric Kaiser window of n points (scipy.signal.get_window(('kaiser', β), n, fftbins=False)).
std::vector<double> kaiser_window(int64_t n, double beta);

// scipy.signal.kaiserord(ripple_db, width) with width in units of Nyquist: {numtaps, β}.
std::pair<int64_t, double> kaiser_order(double ripple_db, double width);

// scipy firwin(n, wc, window=('kaiser', β), scale=False, nyq=π): lowpass, cutoff wc in rad.
std::vector<double> firwin_kaiser(int64_t n, double wc, double beta);

// RAVE kaiser_filter: kaiserord(atten, wc/π), tap count forced odd unless `n` > 0 is given.
std::vector<double> kaiser_filter(double wc, double atten, int64_t n = 0);

// RAVE loss_wc: max |(h ∗ h[::-1])[centre + k·2M]| over k ≥ 1.
double pqmf_aliasing(double wc, double atten, int64_t n_band, int64_t n = 0);

// scipy.optimize.fmin (Nelder–Mead, xtol = ftol = 1e-4, ≤ 200 iterations/evaluations) in 1-D.
double nelder_mead_1d(const std::function<double(double)>& f, double x0);

struct PqmfPrototype {
  double wc = 0;    // cutoff, rad
  double beta = 0;  // Kaiser β
  std::vector<double> h;
};
PqmfPrototype pqmf_prototype(double atten, int64_t n_band);

// Fixed (non-trainable) conv kernel holder, so keys read `forward_conv.weight` as in RAVE.
struct FixedConvImpl : torch::nn::Module {
  explicit FixedConvImpl(torch::Tensor weight);
  torch::Tensor weight;
};
TORCH_MODULE(FixedConv);

// PQMF with RAVE's CachedPQMF layout: buffers `hk` (M, 2^⌈log2 N⌉), `h` (N); fixed parameters
// (requires_grad = false, in no optimizer) `forward_conv.weight` (M, 1, 2^⌈log2 N⌉+1) and
// `inverse_conv.weight` (M, M, 2^⌈log2 N⌉/M + 1): 16,656 values for M = 16.
// REQUIRES: n_band a power of two (polyphase). n_band == 1 is the identity.
struct PqmfImpl : torch::nn::Module {
  explicit PqmfImpl(int64_t n_band = 16, double attenuation = 100, PaddingMode mode = PaddingMode::kCentered);
  // Analysis: (B, C, T) → (B, C·M, ⌈T/M⌉), channel c's bands at [c·M, (c+1)·M).
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor analysis(const torch::Tensor& x) { return forward(x); }
  // Synthesis: (B, C·M, T') → (B, C, T'·M). Round trip delays by about M samples.
  torch::Tensor inverse(const torch::Tensor& x);

  int64_t n_band() const { return n_band_; }
  // The zero padding (left, right) before the analysis and the synthesis convolutions: RAVE's
  // CachedPQMF forward_conv / inverse_conv `_pad` (cached_conv's get_padding, centred or causal).
  std::pair<int64_t, int64_t> forward_padding() const { return forward_pad_; }
  std::pair<int64_t, int64_t> inverse_padding() const { return inverse_pad_; }
  const PqmfPrototype& prototype() const { return prototype_; }
  // Replaces the prototype `h` and the centre-padded bank `hk` (RAVE's CachedPQMF's values, e.g.
  // from a RAVE checkpoint) and the analysis and synthesis kernels made from the bank. The bank's
  // float32 cos is the one thing here a LibTorch may round otherwise than PyTorch 2 (Debian's
  // 2.6 does): the oracle tests install RAVE's own bank to keep that out of their comparisons.
  // REQUIRES: the shapes of h and hk.
  void set_filters(const torch::Tensor& prototype, const torch::Tensor& bank);

  torch::Tensor hk, h;
  FixedConv forward_conv{nullptr}, inverse_conv{nullptr};

 private:
  torch::Tensor reverse_half(const torch::Tensor& x) const;
  // The analysis kernel (M, 1, L+1) and the polyphase synthesis kernel (M, M, L/M+1) of a bank.
  std::pair<torch::Tensor, torch::Tensor> kernels_of(const torch::Tensor& bank) const;
  int64_t n_band_;
  PqmfPrototype prototype_;
  std::pair<int64_t, int64_t> forward_pad_, inverse_pad_;
};
TORCH_MODULE(Pqmf);

}  // namespace rt::models

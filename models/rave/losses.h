// RAVE losses (acids-ircam/RAVE rave/core.py).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

namespace rt::rave {

// The float32 hann window of n samples the spectral distances apply (RAVE: torchaudio's
// Spectrogram buffer, torch.hann_window). By default this LibTorch's torch::hann_window. Debian's
// LibTorch 1.13 and 2.6 round some values one ulp away from PyTorch 2's, and the log-magnitude
// term amplifies that into gradients. Tests that compare with the real RAVE substitute RAVE's own
// windows (tests/support/golden.h, RavesWindows), as they substitute its noise draws; an empty
// source restores the default. Not thread-safe: set it before training starts.
using StftWindowSource = std::function<torch::Tensor(int64_t n)>;
void set_stft_window_source(StftWindowSource source);

// AudioDistanceV1 over MultiScaleSTFT: Σ over scales n of
//   mean((X−Y)²)/mean(X²) + mean|log(X+ε) − log(Y+ε)|
// with X, Y the STFT magnitudes (hann, hop n/4, centred, reflect-padded). x and y are
// (B, T) or (B, C, T) — channels/bands fold into the batch, so the multiband distance is the
// same call on (B, 16, T/16). REQUIRES: every scale/2 < T (reflect padding).
// `energy` ([scales], optional): the convergence terms' denominators mean(|STFT(x)|²) per scale,
// computed beforehand (data parallelism: the global batch's, all scales in one all-reduce,
// spectral_energy); undefined: computed here (models::batch_global_mean).
// `x_magnitudes` (optional): stft_magnitudes(x, scales), computed beforehand (a data-parallel
// step needs them early for the denominators; passing them spares computing them twice).
// REQUIRES with x_magnitudes: x carries no gradient (it is the real audio).
// On the CPU (float or double), the STFT is one autograd node of our own (the windowed frames
// written in one pass, a real FFT; backward an inverse real FFT and one overlap-add pass) instead
// of torch.stft's padding, strided view, window product and their backward (a full-length complex
// FFT, index_add); the target's magnitudes are one vectorised pass; and, with a target that
// carries no gradient, each scale's two terms are one node (one pass over the spectrum each way,
// models/rave/spectral_kernel.h) instead of about ten aten operators. Same values and gradients
// within float rounding; second derivatives (create_graph) through aten's operators.
torch::Tensor spectral_distance(const torch::Tensor& x, const torch::Tensor& y,
                                const std::vector<int64_t>& scales, double log_epsilon = 1e-7,
                                const torch::Tensor& energy = {},
                                const std::vector<torch::Tensor>* x_magnitudes = nullptr);

// Process-wide switch for those nodes and the magnitude kernel (default on); off: torch.stft
// and the operator chain everywhere (`rave_bench step --ab spectral`, for A/B runs).
void set_fused_spectral_terms(bool enabled);
bool fused_spectral_terms();

// |STFT(x)| at each scale, as spectral_distance computes it (no gradient).
std::vector<torch::Tensor> stft_magnitudes(const torch::Tensor& x, const std::vector<int64_t>& scales);

// mean(|STFT(x)|²) per scale from stft_magnitudes(x, scales) ([scales], no gradient):
// spectral_distance's denominators before they are combined over ranks.
torch::Tensor spectral_energy(const std::vector<torch::Tensor>& magnitudes);

// core.hinge_gan: {mean(relu(1−real) + relu(1+fake)), −mean(fake)} = {loss_dis, loss_gen}.
std::pair<torch::Tensor, torch::Tensor> hinge_gan(const torch::Tensor& score_real,
                                                  const torch::Tensor& score_fake);

// core.mean_difference (L1): mean|r−f|, divided by mean|r| when relative (the global batch's
// under data parallelism, models/common/batch_slice.h; rave_losses_from_forward divides by
// denominators it combined over ranks itself, asking for the plain difference).
torch::Tensor mean_difference(const torch::Tensor& real, const torch::Tensor& fake, bool relative);

}  // namespace rt::rave

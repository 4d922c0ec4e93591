// RAVE losses (acids-ircam/RAVE rave/core.py).
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace rt::rave {

// AudioDistanceV1 over MultiScaleSTFT: Σ over scales n of
//   mean((X−Y)²)/mean(X²) + mean|log(X+ε) − log(Y+ε)|
// with X, Y the STFT magnitudes (hann, hop n/4, centred, reflect-padded). x and y are
// (B, T) or (B, C, T) — channels/bands fold into the batch, so the multiband distance is the
// same call on (B, 16, T/16). REQUIRES: every scale/2 < T (reflect padding).
torch::Tensor spectral_distance(const torch::Tensor& x, const torch::Tensor& y,
                                const std::vector<int64_t>& scales, double log_epsilon = 1e-7);

// core.hinge_gan: {mean(relu(1−real) + relu(1+fake)), −mean(fake)} = {loss_dis, loss_gen}.
std::pair<torch::Tensor, torch::Tensor> hinge_gan(const torch::Tensor& score_real,
                                                  const torch::Tensor& score_fake);

// core.mean_difference (L1): mean|r−f|, divided by mean|r| when relative.
torch::Tensor mean_difference(const torch::Tensor& real, const torch::Tensor& fake,
                              bool relative);

}  // namespace rt::rave

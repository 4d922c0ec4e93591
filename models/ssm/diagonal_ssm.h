// The other SSM kinds of model.ssm, beside S5 (s5.h), as foundational_ssm compares them
// (Melina-Jingting/foundational_ssm models/): each a diagonal linear recurrence run by the same
// scan (diagonal_scan), each from its paper's equations.
//
// S4D (Gu, Gupta, Goel & Ré, "On the Parameterization and Initialization of Diagonal State Space
// Models", 2022): d_model independent single-input single-output SSMs of state_dim/2 complex
// states each (the other half are their conjugates), for channel h and state n
//   A = −exp(log_A_real) + i·A_imag   (S4D-Lin: −½ + iπn),  Δ_h = exp(log_dt_h),
//   ZOH: Ā = exp(ΔA), B̄ = (Ā − 1)/A (B = 1);  bilinear: Ā = (1 + ΔA/2)/(1 − ΔA/2), B̄ = Δ/(1 − ΔA/2),
//   x_t = Ā ⊙ x_{t−1} + B̄ u_t,  y_t = 2·Re(Σ_n C_n x_t,n) + D ⊙ u_t.
// model.scan = sequential runs that recurrence; parallel and fused run its convolution form, as
// the paper trains it: y = K ∗ u + D ⊙ u with K_h[l] = 2·Re(Σ_n C_n B̄_n Ā_n^l), by FFT.
//
// LRU (Orvieto et al., "Resurrecting Recurrent Neural Networks for Long Sequences", 2023):
// state_dim complex states shared by the channels,
//   λ = exp(−exp(nu_log) + i·exp(theta_log)),  γ = sqrt(1 − |λ|²),
//   x_t = λ ⊙ x_{t−1} + γ ⊙ (B u_t),  y_t = Re(C x_t) + D ⊙ u_t,
// initialised on the ring r_min ≤ |λ| ≤ r_max, 0 ≤ arg λ ≤ max_phase (the paper's defaults 0, 1
// and 2π), B and C with Glorot-style complex normals.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "models/ssm/s5.h"

namespace rt::ssm {

// x_t = λ̄ ⊙ x_{t−1} + bu_t (x_{−1} = 0): λ̄ [P] complex, bu [B, T, P] complex → x [B, T, P]
// complex, by `scan`: the sequential or parallel scan on complex tensors, or the fused real
// kernel (complex_recurrence; on CPU). Differentiable.
torch::Tensor diagonal_scan(const torch::Tensor& lambda_bar, const torch::Tensor& bu, ScanKind scan);

class S4dLayerImpl : public SsmLayerBase {
 public:
  explicit S4dLayerImpl(const S5LayerOptions& options);
  torch::Tensor forward(const torch::Tensor& u) override;
  torch::Tensor forward_fused_rows(const torch::Tensor& u2, int64_t batch) override;
  const torch::Tensor& feedthrough() const override { return D; }
  // (Ā, B̄), each [H, N'] complex.
  std::pair<torch::Tensor, torch::Tensor> discretize() const;

  torch::Tensor log_A_real, A_imag;  // [H, N']
  torch::Tensor C;                   // [H, N', 2]
  torch::Tensor D;                   // [H]
  torch::Tensor log_dt;              // [H]

 private:
  // 2·Re(Σ_n C x) + nothing else, from the states x [B, T, H·N'].
  torch::Tensor readout(const torch::Tensor& x, int64_t B, int64_t T) const;
  // S4D's convolution form of the same map, without the feed-through: y = K ∗ u with the kernel
  // K_h[l] = 2·Re(Σ_n C B̄ Ā^l) (H × T values instead of B × T × H × N' states), by FFT.
  // us [B, T, H] in the parameters' precision.
  torch::Tensor convolve(const torch::Tensor& us) const;
};
TORCH_MODULE(S4dLayer);

class LruLayerImpl : public SsmLayerBase {
 public:
  explicit LruLayerImpl(const S5LayerOptions& options);
  torch::Tensor forward(const torch::Tensor& u) override;
  std::optional<RecurrenceWeights> recurrence_weights() const override;
  const torch::Tensor& feedthrough() const override { return D; }
  // λ [P] complex.
  torch::Tensor lambda() const;

  torch::Tensor nu_log, theta_log;  // [P]
  torch::Tensor B;                  // [P, H, 2]
  torch::Tensor C;                  // [H, P, 2]
  torch::Tensor D;                  // [H]
};
TORCH_MODULE(LruLayer);

// The layer options.kind names.
std::shared_ptr<SsmLayerBase> make_ssm_layer(const S5LayerOptions& options);

}  // namespace rt::ssm

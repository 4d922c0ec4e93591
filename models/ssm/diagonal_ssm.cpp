#include "models/ssm/diagonal_ssm.h"

#include <cmath>

#include "models/common/row_linear.h"
#include "util/error.h"

namespace rt::ssm {
namespace {

torch::Tensor as_param(const torch::Tensor& t) { return t.to(torch::get_default_dtype()).contiguous(); }

torch::Tensor log_uniform(int64_t n, double lo, double hi) {
  return torch::rand({n}, torch::kFloat64) * (std::log(hi) - std::log(lo)) + std::log(lo);
}

// u [.., H] real → complex of the same precision.
torch::Tensor to_complex(const torch::Tensor& u) { return torch::complex(u, torch::zeros_like(u)); }

}  // namespace

torch::Tensor diagonal_scan(const torch::Tensor& lambda_bar, const torch::Tensor& bu, ScanKind scan) {
  TORCH_CHECK(bu.dim() == 3 && lambda_bar.dim() == 1 && lambda_bar.size(0) == bu.size(2),
              "diagonal_scan: expected lambda_bar [P] and bu [B, T, P], got ", lambda_bar.sizes(), " and ",
              bu.sizes());
  const int64_t T = bu.size(1), P = bu.size(2);
  if (scan == ScanKind::kFused) {
    auto packed = torch::cat({torch::real(bu), torch::imag(bu)}, 2).contiguous();
    auto x = complex_recurrence(torch::real(lambda_bar).contiguous(), torch::imag(lambda_bar).contiguous(),
                                packed);
    return torch::complex(x.narrow(2, 0, P), x.narrow(2, P, P));
  }
  auto a = lambda_bar.unsqueeze(0).expand({T, P});
  return scan == ScanKind::kParallel ? scan_parallel(a, bu) : scan_sequential(a, bu);
}

S4dLayerImpl::S4dLayerImpl(const S5LayerOptions& options) : SsmLayerBase(options) {
  options_.validate();
  const int64_t H = options_.d_model, N = options_.state_dim / 2;
  // S4D-Lin: A_n = −½ + iπn; C a unit complex normal; Δ log-uniform in [dt_min, dt_max] per channel.
  log_A_real =
      register_parameter("log_A_real", as_param(torch::full({H, N}, std::log(0.5), torch::kFloat64)));
  A_imag = register_parameter("A_imag",
                              as_param(M_PI * torch::arange(N, torch::kFloat64).unsqueeze(0).expand({H, N})));
  C = register_parameter("C", as_param(torch::randn({H, N, 2}, torch::kFloat64) * std::sqrt(0.5)));
  D = register_parameter("D", as_param(torch::randn({H}, torch::kFloat64)));
  log_dt = register_parameter("log_dt", as_param(log_uniform(H, options_.dt_min, options_.dt_max)));
}

std::pair<torch::Tensor, torch::Tensor> S4dLayerImpl::discretize() const {
  auto A = torch::complex(-torch::exp(log_A_real), A_imag);  // [H, N]
  auto dt = torch::exp(log_dt).unsqueeze(1);                 // [H, 1]
  if (options_.discretization == Discretization::kZoh) {
    auto a_bar = torch::exp(A * dt);
    return {a_bar, (a_bar - 1.0) / A};
  }
  auto inv = 1.0 / (1.0 - (dt / 2.0) * A);
  return {inv * (1.0 + (dt / 2.0) * A), inv * dt};
}

torch::Tensor S4dLayerImpl::readout(const torch::Tensor& x, int64_t B, int64_t T) const {
  const int64_t H = options_.d_model, N = options_.state_dim / 2;
  auto c = torch::view_as_complex(C);  // [H, N]
  return 2.0 * torch::real((x.view({B, T, H, N}) * c).sum(-1));
}

torch::Tensor S4dLayerImpl::convolve(const torch::Tensor& us) const {
  const int64_t T = us.size(1);
  auto [a_bar, b_bar] = discretize();                                             // [H, N]
  auto steps = torch::arange(T, torch::TensorOptions().dtype(us.scalar_type()));  // [T]
  auto powers = torch::exp(torch::log(a_bar).unsqueeze(-1) * steps);              // Ā^l [H, N, T]
  auto cb = (torch::view_as_complex(C) * b_bar).unsqueeze(-1);                    // C·B̄ [H, N, 1]
  auto kernel = 2.0 * torch::real((cb * powers).sum(1));                          // K [H, T]
  // Causal convolution along time by FFT, zero-padded to 2T (no wrap-around).
  const int64_t n = 2 * T;
  auto spectrum = torch::fft::rfft(us.transpose(1, 2), n) * torch::fft::rfft(kernel, n);  // [B, H, T + 1]
  return torch::fft::irfft(spectrum, n).narrow(-1, 0, T).transpose(1, 2);                 // [B, T, H]
}

torch::Tensor S4dLayerImpl::forward(const torch::Tensor& u) {
  TORCH_CHECK(u.dim() == 3 && u.size(2) == options_.d_model, "S4dLayer: expected input [B, T, ",
              options_.d_model, "], got ", u.sizes());
  // The recurrence in the parameters' precision (under autocast u may be lower).
  auto us = u.to(log_dt.scalar_type());
  if (options_.scan != ScanKind::kSequential) return convolve(us) + D * us;
  const int64_t B = u.size(0), T = u.size(1), H = options_.d_model, N = options_.state_dim / 2;
  auto [a_bar, b_bar] = discretize();
  auto bu = (to_complex(us).unsqueeze(-1) * b_bar).reshape({B, T, H * N});
  auto x = diagonal_scan(a_bar.reshape({H * N}), bu, options_.scan);
  return readout(x, B, T) + D * us;
}

torch::Tensor S4dLayerImpl::forward_fused_rows(const torch::Tensor& u2, int64_t batch) {
  TORCH_CHECK(u2.dim() == 2 && u2.size(1) == options_.d_model && batch >= 1 && u2.size(0) % batch == 0,
              "S4dLayer::forward_fused_rows: expected u [B*T, ", options_.d_model, "] with B = ", batch,
              ", got ", u2.sizes());
  const int64_t rows = u2.size(0), H = options_.d_model;
  return convolve(u2.to(log_dt.scalar_type()).view({batch, rows / batch, H})).reshape({rows, H});
}

LruLayerImpl::LruLayerImpl(const S5LayerOptions& options) : SsmLayerBase(options) {
  options_.validate();
  const int64_t H = options_.d_model, P = options_.state_dim;
  // The paper's ring initialisation with its defaults r_min = 0, r_max = 1, max_phase = 2π:
  // |λ|² uniform on [r_min², r_max²], arg λ uniform on [0, max_phase].
  const double r_min = 0.0, r_max = 1.0, max_phase = 2.0 * M_PI;
  auto u1 = torch::rand({P}, torch::kFloat64).clamp_min(1e-12), u2 = torch::rand({P}, torch::kFloat64);
  nu_log = register_parameter(
      "nu_log",
      as_param(torch::log(-0.5 * torch::log(u1 * (r_max * r_max - r_min * r_min) + r_min * r_min))));
  theta_log = register_parameter("theta_log", as_param(torch::log(max_phase * u2.clamp_min(1e-12))));
  B = register_parameter("B", as_param(torch::randn({P, H, 2}, torch::kFloat64) / std::sqrt(2.0 * H)));
  C = register_parameter(
      "C", as_param(torch::randn({H, P, 2}, torch::kFloat64) / std::sqrt(static_cast<double>(P))));
  D = register_parameter("D", as_param(torch::randn({H}, torch::kFloat64)));
}

torch::Tensor LruLayerImpl::lambda() const {
  return torch::exp(torch::complex(-torch::exp(nu_log), torch::exp(theta_log)));
}

torch::Tensor LruLayerImpl::forward(const torch::Tensor& u) {
  TORCH_CHECK(u.dim() == 3 && u.size(2) == options_.d_model, "LruLayer: expected input [B, T, ",
              options_.d_model, "], got ", u.sizes());
  // γ = sqrt(1 − |λ|²) = sqrt(1 − exp(−2·exp(ν))), as −expm1 for |λ| near 1.
  auto gamma = torch::sqrt(-torch::expm1(-2.0 * torch::exp(nu_log)));  // [P]
  auto us = u.to(nu_log.scalar_type());
  auto b = torch::view_as_complex(B);  // [P, H]
  auto bu = torch::matmul(to_complex(us), b.t()) * gamma;
  auto x = diagonal_scan(lambda(), bu, options_.scan);
  return torch::real(torch::matmul(x, torch::view_as_complex(C).t())) + D * us;
}

std::optional<SsmLayerBase::RecurrenceWeights> LruLayerImpl::recurrence_weights() const {
  auto gamma = torch::sqrt(-torch::expm1(-2.0 * torch::exp(nu_log))).unsqueeze(1);  // [P, 1]
  auto lam = lambda();
  return RecurrenceWeights{torch::cat({B.select(2, 0) * gamma, B.select(2, 1) * gamma}, 0),  // [2P, H]
                           torch::real(lam), torch::imag(lam),
                           torch::cat({C.select(2, 0), -C.select(2, 1)}, 1)};  // [H, 2P]: Re(Cx)
}

std::shared_ptr<SsmLayerBase> make_ssm_layer(const S5LayerOptions& options) {
  switch (options.kind) {
    case SsmKind::kS4d:
      return std::make_shared<S4dLayerImpl>(options);
    case SsmKind::kLru:
      return std::make_shared<LruLayerImpl>(options);
    case SsmKind::kS5:
      break;
  }
  return std::make_shared<S5LayerImpl>(options);
}

}  // namespace rt::ssm

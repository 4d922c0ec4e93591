#include "models/common/pqmf.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/common/conv1d_backward.h"
#include "models/common/onednn_check.h"

namespace rt::models {

double bessel_i0(double x) {
  // Σ ((x/2)^k / k!)², converging for every finite x.
  const double q = x * x / 4.0;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 500; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

std::vector<double> kaiser_window(int64_t n, double beta) {
  std::vector<double> w(static_cast<size_t>(n), 1.0);
  if (n == 1) return w;
  const double denom = bessel_i0(beta);
  const double alpha = (n - 1) / 2.0;
  for (int64_t i = 0; i < n; ++i) {
    const double r = (i - alpha) / alpha;
    w[static_cast<size_t>(i)] = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / denom;
  }
  return w;
}

std::pair<int64_t, double> kaiser_order(double ripple_db, double width) {
  const double a = std::abs(ripple_db);
  double beta = 0.0;
  if (a > 50) {
    beta = 0.1102 * (a - 8.7);
  } else if (a > 21) {
    beta = 0.5842 * std::pow(a - 21, 0.4) + 0.07886 * (a - 21);
  }
  const double numtaps = (a - 7.95) / 2.285 / (M_PI * width) + 1;
  return {static_cast<int64_t>(std::ceil(numtaps)), beta};
}

std::vector<double> firwin_kaiser(int64_t n, double wc, double beta) {
  const double c = wc / M_PI;  // cutoff in units of Nyquist
  const double alpha = 0.5 * (n - 1);
  const auto w = kaiser_window(n, beta);
  std::vector<double> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = c * (i - alpha);
    const double sinc = x == 0.0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x);
    h[static_cast<size_t>(i)] = c * sinc * w[static_cast<size_t>(i)];
  }
  return h;
}

std::vector<double> kaiser_filter(double wc, double atten, int64_t n) {
  auto [n_auto, beta] = kaiser_order(atten, wc / M_PI);
  n_auto = 2 * (n_auto / 2) + 1;
  return firwin_kaiser(n > 0 ? n : n_auto, wc, beta);
}

double pqmf_aliasing(double wc, double atten, int64_t n_band, int64_t n) {
  // Outside (0, π) Kaiser's formula breaks down; such points are simply bad candidates.
  if (!(wc > 1e-3 && wc < M_PI)) return std::numeric_limits<double>::infinity();
  const auto h = kaiser_filter(wc, atten, n);
  const int64_t len = static_cast<int64_t>(h.size());
  // (h ∗ h[::-1]) at centre + lag is the autocorrelation Σ_i h[i]·h[i−lag].
  double worst = 0.0;
  for (int64_t lag = 2 * n_band; lag < len; lag += 2 * n_band) {
    double acc = 0.0;
    for (int64_t i = lag; i < len; ++i) acc += h[static_cast<size_t>(i)] * h[static_cast<size_t>(i - lag)];
    worst = std::max(worst, std::abs(acc));
  }
  return worst;
}

double nelder_mead_1d(const std::function<double(double)>& f, double x0) {
  // scipy.optimize.fmin defaults: ρ=1, χ=2, ψ=0.5, σ=0.5, initial step 5 %, xatol=fatol=1e-4,
  // maxiter = maxfun = 200·dim.
  constexpr double kRho = 1, kChi = 2, kPsi = 0.5, kSigma = 0.5, kTol = 1e-4;
  constexpr int kMax = 200;
  double sim[2] = {x0, x0 != 0.0 ? 1.05 * x0 : 0.00025};
  double fsim[2] = {f(sim[0]), f(sim[1])};
  int fcalls = 2;
  auto sort = [&] {
    if (fsim[1] < fsim[0]) {
      std::swap(sim[0], sim[1]);
      std::swap(fsim[0], fsim[1]);
    }
  };
  sort();
  for (int iterations = 1; fcalls < kMax && iterations < kMax; ++iterations) {
    if (std::abs(sim[1] - sim[0]) <= kTol && std::abs(fsim[0] - fsim[1]) <= kTol) break;
    const double xbar = sim[0];
    const double xr = (1 + kRho) * xbar - kRho * sim[1];
    const double fxr = f(xr);
    ++fcalls;
    bool shrink = false;
    if (fxr < fsim[0]) {
      const double xe = (1 + kRho * kChi) * xbar - kRho * kChi * sim[1];
      const double fxe = f(xe);
      ++fcalls;
      if (fxe < fxr) {
        sim[1] = xe, fsim[1] = fxe;
      } else {
        sim[1] = xr, fsim[1] = fxr;
      }
    } else if (fxr < fsim[1]) {  // (scipy's "fxr < fsim[-2]" branch is empty in 1-D)
      const double xc = (1 + kPsi * kRho) * xbar - kPsi * kRho * sim[1];
      const double fxc = f(xc);
      ++fcalls;
      if (fxc <= fxr) {
        sim[1] = xc, fsim[1] = fxc;
      } else {
        shrink = true;
      }
    } else {
      const double xcc = (1 - kPsi) * xbar + kPsi * sim[1];
      const double fxcc = f(xcc);
      ++fcalls;
      if (fxcc < fsim[1]) {
        sim[1] = xcc, fsim[1] = fxcc;
      } else {
        shrink = true;
      }
    }
    if (shrink) {
      sim[1] = sim[0] + kSigma * (sim[1] - sim[0]);
      fsim[1] = f(sim[1]);
      ++fcalls;
    }
    sort();
  }
  return sim[0];
}

PqmfPrototype pqmf_prototype(double atten, int64_t n_band) {
  PqmfPrototype p;
  p.wc = nelder_mead_1d([&](double w) { return pqmf_aliasing(w, atten, n_band); },
                        1.0 / static_cast<double>(n_band));
  p.beta = kaiser_order(atten, p.wc / M_PI).second;
  p.h = kaiser_filter(p.wc, atten);
  return p;
}

FixedConvImpl::FixedConvImpl(torch::Tensor w) {
  ensure_correct_cpu_convolutions();  // before the first convolution runs (onednn_check.h)
  weight = register_parameter("weight", std::move(w), /*requires_grad=*/false);
}

PqmfImpl::PqmfImpl(int64_t n_band, double attenuation, PaddingMode mode) : n_band_(n_band) {
  TORCH_CHECK(n_band >= 1 && (n_band & (n_band - 1)) == 0, "PQMF: n_band must be a power of two, got ",
              n_band);
  if (n_band == 1) return;
  prototype_ = pqmf_prototype(attenuation, n_band);
  const int64_t n = static_cast<int64_t>(prototype_.h.size());
  auto hd = torch::tensor(prototype_.h, torch::kFloat64);

  // Cosine-modulated bank: h_k = 2h·cos((2k+1)π/(2M)·t + (−1)^k π/4), t = −N/2 … N/2, computed
  // as RAVE's get_qmf_bank does (rave/pqmf.py): integer k and t, and every product in float32
  // (an integer tensor times a Python float is float32), from the float32 prototype. The bank
  // then holds RAVE's float32 values, which a float64 model casts as RAVE's does.
  const auto h32 = hd.to(torch::kFloat32);
  auto k = torch::arange(n_band, torch::kLong).reshape({-1, 1});
  auto t = torch::arange(-(n / 2), n / 2 + 1, torch::kLong);
  auto phase = torch::pow(-1, k) * M_PI / 4;
  auto bank = 2 * h32 * torch::cos((2 * k + 1) * M_PI / (2 * n_band) * t + phase);
  TORCH_CHECK(bank.scalar_type() == torch::kFloat32, "PQMF: the bank must be computed in float32, as RAVE's");

  // Centre-pad to the next power of two (RAVE center_pad_next_pow_2).
  int64_t next = 1;
  while (next < n) next *= 2;
  const int64_t pad = next - n;
  bank = torch::constant_pad_nd(bank, {pad / 2, pad / 2 + pad % 2}, 0);

  hk = register_buffer("hk", bank);
  h = register_buffer("h", h32);

  auto [fwd, inv] = kernels_of(bank);
  forward_pad_ = get_padding(fwd.size(-1), 1, mode);
  inverse_pad_ = get_padding(inv.size(-1), 1, mode);
  forward_conv = register_module("forward_conv", FixedConv(std::move(fwd)));
  inverse_conv = register_module("inverse_conv", FixedConv(std::move(inv)));
}

std::pair<torch::Tensor, torch::Tensor> PqmfImpl::kernels_of(const torch::Tensor& bank) const {
  const int64_t next = bank.size(-1);
  // make_odd pads one zero on the right.
  auto fwd = torch::constant_pad_nd(bank, {0, 1}, 0).unsqueeze(1);  // (M, 1, next+1)
  // Polyphase synthesis kernel: flipped bank "c (t m) -> m c t".
  auto inv = bank.flip(-1).reshape({n_band_, next / n_band_, n_band_}).permute({2, 0, 1});
  inv = torch::constant_pad_nd(inv.contiguous(), {0, 1}, 0);  // (M, M, next/M + 1)
  return {fwd.contiguous(), inv.contiguous()};
}

void PqmfImpl::set_filters(const torch::Tensor& prototype, const torch::Tensor& bank) {
  TORCH_CHECK(n_band_ > 1, "PQMF: a single band has no filters");
  TORCH_CHECK(prototype.sizes() == h.sizes() && bank.sizes() == hk.sizes(), "PQMF: filters of shapes ",
              prototype.sizes(), " and ", bank.sizes(), " for a PQMF holding ", h.sizes(), " and ",
              hk.sizes());
  torch::NoGradGuard no_grad;
  h.copy_(prototype);
  hk.copy_(bank);
  auto [fwd, inv] = kernels_of(bank.to(forward_conv->weight.scalar_type()));
  forward_conv->weight.copy_(fwd);
  inverse_conv->weight.copy_(inv);
}

torch::Tensor PqmfImpl::reverse_half(const torch::Tensor& x) const {
  // Negate odd bands at even time indices (RAVE reverse_half).
  // A strided view filled with a Scalar: index_put_ with a number would wrap it in a tensor and
  // read it back with aten::item, a host sync per call.
  auto mask = torch::ones({x.size(-2), x.size(-1)}, x.options());
  mask.slice(0, 1, c10::nullopt, 2).slice(1, 0, c10::nullopt, 2).fill_(-1.0);
  return x * mask;
}

torch::Tensor PqmfImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3, "PQMF analysis expects (batch, channels, time), got ", x.sizes());
  if (n_band_ == 1) return x;
  const int64_t b = x.size(0), c = x.size(1);
  auto y =
      torch::constant_pad_nd(x.reshape({b * c, 1, x.size(2)}), {forward_pad_.first, forward_pad_.second}, 0);
  y = torch::conv1d(y, forward_conv->weight, {}, n_band_);
  y = reverse_half(y);
  return y.reshape({b, c * n_band_, y.size(-1)});
}

torch::Tensor PqmfImpl::inverse(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) % n_band_ == 0, "PQMF synthesis expects (batch, channels·", n_band_,
              ", time), got ", x.sizes());
  if (n_band_ == 1) return x;
  const int64_t b = x.size(0), c = x.size(1) / n_band_, t = x.size(2);
  auto y = reverse_half(x.reshape({b * c, n_band_, t}));
  y = torch::constant_pad_nd(y, {inverse_pad_.first, inverse_pad_.second}, 0);
  // Training: through the Conv1d node of conv1d_backward.h, whose input gradient (tap products)
  // replaces aten's im2col/col2im backward of this 16 → 16 channel, 33-tap convolution, which
  // ran at 53–58 GFLOP/s (v2 step at 1 and 2 threads: 0.98–0.99).
  const torch::Tensor& w = inverse_conv->weight;
  if (torch::GradMode::is_enabled() && y.requires_grad() && conv1d_backward_gemm() &&
      conv1d_gemm_applies(y, w, 1, 0, 1)) {
    y = conv1d_gemm(y, w, {}, 1, 0, 1) * static_cast<double>(n_band_);
  } else {
    y = torch::conv1d(y, w) * static_cast<double>(n_band_);
  }
  y = y.flip(1).permute({0, 2, 1});  // (B·C, T', M): interleave the phases
  return y.reshape({b, c, t * n_band_});
}

}  // namespace rt::models

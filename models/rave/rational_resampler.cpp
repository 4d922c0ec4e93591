#include "models/rave/rational_resampler.h"

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "models/common/pqmf.h"
#include "util/error.h"

namespace rt::rave {
namespace {

namespace F = torch::nn::functional;

constexpr double kAttenuationDb = 100.0;
constexpr double kPassband = 0.45, kStopband = 0.5;  // of the lower rate

// Convolutions over at most this many cycles at once (the input window of each is unfolded by
// the convolution, not here; this bounds the output's temporary only).
constexpr int64_t kCyclesPerCall = 4096;

double sinc(double x) { return x == 0.0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x); }

// The zeroth-order modified Bessel function of the first kind (Kaiser's window), by its series.
double bessel_i0(double x) {
  double sum = 1.0, term = 1.0;
  for (int k = 1; k < 200 && term > 1e-17 * sum; ++k) {
    term *= (x / (2.0 * k)) * (x / (2.0 * k));
    sum += term;
  }
  return sum;
}

}  // namespace

RationalResampling design_rational_resampling(int64_t from_rate, int64_t to_rate, const std::string& flag) {
  if (from_rate <= 0 || to_rate <= 0 || from_rate == to_rate) {
    throw Error(flag + ": internal error: rational resampling from " + std::to_string(from_rate) + " to " +
                std::to_string(to_rate) + " Hz");
  }
  RationalResampling r;
  r.from_rate = from_rate;
  r.to_rate = to_rate;
  const int64_t g = std::gcd(from_rate, to_rate);
  r.up = to_rate / g;
  r.down = from_rate / g;
  if (r.up > kMaxRationalTerm || r.down > kMaxRationalTerm) {
    throw Error(flag + ": " + std::to_string(from_rate) + " Hz to " + std::to_string(to_rate) + " Hz is " +
                std::to_string(r.up) + "/" + std::to_string(r.down) +
                " in lowest terms; the converter takes " + "terms up to " + std::to_string(kMaxRationalTerm) +
                " (48000/44100 is 160/147): use a rate with a larger common divisor");
  }
  // The lowpass on the L-times grid (rate fine = from · L): transition from kPassband to
  // kStopband of the lower rate, Kaiser's order and β for kAttenuationDb.
  const double fine = static_cast<double>(from_rate) * static_cast<double>(r.up);
  const double lower = static_cast<double>(std::min(from_rate, to_rate));
  const double cutoff = 0.5 * (kPassband + kStopband) * lower;               // Hz
  const double width = 2.0 * M_PI * (kStopband - kPassband) * lower / fine;  // rad per fine sample
  const double beta = 0.1102 * (kAttenuationDb - 8.7);
  const auto half = static_cast<int64_t>(std::ceil((kAttenuationDb - 7.95) / (2.285 * width) / 2.0));
  // Output phase j of a cycle sits at j·M on the fine grid, input i (relative to the cycle's
  // first) at i·L; its taps are the inputs within `half` of it.
  const int64_t L = r.up, M = r.down;
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  std::vector<int64_t> lo(static_cast<size_t>(L)), hi(static_cast<size_t>(L));
  for (int64_t j = 0; j < L; ++j) {
    lo[static_cast<size_t>(j)] = -floor_div(half - j * M, L);  // ceil((jM − half) / L)
    hi[static_cast<size_t>(j)] = floor_div(j * M + half, L);
  }
  r.history = -lo.front();
  r.window = hi.back() + r.history + 1;
  std::vector<double> w(static_cast<size_t>(L * r.window), 0.0);
  const double i0_beta = bessel_i0(beta);
  for (int64_t j = 0; j < L; ++j) {
    double sum = 0.0;
    const size_t row = static_cast<size_t>(j * r.window);
    for (int64_t i = lo[static_cast<size_t>(j)]; i <= hi[static_cast<size_t>(j)]; ++i) {
      const double t = static_cast<double>(j * M - i * L);  // fine samples from the output
      const double u = t / static_cast<double>(half);
      const double kaiser = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - u * u))) / i0_beta;
      const double v = sinc(2.0 * cutoff * t / fine) * kaiser;
      w[row + static_cast<size_t>(i + r.history)] = v;
      sum += v;
    }
    // Each phase's taps sum to 1: a constant comes out exactly constant.
    for (int64_t k = 0; k < r.window; ++k) w[row + static_cast<size_t>(k)] /= sum;
  }
  r.weights = torch::tensor(w, torch::kFloat64).reshape({L, 1, r.window});
  return r;
}

torch::Tensor resample_cycles(const RationalResampling& r, const torch::Tensor& buffer, int64_t cycles) {
  const int64_t b = buffer.size(0), c = buffer.size(1);
  if (cycles <= 0) return torch::zeros({b, c, 0}, buffer.options());
  const auto w = r.weights.to(buffer.dtype());
  const auto flat = buffer.reshape({b * c, 1, buffer.size(-1)});
  std::vector<torch::Tensor> parts;
  for (int64_t first = 0; first < cycles; first += kCyclesPerCall) {
    const int64_t n = std::min(kCyclesPerCall, cycles - first);
    const auto in = flat.narrow(-1, first * r.down, (n - 1) * r.down + r.window);
    // (B·C, L, n): phase-major per cycle → interleave to time.
    parts.push_back(
        F::conv1d(in, w, F::Conv1dFuncOptions().stride(r.down)).transpose(1, 2).reshape({b, c, -1}));
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, -1);
}

torch::Tensor resample_rational(const RationalResampling& r, const torch::Tensor& x) {
  const int64_t t = x.size(-1);
  const int64_t out = (t * r.up + r.down - 1) / r.down;
  const int64_t cycles = (out + r.up - 1) / r.up;
  const int64_t needed = (cycles - 1) * r.down + r.window;
  const auto buffer = F::pad(x, F::PadFuncOptions({r.history, std::max<int64_t>(0, needed - r.history - t)}));
  return resample_cycles(r, buffer, cycles).narrow(-1, 0, out);
}

}  // namespace rt::rave

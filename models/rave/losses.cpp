#include "models/rave/losses.h"

#include "models/common/batch_slice.h"
#include "models/common/fft_input.h"

namespace rt::rave {

namespace {

StftWindowSource& window_source() {
  static StftWindowSource source;
  return source;
}

torch::Tensor stft_magnitude(const torch::Tensor& signal, int64_t n) {
  const auto s = models::fft_input(signal);  // float32 under autocast
  // RAVE's window is a float32 module buffer (torchaudio's Spectrogram), cast to the signal's
  // dtype with the module: a float64 run uses the float32-rounded hann window, and so do we.
  const auto& source = window_source();
  auto window = (source ? source(n).to(s.device(), torch::kFloat32)
                        : torch::hann_window(n, s.options().dtype(torch::kFloat32)))
                    .to(s.scalar_type());
  return torch::stft(s, n, n / 4, n, window, /*center=*/true, "reflect",
                     /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true)
      .abs();
}

}  // namespace

void set_stft_window_source(StftWindowSource source) { window_source() = std::move(source); }

torch::Tensor spectral_distance(const torch::Tensor& x, const torch::Tensor& y,
                                const std::vector<int64_t>& scales, double log_epsilon,
                                const torch::Tensor& energy, const std::vector<torch::Tensor>* x_magnitudes) {
  TORCH_CHECK(x.sizes() == y.sizes(), "spectral_distance: shapes differ: ", x.sizes(), " vs ", y.sizes());
  TORCH_CHECK(!energy.defined() || energy.numel() == static_cast<int64_t>(scales.size()),
              "spectral_distance: ", scales.size(), " scales but ", energy.numel(), " energies");
  TORCH_CHECK(x_magnitudes == nullptr || x_magnitudes->size() == scales.size(),
              "spectral_distance: ", scales.size(), " scales but ", x_magnitudes ? x_magnitudes->size() : 0,
              " precomputed magnitudes");
  auto xf = x.reshape({-1, x.size(-1)});
  auto yf = y.reshape({-1, y.size(-1)});
  torch::Tensor total = torch::zeros({}, x.options());
  for (size_t i = 0; i < scales.size(); ++i) {
    const int64_t n = scales[i];
    TORCH_CHECK(n / 2 < x.size(-1), "spectral_distance: STFT scale ", n, " too large for signals of ",
                x.size(-1), " samples (need scale/2 < length)");
    auto sx = x_magnitudes != nullptr ? (*x_magnitudes)[i] : stft_magnitude(xf, n);
    auto sy = stft_magnitude(yf, n);
    // The denominator over the global batch in a data-parallel job (batch_slice.h).
    auto lin = (sx - sy).pow(2).mean() /
               (energy.defined() ? energy[static_cast<int64_t>(i)] : models::batch_global_mean(sx.pow(2)));
    auto log = ((sx + log_epsilon).log() - (sy + log_epsilon).log()).abs().mean();
    total = total + lin + log;
  }
  return total;
}

std::vector<torch::Tensor> stft_magnitudes(const torch::Tensor& x, const std::vector<int64_t>& scales) {
  torch::NoGradGuard no_grad;
  auto xf = x.reshape({-1, x.size(-1)});
  std::vector<torch::Tensor> m;
  for (int64_t n : scales) m.push_back(stft_magnitude(xf, n));
  return m;
}

torch::Tensor spectral_energy(const std::vector<torch::Tensor>& magnitudes) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> e;
  for (const auto& m : magnitudes) e.push_back(m.pow(2).mean());
  return torch::stack(e);
}

std::pair<torch::Tensor, torch::Tensor> hinge_gan(const torch::Tensor& score_real,
                                                  const torch::Tensor& score_fake) {
  auto loss_dis = (torch::relu(1 - score_real) + torch::relu(1 + score_fake)).mean();
  return {loss_dis, -score_fake.mean()};
}

torch::Tensor mean_difference(const torch::Tensor& real, const torch::Tensor& fake, bool relative) {
  auto d = (real - fake).abs().mean();
  if (!relative) return d;
  return d / models::batch_global_mean(real.abs());  // batch_slice.h
}

}  // namespace rt::rave

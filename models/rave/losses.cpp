#include "models/rave/losses.h"

#include "models/common/batch_slice.h"

namespace rt::rave {

torch::Tensor spectral_distance(const torch::Tensor& x, const torch::Tensor& y,
                                const std::vector<int64_t>& scales, double log_epsilon) {
  TORCH_CHECK(x.sizes() == y.sizes(), "spectral_distance: shapes differ: ", x.sizes(), " vs ",
              y.sizes());
  auto xf = x.reshape({-1, x.size(-1)});
  auto yf = y.reshape({-1, y.size(-1)});
  torch::Tensor total = torch::zeros({}, x.options());
  for (int64_t n : scales) {
    TORCH_CHECK(n / 2 < x.size(-1), "spectral_distance: STFT scale ", n,
                " too large for signals of ", x.size(-1), " samples (need scale/2 < length)");
    auto window = torch::hann_window(n, x.options());
    auto stft = [&](const torch::Tensor& s) {
      return torch::stft(s, n, n / 4, n, window, /*center=*/true, "reflect",
                         /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true)
          .abs();
    };
    auto sx = stft(xf), sy = stft(yf);
    // The denominator over the global batch in a data-parallel job (batch_slice.h).
    auto lin = (sx - sy).pow(2).mean() / models::batch_global_mean(sx.pow(2));
    auto log = ((sx + log_epsilon).log() - (sy + log_epsilon).log()).abs().mean();
    total = total + lin + log;
  }
  return total;
}

std::pair<torch::Tensor, torch::Tensor> hinge_gan(const torch::Tensor& score_real,
                                                  const torch::Tensor& score_fake) {
  auto loss_dis = (torch::relu(1 - score_real) + torch::relu(1 + score_fake)).mean();
  return {loss_dis, -score_fake.mean()};
}

torch::Tensor mean_difference(const torch::Tensor& real, const torch::Tensor& fake,
                              bool relative) {
  auto d = (real - fake).abs().mean();
  return relative ? d / models::batch_global_mean(real.abs()) : d;  // global denominator (batch_slice.h)
}

}  // namespace rt::rave

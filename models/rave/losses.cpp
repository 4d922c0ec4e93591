#include "models/rave/losses.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <vector>

#include "models/common/batch_slice.h"
#include "models/common/fft_input.h"
#include "models/rave/spectral_kernel.h"

namespace rt::rave {

namespace {

StftWindowSource& window_source() {
  static StftWindowSource source;
  return source;
}

torch::Tensor complex_stft(const torch::Tensor& signal, int64_t n) {
  const auto s = models::fft_input(signal);  // float32 under autocast
  // RAVE's window is a float32 module buffer (torchaudio's Spectrogram), cast to the signal's
  // dtype with the module: a float64 run uses the float32-rounded hann window, and so do we.
  const auto& source = window_source();
  auto window = (source ? source(n).to(s.device(), torch::kFloat32)
                        : torch::hann_window(n, s.options().dtype(torch::kFloat32)))
                    .to(s.scalar_type());
  return torch::stft(s, n, n / 4, n, window, /*center=*/true, "reflect",
                     /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
}

torch::Tensor stft_magnitude(const torch::Tensor& signal, int64_t n) { return complex_stft(signal, n).abs(); }

// Both terms' sums at one scale, [Σ (sx − |y|)², Σ |log(sx + ε) − log(|y| + ε)|], as one node:
// one pass over the spectrum forward, one backward (spectral_kernel.h), where the chain of
// aten operators took about ten passes each way and a temporary for each. sx is a constant
// (the target's magnitudes).
class SpectralTerms : public torch::autograd::Function<SpectralTerms> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y_in,
                               const torch::Tensor& sx_in, double eps) {
    // stft's result is a transposed view, and so are the magnitudes of one: walk both in memory
    // order where their layouts agree, without copying either.
    const bool same = y_in.strides() == sx_in.strides() && y_in.is_non_overlapping_and_dense() &&
                      sx_in.is_non_overlapping_and_dense();
    const torch::Tensor y = same ? y_in : y_in.contiguous();
    const torch::Tensor sx = same ? sx_in : sx_in.contiguous();
    const int64_t n = sx.numel();
    const int64_t chunks = (n + detail::kSpectralChunk - 1) / detail::kSpectralChunk;
    std::vector<double> partial(static_cast<size_t>(2 * chunks));
    AT_DISPATCH_FLOATING_TYPES(sx.scalar_type(), "spectral_terms", [&] {
      const auto* yp = static_cast<const scalar_t*>(y.data_ptr());  // (re, im) pairs
      const scalar_t* sp = sx.data_ptr<scalar_t>();
      at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i0 = c * detail::kSpectralChunk, len = std::min(detail::kSpectralChunk, n - i0);
          detail::spectral_terms_chunk(yp + 2 * i0, sp + i0, len, static_cast<scalar_t>(eps),
                                       partial.data() + 2 * c);
        }
      });
    });
    double lin = 0, log = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      lin += partial[2 * c];
      log += partial[2 * c + 1];
    }
    ctx->save_for_backward({y, sx});
    ctx->saved_data["eps"] = eps;
    auto out = torch::empty({2}, sx.options());
    out[0] = lin;
    out[1] = log;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &y = saved[0], &sx = saved[1];  // same layouts (forward)
    const double eps = ctx->saved_data["eps"].toDouble();
    const torch::Tensor g = grads[0].to(torch::kDouble).cpu();
    const double a = g[0].item<double>(), c = g[1].item<double>();
    torch::Tensor dy = torch::empty_strided(y.sizes(), y.strides(), y.options());
    const int64_t n = sx.numel();
    AT_DISPATCH_FLOATING_TYPES(sx.scalar_type(), "spectral_terms_backward", [&] {
      const auto* yp = static_cast<const scalar_t*>(y.data_ptr());
      const scalar_t* sp = sx.data_ptr<scalar_t>();
      auto* dp = static_cast<scalar_t*>(dy.data_ptr());
      at::parallel_for(0, n, detail::kSpectralChunk, [&](int64_t i0, int64_t i1) {
        detail::spectral_terms_backward(yp + 2 * i0, sp + i0, i1 - i0, static_cast<scalar_t>(eps),
                                        static_cast<scalar_t>(a), static_cast<scalar_t>(c), dp + 2 * i0);
      });
    });
    return {dy, {}, {}};
  }
};

// Whether SpectralTerms takes a scale: on (set_fused_spectral_terms), CPU float or double, a
// constant target, the generated signal of the same type.
std::atomic<bool> g_fused_terms{true};

bool fused_terms_apply(const torch::Tensor& sx, const torch::Tensor& y_signal) {
  const auto t = sx.scalar_type();
  return g_fused_terms.load() && sx.device().is_cpu() && y_signal.device().is_cpu() &&
         (t == torch::kFloat || t == torch::kDouble) && !sx.requires_grad() && y_signal.scalar_type() == t;
}

}  // namespace

void set_stft_window_source(StftWindowSource source) { window_source() = std::move(source); }
void set_fused_spectral_terms(bool enabled) { g_fused_terms.store(enabled); }
bool fused_spectral_terms() { return g_fused_terms.load(); }

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
    // The denominator over the global batch in a data-parallel job (batch_slice.h).
    auto denominator = [&] {
      return energy.defined() ? energy[static_cast<int64_t>(i)] : models::batch_global_mean(sx.pow(2));
    };
    if (fused_terms_apply(sx, yf)) {
      const auto sums = SpectralTerms::apply(complex_stft(yf, n), sx, log_epsilon);
      const double count = static_cast<double>(sx.numel());
      total = total + sums[0] / count / denominator() + sums[1] / count;
      continue;
    }
    auto sy = stft_magnitude(yf, n);
    auto lin = (sx - sy).pow(2).mean() / denominator();
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

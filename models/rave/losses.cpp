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

std::atomic<bool> g_fused_terms{true};

// torch's "reflect" padding (the edge not repeated): the signal index padded index q − pad reads.
inline int64_t reflected(int64_t q, int64_t T) { return q < 0 ? -q : (q >= T ? 2 * (T - 1) - q : q); }

// torch.stft(s, n, hop, n, window, center, "reflect", onesided, unnormalised) of s [B, T] as one
// node on the CPU, returned as [B, frames, bins] (torch.stft's result transposed back):
//   forward: the windowed frames of the reflect-padded signal written in one pass ([B, F, n]),
//     then a real FFT over each frame;
//   backward: the bins' gradient into an inverse real FFT (a onesided spectrum's inner bins stand
//     for two: halved, so that irfft's Hermitian sum counts them once), then windowed and
//     overlap-added into the signal in one pass per example, the padding folded back as it goes.
// aten's backward takes a full-length complex FFT of the zero-padded gradient, the window's
// product and as_strided's backward (index_add): about 27 ms of a v2 step at one thread.
class StftFrames : public torch::autograd::Function<StftFrames> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& s_in,
                               const torch::Tensor& window_in, int64_t n, int64_t hop) {
    const torch::Tensor s = s_in.contiguous(), window = window_in.contiguous();
    const int64_t B = s.size(0), T = s.size(1), pad = n / 2, F = 1 + (T + 2 * pad - n) / hop;
    torch::Tensor frames = torch::empty({B, F, n}, s.options());
    AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "stft_frames", [&] {
      const scalar_t* sp = s.data_ptr<scalar_t>();
      const scalar_t* wp = window.data_ptr<scalar_t>();
      scalar_t* fp = frames.data_ptr<scalar_t>();
      at::parallel_for(0, B * F, 16, [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const scalar_t* row = sp + (q / F) * T;
          const int64_t start = (q % F) * hop - pad;
          scalar_t* out = fp + q * n;
          if (start >= 0 && start + n <= T) {
            for (int64_t i = 0; i < n; ++i) out[i] = row[start + i] * wp[i];
          } else {
            for (int64_t i = 0; i < n; ++i) out[i] = row[reflected(start + i, T)] * wp[i];
          }
        }
      });
    });
    ctx->save_for_backward({window});
    ctx->saved_data["T"] = T;
    ctx->saved_data["n"] = n;
    ctx->saved_data["hop"] = hop;
    return torch::fft::rfft(frames, n, -1);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor window = ctx->get_saved_variables()[0];
    const int64_t T = ctx->saved_data["T"].toInt(), n = ctx->saved_data["n"].toInt(),
                  hop = ctx->saved_data["hop"].toInt();
    const torch::Tensor& g = grads[0];
    const int64_t B = g.size(0), F = g.size(1), bins = g.size(2), pad = n / 2;
    torch::Tensor half = torch::full({bins}, 0.5, window.options());
    half[0] = 1.0;
    if (n % 2 == 0) half[bins - 1] = 1.0;  // the Nyquist bin stands for itself
    const torch::Tensor gf = torch::fft::irfft(g * half, n, -1, "forward");  // [B, F, n], unscaled
    if (torch::GradMode::is_enabled()) {  // create_graph: differentiable aten operators
      auto q = torch::arange(n, window.options().dtype(torch::kLong)) +
               (torch::arange(F, window.options().dtype(torch::kLong)) * hop - pad).unsqueeze(1);
      q = torch::where(q < 0, -q, torch::where(q >= T, 2 * (T - 1) - q, q)).reshape({-1});
      auto ds = torch::zeros({B, T}, gf.options()).index_add(1, q, (gf * window).reshape({B, F * n}));
      return {ds, {}, {}, {}};
    }
    const torch::Tensor gc = gf.contiguous();
    torch::Tensor ds = torch::zeros({B, T}, gc.options());
    AT_DISPATCH_FLOATING_TYPES(gc.scalar_type(), "stft_frames_backward", [&] {
      const scalar_t* gp = gc.data_ptr<scalar_t>();
      const scalar_t* wp = window.data_ptr<scalar_t>();
      scalar_t* dp = ds.data_ptr<scalar_t>();
      at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {  // frames in order: a fixed sum order
        for (int64_t b = b0; b < b1; ++b) {
          scalar_t* row = dp + b * T;
          for (int64_t f = 0; f < F; ++f) {
            const scalar_t* in = gp + (b * F + f) * n;
            const int64_t start = f * hop - pad;
            if (start >= 0 && start + n <= T) {
              for (int64_t i = 0; i < n; ++i) row[start + i] += in[i] * wp[i];
            } else {
              for (int64_t i = 0; i < n; ++i) row[reflected(start + i, T)] += in[i] * wp[i];
            }
          }
        }
      });
    });
    return {ds, {}, {}, {}};
  }
};

// Whether StftFrames and the magnitude kernel take a signal: on (set_fused_spectral_terms), CPU,
// float or double, [B, T] with the reflect padding inside the signal.
bool own_stft_applies(const torch::Tensor& s, int64_t n) {
  const auto t = s.scalar_type();
  return g_fused_terms.load() && s.device().is_cpu() && (t == torch::kFloat || t == torch::kDouble) &&
         s.dim() == 2 && s.size(0) > 0 && n / 2 < s.size(1) && n >= 2;
}

// torch.stft's (centred, reflect-padded, hann, hop n/4, onesided) of s, a signal as
// models::fft_input gives it; StftFrames where it applies.
torch::Tensor stft_of(const torch::Tensor& s, int64_t n) {
  // RAVE's window is a float32 module buffer (torchaudio's Spectrogram), cast to the signal's
  // dtype with the module: a float64 run uses the float32-rounded hann window, and so do we.
  const auto& source = window_source();
  auto window = (source ? source(n).to(s.device(), torch::kFloat32)
                        : torch::hann_window(n, s.options().dtype(torch::kFloat32)))
                    .to(s.scalar_type());
  if (own_stft_applies(s, n)) return StftFrames::apply(s, window, n, n / 4).transpose(1, 2);
  return torch::stft(s, n, n / 4, n, window, /*center=*/true, "reflect",
                     /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
}

torch::Tensor complex_stft(const torch::Tensor& signal, int64_t n) {
  return stft_of(models::fft_input(signal), n);  // float32 under autocast
}

torch::Tensor stft_magnitude(const torch::Tensor& signal, int64_t n) {
  const torch::Tensor s = models::fft_input(signal);
  const torch::Tensor y = stft_of(s, n);
  if (!own_stft_applies(s, n) || y.requires_grad()) return y.abs();
  // The target's magnitudes (no gradient): one vectorised pass, in y's layout.
  const torch::Tensor frames = y.transpose(1, 2);  // StftFrames' contiguous [B, F, bins]
  torch::Tensor m =
      torch::empty(frames.sizes(), frames.options().dtype(c10::toRealValueType(y.scalar_type())));
  AT_DISPATCH_FLOATING_TYPES(m.scalar_type(), "stft_magnitude", [&] {
    const auto* yp = static_cast<const scalar_t*>(frames.data_ptr());
    scalar_t* mp = m.data_ptr<scalar_t>();
    at::parallel_for(0, m.numel(), detail::kSpectralChunk, [&](int64_t i0, int64_t i1) {
      detail::complex_magnitudes(yp + 2 * i0, i1 - i0, mp + i0);
    });
  });
  return m.transpose(1, 2);
}

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
    AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "spectral_terms_out", [&] {
      out.data_ptr<scalar_t>()[0] = static_cast<scalar_t>(lin);
      out.data_ptr<scalar_t>()[1] = static_cast<scalar_t>(log);
    });
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &y = saved[0], &sx = saved[1];  // same layouts (forward)
    const double eps = ctx->saved_data["eps"].toDouble();
    if (torch::GradMode::is_enabled()) {  // create_graph: the same gradient from aten's operators
      const torch::Tensor m = y.abs(), diff = m - sx;
      const torch::Tensor dm = 2 * grads[0][0] * diff + grads[0][1] * diff.sign() / (m + eps);
      return {torch::where(m > 0, dm / m, torch::zeros_like(m)) * y, {}, {}};
    }
    // The two weights, read from the CPU gradient's memory: not an item() (a host read on a
    // device), which the step's zero-synchronisation check counts.
    const torch::Tensor g = grads[0].to(torch::kDouble).contiguous();
    const double a = g.data_ptr<double>()[0], c = g.data_ptr<double>()[1];
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

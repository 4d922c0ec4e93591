#include "export/checks/fidelity.h"

#include <torch/script.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

#include "models/rave/generator.h"
#include "models/rave/latent_pca.h"
#include "models/rave/losses.h"
#include "models/rave/rational_resampler.h"
#include "models/rave/resampler.h"
#include "util/error.h"
#include "util/signals.h"

namespace rt::exporting {
namespace {

// nn~'s block: 2048 samples, or the nearest whole number of latent frames above.
int64_t stream_block(int64_t ratio) { return (2048 + ratio - 1) / ratio * ratio; }

// Samples a stream is left to settle before it is compared: it starts from zero state where
// the offline model zero-pads every layer, so outputs differ until about twice the latency.
int64_t warm_up(const ScriptInfo& info, int64_t block) {
  return (2 * info.forward_latency() + block - 1) / block * block;
}

// Switches the model's noise synthesis off for the reference (as noise_scale 0 does in the
// file), and back on when it goes out of scope.
class NoiseOff {
 public:
  explicit NoiseOff(rave::RaveModelImpl& m) {
    if (auto* g = dynamic_cast<rave::GeneratorV2Impl*>(m.decoder.get()); g != nullptr && g->noise_module) {
      noise_ = g->noise_module.get();
      saved_ = noise_->noise_scale;
      noise_->noise_scale = 0.0;
    }
  }
  ~NoiseOff() {
    if (noise_ != nullptr) noise_->noise_scale = saved_;
  }
  NoiseOff(const NoiseOff&) = delete;
  NoiseOff& operator=(const NoiseOff&) = delete;

 private:
  rave::NoiseGeneratorImpl* noise_ = nullptr;
  double saved_ = 1.0;
};

// The model offline, deterministic: posterior mean, PCA-rotated, dimensions past the kept
// ones at the mean (what the file's decode fills at noise_scale 0), decoded without noise.
// A spherical model's latent is the encoder's output on the unit sphere (what the file's angles
// encode and its decode turns back into a unit vector).
torch::Tensor reference(rave::RaveModelImpl& m, const torch::Tensor& x, int64_t latent_size) {
  torch::NoGradGuard no_grad;
  NoiseOff off(m);
  if (m.options().encoder == rave::EncoderKind::kSpherical) {
    return m.decode(m.encoder->reparametrize(m.encode_stats(x)).first);
  }
  auto z = m.encode_stats(x).chunk(2, 1)[0];
  auto pca = rave::stored_latent_pca(m);
  auto rotated = torch::matmul(pca.components, z - pca.mean.unsqueeze(-1));
  if (latent_size > 0 && latent_size < rotated.size(1))
    rotated.narrow(1, latent_size, rotated.size(1) - latent_size).zero_();
  return m.decode(torch::matmul(pca.components.t(), rotated) + pca.mean.unsqueeze(-1));
}

// A rational --sr file's forward as the model computes it (export/graph/graph.h RationalRate):
// the host's audio converted down, the model offline on it (after the stream's priming, on whole
// latent frames), its output (delayed as a stream's is) converted up and delayed as the stream's
// output queue delays it. Offline: no priming and no delays.
torch::Tensor rational_reference(rave::RaveModelImpl& m, const torch::Tensor& x, const ScriptOptions& options,
                                 const ScriptInfo& info, const rave::RationalResampling& up) {
  namespace F = torch::nn::functional;
  const int64_t host = options.host_rate, model_rate = m.options().sampling_rate;
  const bool streaming = options.streaming;
  const std::string flag = "--sr " + std::to_string(host);
  auto y = rave::resample_rational(rave::design_rational_resampling(host, model_rate, flag), x);
  y = F::pad(y, F::PadFuncOptions({streaming ? info.rational_model_delay : 0, 0}));
  const int64_t n = y.size(-1), frame = info.ratio;
  y = reference(m, F::pad(y, F::PadFuncOptions({0, (n + frame - 1) / frame * frame - n})),
                options.latent_size)
          .narrow(-1, 0, n);
  if (streaming) y = F::pad(y, F::PadFuncOptions({info.forward_latency_at_model_rate(), 0}));
  auto h = rave::resample_rational(up, y);
  if (streaming) h = F::pad(h, F::PadFuncOptions({info.rational_host_delay, 0}));
  return h.narrow(-1, 0, x.size(-1));
}

}  // namespace

double FidelityFigures::share() const {
  if (added_distance == 0.0) return 0.0;
  return own_distance > 0.0 ? added_distance / own_distance : std::numeric_limits<double>::infinity();
}

int64_t fidelity_samples(const ScriptInfo& info, int64_t sampling_rate, double seconds, bool streaming) {
  const int64_t block = stream_block(info.ratio);
  int64_t n = static_cast<int64_t>(std::ceil(seconds * static_cast<double>(sampling_rate)));
  if (streaming) n += warm_up(info, block) + info.forward_latency();  // the shift
  return (n + block - 1) / block * block;
}

FidelityFigures measure_fidelity(rave::RaveModelImpl& model, const std::filesystem::path& file,
                                 const ScriptOptions& options, const ScriptInfo& info,
                                 const torch::Tensor& audio, const std::string& audio_source) {
  auto ts = torch::jit::load(file.string());
  ts.get_method("set_noise_scale")({0.0});
  const ForwardFn forward = [&](const torch::Tensor& x) {
    c10::InferenceMode guard;
    return ts.get_method("forward")({x}).toTensor();
  };
  return measure_fidelity(model, forward, options, info, audio, audio_source);
}

FidelityFigures measure_fidelity(rave::RaveModelImpl& model, const ForwardFn& forward,
                                 const ScriptOptions& options, const ScriptInfo& info,
                                 const torch::Tensor& audio, const std::string& audio_source) {
  FidelityFigures f;
  f.audio = audio_source;
  const auto kind = model.options().encoder;
  if (kind != rave::EncoderKind::kVariational && kind != rave::EncoderKind::kSpherical) {
    f.not_measured = "model.encoder = " + std::string(enum_name(kind)) +
                     " (the comparison runs a deterministic latent: the variational posterior mean, or "
                     "the spherical encoder's unit vector)";
    return f;
  }
  // export --sr: the file runs at the host's rate; the audio (at the model's) goes up to it, and
  // the model's output is compared through the same resampler around it.
  // A rational --sr: the converters instead (the reference already delayed as the stream is).
  const int64_t model_rate = model.options().sampling_rate;
  const bool resampled = options.host_rate > 0 && options.host_rate != model_rate;
  const bool rational = info.rational_latency >= 0;
  std::optional<rave::Resampler> rs;
  if (resampled && !rational) rs.emplace(options.host_rate, model_rate);
  torch::Tensor input = audio;
  if (rs) input = (*rs)->from_model_rate(audio.unsqueeze(0).to(torch::kFloat))[0];
  std::optional<rave::RationalResampling> up;  // model → host, for the input and the reference
  if (rational) {
    up = rave::design_rational_resampling(model_rate, options.host_rate,
                                          "--sr " + std::to_string(options.host_rate));
    input = rave::resample_rational(*up, audio.unsqueeze(0).to(torch::kFloat))[0];
  }
  const int64_t block = stream_block(info.ratio);
  const int64_t latency = options.streaming ? info.forward_latency() : 0, shift = rational ? 0 : latency;
  const int64_t skip = options.streaming ? warm_up(info, block) : 0;
  const int64_t usable = input.size(-1) / block * block;
  const int64_t compared = usable - skip - latency;
  if (compared < 4 * info.ratio) {
    f.not_measured =
        "too little audio in " + audio_source + " (" + std::to_string(input.size(-1)) + " samples)";
    return f;
  }
  auto x = input.narrow(-1, 0, usable).unsqueeze(0).to(torch::kFloat).contiguous();

  torch::Tensor out;
  if (options.streaming) {
    std::vector<torch::Tensor> blocks;
    for (int64_t i = 0; i < usable; i += block) {
      throw_if_stop_requested("while checking the exported file; nothing was written");
      blocks.push_back(forward(x.narrow(-1, i, block)));
    }
    out = torch::cat(blocks, -1);
  } else {
    out = forward(x);
  }
  auto ref = rational ? rational_reference(model, x, options, info, *up)
             : rs     ? (*rs)->from_model_rate(reference(model, (*rs)->to_model_rate(x), options.latent_size))
                      : reference(model, x, options.latent_size);
  // export --channels: the first decoded copy (the copies are equal at noise_scale 0), or the
  // model's first channels.
  const int64_t channels = std::min(out.size(1), ref.size(1));
  out = out.narrow(1, 0, channels);
  ref = ref.narrow(1, 0, channels);
  // The compared stretch: the model's and the input's from `skip`, the file's shifted by its latency.
  const auto r = ref.narrow(-1, skip, compared), o = out.narrow(-1, skip + shift, compared),
             in = x.narrow(-1, skip, compared);
  const auto r64 = r.to(torch::kDouble), diff = o.to(torch::kDouble) - r64;  // sums of squares in double
  const double signal = r64.pow(2).sum().item<double>(), error = diff.pow(2).sum().item<double>();
  f.snr_db = error > 0.0 ? 10.0 * std::log10(signal / error) : std::numeric_limits<double>::infinity();
  f.max_abs_diff = diff.abs().max().item<double>();
  const auto& scales = model.options().stft_scales;
  f.own_distance = rave::spectral_distance(in, r, scales).item<double>();
  f.added_distance = rave::spectral_distance(r, o, scales).item<double>();
  f.seconds = static_cast<double>(compared) /
              static_cast<double>(resampled ? options.host_rate : options.sampling_rate);
  f.measured = true;
  return f;
}

std::string format_fidelity(const FidelityFigures& f) {
  std::ostringstream s;
  if (!f.measured) {
    s << "fidelity vs the float32 model: not measured: " << f.not_measured;
    return s.str();
  }
  s << "fidelity vs the float32 model on " << f.audio << " (" << std::fixed << std::setprecision(1)
    << f.seconds << " s): SNR ";
  if (std::isinf(f.snr_db)) {
    s << "inf (identical)";
  } else {
    s << std::setprecision(1) << f.snr_db << " dB";
  }
  s << std::setprecision(2) << std::scientific << ", max |diff| " << f.max_abs_diff
    << ", multi-scale spectral distance added " << f.added_distance << " = " << std::fixed
    << std::setprecision(2) << 100.0 * f.share() << "% of the model's own reconstruction distance ("
    << std::setprecision(3) << f.own_distance << "; budget " << std::setprecision(0)
    << 100.0 * kFidelityBudget << "%)";
  return s.str();
}

}  // namespace rt::exporting

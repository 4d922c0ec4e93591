#include "models/rave/rave.h"

#include "models/common/batch_slice.h"
#include "models/common/module_path.h"
#include "profiling/annotation.h"
#include "util/torch_compat.h"

namespace rt::rave {

RaveModelImpl::RaveModelImpl(RaveOptions options) : options_(std::move(options)) {
  options_.validate();
  const auto& o = options_;
  pqmf = register_module("pqmf", models::Pqmf(o.n_band, 100, o.padding));
  if (o.input_mode == InputMode::kMel) {
    spectrogram =
        register_module("spectrogram", MelSpectrogram(o.sampling_rate, o.mel_n_fft, o.mel_hop, o.n_mels));
  }
  encoder = register_module("encoder", VariationalEncoder(o));
  if (o.version == RaveVersion::kV1) {
    decoder = register_module("decoder", std::make_shared<GeneratorV1Impl>(o));
  } else {
    decoder = register_module("decoder", std::make_shared<GeneratorV2Impl>(o));
  }
  discriminator = make_discriminator(o);
  if (discriminator) register_module("discriminator", discriminator);
  // RAVE keeps these for export (latent PCA, receptive field); we carry them in checkpoints.
  register_buffer("latent_pca", torch::eye(o.latent_size));
  register_buffer("latent_mean", torch::zeros({o.latent_size}));
  register_buffer("fidelity", torch::zeros({o.latent_size}));
  register_buffer("receptive_field", torch::zeros({2}, torch::kLong));
  models::assign_module_paths(*this);
}

// Module spans (profiling.with_modules) use the registered names: they are the module paths
// from this root.
torch::Tensor RaveModelImpl::analysis(const torch::Tensor& x) {
  prof::ModuleScope span("pqmf");
  return pqmf->forward(x);
}

torch::Tensor RaveModelImpl::synthesis(const torch::Tensor& y) {
  prof::ModuleScope span("pqmf");
  return pqmf->inverse(y);
}

torch::Tensor RaveModelImpl::encoder_input(const torch::Tensor& x) {
  if (options_.input_mode != InputMode::kMel) return analysis(x);
  prof::ModuleScope span("spectrogram");
  return spectrogram->forward(x);
}

torch::Tensor RaveModelImpl::encode_stats(const torch::Tensor& x) {
  auto in = encoder_input(x);
  prof::ModuleScope span("encoder");
  return encoder->forward(in);
}

std::tuple<torch::Tensor, torch::Tensor> RaveModelImpl::encode(const torch::Tensor& x) {
  auto [z, kl] = encoder->reparametrize(encode_stats(x));
  return {z, kl};
}

torch::Tensor RaveModelImpl::decode(const torch::Tensor& z) {
  torch::Tensor y;
  {
    prof::ModuleScope span("decoder");
    y = decoder->forward(z);
  }
  return options_.output_mode == OutputMode::kRaw ? y : synthesis(y);
}

torch::Tensor RaveModelImpl::forward(const torch::Tensor& x) { return decode(std::get<0>(encode(x))); }

RaveForward RaveModelImpl::forward_train(const torch::Tensor& x, const torch::Tensor& noise,
                                         const std::function<void(const torch::Tensor&)>& after_analysis,
                                         const torch::Tensor& augmentation) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) == options_.channels, "RAVE expects audio (batch, ",
              options_.channels, ", time), got ", x.sizes());
  RaveForward f;
  // The multiband distance compares PQMF bands of the audio whatever the encoder reads. (RAVE
  // 2.3.1 analyses the mel features instead when input_mode is mel, model.py:251-254, which
  // fails in the distance's STFT: docs/rave_fidelity.md.)
  f.x_multiband = analysis(x);
  if (after_analysis) after_analysis(f.x_multiband);
  const auto in = options_.input_mode == InputMode::kMel ? encoder_input(x) : f.x_multiband;
  {
    prof::ModuleScope span("encoder");
    f.stats = encoder->forward(in);
    std::tie(f.z, f.kl) = encoder->reparametrize(f.stats, noise, augmentation);
  }
  torch::Tensor y_mb;
  {
    prof::ModuleScope span("decoder");
    y_mb = decoder->forward(f.z);
  }
  // RAVE crops both: transposed convs with odd ratios overshoot by a sample. A raw decoder
  // (model.output_mode = raw) makes the audio; its bands for the multiband distance come from the
  // analysis filter bank (RAVE: _pqmf_encode(self.pqmf, y)).
  if (options_.output_mode == OutputMode::kRaw) {
    f.y = y_mb.narrow(-1, 0, std::min(y_mb.size(-1), x.size(-1)));
    const auto bands = analysis(y_mb);
    f.y_multiband = bands.narrow(-1, 0, std::min(bands.size(-1), f.x_multiband.size(-1)));
    return f;
  }
  f.y_multiband = y_mb.narrow(-1, 0, std::min(y_mb.size(-1), f.x_multiband.size(-1)));
  auto y = synthesis(y_mb);
  f.y = y.narrow(-1, 0, std::min(y.size(-1), x.size(-1)));
  return f;
}

void RaveModelImpl::set_receptive_field(ReceptiveField field) {
  receptive_field_ = field;
  torch::NoGradGuard no_grad;
  auto buffer = named_buffers(false)["receptive_field"];
  buffer.copy_(torch::tensor({field.left, field.right}, torch::kLong));
}

void RaveModelImpl::sync_receptive_field() {
  const auto buffer = named_buffers(false)["receptive_field"].to(torch::kCPU);
  receptive_field_ = {buffer[0].item<int64_t>(), buffer[1].item<int64_t>()};
}

void RaveModelImpl::set_warmed_up(bool state) {
  warmed_up_ = state;
  encoder->set_warmed_up(state);
  decoder->set_warmed_up(state);
}

std::vector<torch::Tensor> RaveModelImpl::encoder_parameters() const { return encoder->parameters(); }

std::vector<torch::Tensor> RaveModelImpl::decoder_parameters() const { return decoder->parameters(); }

std::vector<torch::Tensor> RaveModelImpl::generator_parameters() const {
  auto p = encoder_parameters();
  auto d = decoder_parameters();
  p.insert(p.end(), d.begin(), d.end());
  return p;
}

std::vector<torch::Tensor> RaveModelImpl::discriminator_parameters() const {
  if (!discriminator) return {};
  return discriminator->parameters();
}

RaveLossOptions RaveLossOptions::preset(RaveVersion version) {
  RaveLossOptions o;
  if (version == RaveVersion::kV1) {
    o.feature_matching_weight = 10.0;
    o.relative_feature_matching = false;
    o.num_skipped_features = 0;
    o.valid_signal_crop = false;
  }
  return o;
}

std::vector<std::pair<std::string, torch::Tensor>> RaveLosses::scalars() const {
  std::vector<std::pair<std::string, torch::Tensor>> s{
      {"fullband_spectral_distance", fullband_spectral_distance.detach()},
      {"multiband_spectral_distance", multiband_spectral_distance.detach()},
  };
  // RAVE adds (and logs) the term only when it is non-zero (`if reg.item()`): never for the
  // spherical encoder.
  if (has_regularization) s.emplace_back("regularization", regularization.detach());
  if (adversarial_active) {
    for (const auto& [tag, t] :
         {std::pair<const char*, const torch::Tensor*>{"feature_matching", &feature_matching},
          {"adversarial", &adversarial},
          {"loss_dis", &loss_dis},
          {"pred_real", &pred_real},
          {"pred_fake", &pred_fake}}) {
      s.emplace_back(tag, t->detach());
    }
  }
  return s;
}

namespace {

// The multiband signal the multiband distance compares: cut to the receptive field when the
// loss options crop and the field is known (RAVE: `valid_signal_crop and receptive_field.sum()`).
torch::Tensor distance_multiband(const RaveModelImpl& model, const RaveLossOptions& opts,
                                 const torch::Tensor& t) {
  if (!opts.valid_signal_crop || model.receptive_field().empty()) return t;
  return valid_signal_crop(t, model.receptive_field());
}

RealSpectra start_real_spectra(const RaveModelImpl& model, const torch::Tensor& x_multiband,
                               const torch::Tensor& x, const RaveLossOptions& opts) {
  RealSpectra s;
  s.multiband = stft_magnitudes(distance_multiband(model, opts, x_multiband), opts.stft_scales);
  s.fullband = stft_magnitudes(x, opts.stft_scales);
  s.energies = models::batch_global_means_async(
      torch::cat({spectral_energy(s.multiband), spectral_energy(s.fullband)}));
  return s;
}

}  // namespace

RaveForward rave_forward(RaveModelImpl& model, const torch::Tensor& x, RaveStep step,
                         const RaveLossOptions* opts) {
  const bool dis_step = step == RaveStep::kDiscriminator;
  TORCH_CHECK(!dis_step || (model.warmed_up() && model.discriminator),
              "rave_forward: a discriminator step needs phase 2 (set_warmed_up) and a discriminator");
  // The autoencoder only needs a graph when the generator is being trained.
  rt::compat::optional<torch::NoGradGuard> no_grad;
  if (dis_step) no_grad.emplace();
  if (opts == nullptr || !models::batch_slice_distributed()) return model.forward_train(x);
  // The denominators depend on the input alone: their all-reduce starts before the encoder.
  RealSpectra spectra;
  RaveForward f = model.forward_train(x, {}, [&](const torch::Tensor& x_multiband) {
    spectra = start_real_spectra(model, x_multiband, x, *opts);
  });
  f.real_spectra = std::move(spectra);
  return f;
}

RaveLosses rave_losses(RaveModelImpl& model, const torch::Tensor& x, const RaveLossOptions& opts,
                       double beta_factor, RaveStep step) {
  return rave_losses_from_forward(model, x, rave_forward(model, x, step, &opts), opts, beta_factor, step);
}

RaveLosses rave_losses_from_forward(RaveModelImpl& model, const torch::Tensor& x, const RaveForward& f,
                                    const RaveLossOptions& opts, double beta_factor, RaveStep step) {
  const bool dis_step = step == RaveStep::kDiscriminator;
  const bool adversarial = model.warmed_up() && model.discriminator;
  const int64_t b = x.size(0);
  RaveLosses l;
  // Phase 2: the discriminator's features come first. Data parallelism: relative feature
  // matching's denominators mean|real| of every feature map are combined over ranks in one
  // all-reduce (models/common/batch_slice.h), started as soon as the features exist and read
  // after the spectral distances, the numerators mean|real − fake| and the hinge terms, none of
  // which needs it: the wait for the other ranks hides behind them.
  Features features;
  const bool global_scales =
      adversarial && opts.relative_feature_matching && models::batch_slice_distributed();
  models::PendingGlobalMeans pending_scales;
  if (adversarial) {
    auto y = dis_step ? f.y.detach() : f.y;
    auto both = torch::cat({x, y}, 0);
    {
      prof::ModuleScope span("discriminator");
      features = model.discriminator->forward(both);
    }
    if (global_scales) {
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> means;
      for (const auto& scale : features) {
        for (size_t i = std::min(scale.size(), static_cast<size_t>(opts.num_skipped_features));
             i < scale.size(); ++i) {
          means.push_back(scale[i].narrow(0, 0, b).abs().mean());
        }
      }
      if (!means.empty()) pending_scales = models::batch_global_means_async(torch::stack(means));
    }
  }
  {
    // No graph in a discriminator step (as a NoGradGuard there; GCC 12 misreads an optional guard).
    torch::AutoGradMode grad_mode(!dis_step && torch::GradMode::is_enabled());
    // Data parallelism: the convergence terms' denominators of both distances, every scale,
    // combined over ranks in one all-reduce rather than one per scale (models/common/batch_slice.h),
    // started by rave_forward when it was given the loss options, else here.
    torch::Tensor mb_energy, fb_energy;
    RealSpectra spectra;
    if (models::batch_slice_distributed()) {
      spectra = f.real_spectra.energies.started() ? f.real_spectra
                                                  : start_real_spectra(model, f.x_multiband, x, opts);
      const auto s = static_cast<int64_t>(opts.stft_scales.size());
      auto both = spectra.energies.get();
      mb_energy = both.narrow(0, 0, s);
      fb_energy = both.narrow(0, s, s);
    }
    const bool reuse = spectra.energies.started();
    l.multiband_spectral_distance = spectral_distance(
        distance_multiband(model, opts, f.x_multiband), distance_multiband(model, opts, f.y_multiband),
        opts.stft_scales, opts.log_epsilon, mb_energy, reuse ? &spectra.multiband : nullptr);
    l.fullband_spectral_distance = spectral_distance(x, f.y, opts.stft_scales, opts.log_epsilon, fb_energy,
                                                     reuse ? &spectra.fullband : nullptr);
    l.regularization = f.kl * beta_factor;
    // RAVE adds the term only when it is non-zero (`if reg.item()`): never for the spherical
    // encoder, nor for the discrete one before its quantiser is enabled.
    const auto kind = model.encoder->kind;
    l.has_regularization =
        kind != EncoderKind::kSpherical && (kind != EncoderKind::kDiscrete || model.encoder->quantizing());
  }
  l.y = f.y;
  const auto zero = torch::zeros({}, x.options());
  l.feature_matching = l.adversarial = l.loss_dis = l.pred_real = l.pred_fake = zero;
  l.loss_gen = l.fullband_spectral_distance * opts.fullband_distance_weight +
               l.multiband_spectral_distance * opts.multiband_distance_weight + l.regularization;

  if (adversarial) {
    l.adversarial_active = true;
    torch::Tensor adv = zero, dis = zero, pr = zero, pf = zero;
    // Per scale, the feature maps after the skipped ones: mean|real − fake| (divided below when
    // the denominators are global), or mean_difference itself.
    std::vector<std::vector<torch::Tensor>> differences;
    for (const auto& scale : features) {
      differences.emplace_back();
      const size_t skip = std::min(scale.size(), static_cast<size_t>(opts.num_skipped_features));
      for (size_t i = skip; i < scale.size(); ++i) {
        const auto real = scale[i].narrow(0, 0, b), fake = scale[i].narrow(0, b, b);
        differences.back().push_back(
            mean_difference(real, fake, opts.relative_feature_matching && !global_scales));
      }
      const auto real = scale.back().narrow(0, 0, b), fake = scale.back().narrow(0, b, b);
      auto [d, a] = hinge_gan(real, fake);
      dis = dis + d;
      adv = adv + a;
      pr = pr + real.mean();
      pf = pf + fake.mean();
    }
    const torch::Tensor real_scales = pending_scales.started() ? pending_scales.get() : torch::Tensor();
    int64_t next_scale = 0;
    torch::Tensor fm = zero;
    for (const auto& scale : differences) {
      torch::Tensor dist = zero;
      for (const auto& difference : scale) {
        dist = dist + (real_scales.defined() ? difference / real_scales[next_scale++] : difference);
      }
      if (!scale.empty()) fm = fm + dist / static_cast<double>(scale.size());
    }
    if (!features.empty()) fm = fm / static_cast<double>(features.size());
    // RAVE logs the distance times the weight, and adds that times the weight again to loss_gen.
    l.feature_matching = fm * opts.feature_matching_weight;
    l.adversarial = adv * opts.adversarial_weight;
    l.loss_dis = dis;
    l.pred_real = pr;
    l.pred_fake = pf;
    const double again = opts.feature_matching_weight_twice ? opts.feature_matching_weight : 1.0;
    const double adv_again = opts.feature_matching_weight_twice ? opts.adversarial_weight : 1.0;
    if (!dis_step) l.loss_gen = l.loss_gen + l.feature_matching * again + l.adversarial * adv_again;
  }
  return l;
}

torch::Tensor rave_validation_loss(RaveModelImpl& model, const torch::Tensor& x,
                                   const RaveLossOptions& opts) {
  torch::NoGradGuard no_grad;
  auto f = model.forward_train(x);
  return spectral_distance(x, f.y, opts.stft_scales, opts.log_epsilon);
}

}  // namespace rt::rave

// The RAVE model (acids-ircam/RAVE v2.3 rave/model.py): PQMF → variational encoder →
// generator → PQMF synthesis, plus its discriminator, and the losses of one training step.
//
// Submodules and state-dict keys mirror RAVE's LightningModule:
//   pqmf.hk, pqmf.h, pqmf.forward_conv.weight, pqmf.inverse_conv.weight   (fixed, no grad)
//   encoder.warmed_up, encoder.encoder.net.<i>…                            (VariationalEncoder)
//   decoder.net.<i>…                                                       (Generator[V2])
//   discriminator.discriminators.<i>…  (v1: discriminator.layers.<i>…)
//   latent_pca, latent_mean, fidelity, receptive_field                     (buffers, as RAVE)
//
// One training step (RAVE training_step; the trainer owns optimizers and schedules):
//   model->set_warmed_up(step >= phase_1_duration);          // phase 2: encoder frozen
//   bool dis = model->warmed_up() && step % update_discriminator_every == 0;
//   auto l = rave_losses(*model, x, loss_opts, beta, dis ? RaveStep::kDiscriminator
//                                                       : RaveStep::kGenerator);
//   if (dis) { dis_opt.zero_grad(); l.loss_dis.backward(); dis_opt.step(); }
//   else     { gen_opt.zero_grad(); l.loss_gen.backward(); gen_opt.step(); }
//   log l.scalars() (RAVE's tag names).
// Optimizers: Adam(model->generator_parameters(), lr, (.5,.9)) and
// Adam(model->discriminator_parameters(), discriminator_lr, (.5,.9)).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "models/common/batch_slice.h"
#include "models/common/pqmf.h"
#include "models/rave/discriminator.h"
#include "models/rave/encoder.h"
#include "models/rave/generator.h"
#include "models/rave/losses.h"
#include "models/rave/mel.h"
#include "models/rave/options.h"
#include "models/rave/receptive_field.h"

namespace rt::rave {

// Everything one forward pass through the autoencoder produces.
// Data parallel: the real audio's STFT magnitudes per STFT scale (multiband, fullband), which the
// spectral distances reuse, and the global means of their energies ([multiband per scale,
// fullband per scale]: the distances' denominators), one all-reduce started as soon as the
// magnitudes exist.
struct RealSpectra {
  std::vector<torch::Tensor> multiband, fullband;
  models::PendingGlobalMeans energies;
};

struct RaveForward {
  torch::Tensor x_multiband;  // (B, C·n_band, T/n_band)
  torch::Tensor stats;        // raw encoder output (B, 2·latent, T/compression)
  torch::Tensor z;            // sampled latent (B, latent, T/compression)
  torch::Tensor kl;           // scalar KL (without β)
  torch::Tensor y_multiband;  // cropped to x_multiband's length
  torch::Tensor y;            // (B, C, T), cropped to x's length
  // Data parallel (rave_forward with loss options): made right after the analysis, so that the
  // denominators' all-reduce runs behind the autoencoder (energies.started() when made).
  RealSpectra real_spectra;
};

struct RaveModelImpl : torch::nn::Module {
  // Throws rt::Error (naming the model.<key>) when the options are invalid.
  explicit RaveModelImpl(RaveOptions options);

  torch::Tensor analysis(const torch::Tensor& x);      // (B,C,T) → (B, C·M, T/M)
  torch::Tensor synthesis(const torch::Tensor& y);     // (B, C·M, T') → (B, C, T'·M)
  torch::Tensor encode_stats(const torch::Tensor& x);  // RAVE encode(): (B, 2L, T')
  // What the encoder reads: the PQMF bands, or (model.input_mode = mel) the mel features.
  torch::Tensor encoder_input(const torch::Tensor& x);
  // Audio (B, C, T) → (sampled z (B, L, T/compression), KL scalar).
  std::tuple<torch::Tensor, torch::Tensor> encode(const torch::Tensor& x);
  torch::Tensor decode(const torch::Tensor& z);   // z → audio (B, C, T'·compression)
  torch::Tensor forward(const torch::Tensor& x);  // analysis→encode→sample→decode→synthesis
  // `noise`: the reparametrisation draws (see VariationalEncoderImpl::reparametrize).
  // `after_analysis`, when set, is called with the multiband input as soon as the analysis has
  // made it, before the encoder runs.
  // `augmentation`: the wasserstein encoder's noise channels (reparametrize).
  RaveForward forward_train(const torch::Tensor& x, const torch::Tensor& noise = {},
                            const std::function<void(const torch::Tensor&)>& after_analysis = {},
                            const torch::Tensor& augmentation = {});

  // RAVE's receptive field, as its `receptive_field` buffer holds it ({0, 0}: not measured).
  // set_receptive_field writes the buffer; sync_receptive_field re-reads it (after loading a
  // state dict into the module).
  ReceptiveField receptive_field() const { return receptive_field_; }
  void set_receptive_field(ReceptiveField field);
  void sync_receptive_field();

  // Phase 2 switch: detaches the encoder output (frozen encoder), enables v1's noise branch.
  void set_warmed_up(bool state);
  bool warmed_up() const { return warmed_up_; }

  std::vector<torch::Tensor> generator_parameters() const;  // encoder + decoder
  std::vector<torch::Tensor> encoder_parameters() const;
  std::vector<torch::Tensor> decoder_parameters() const;
  std::vector<torch::Tensor> discriminator_parameters() const;  // empty without one

  const RaveOptions& options() const { return options_; }

  models::Pqmf pqmf{nullptr};
  MelSpectrogram spectrogram{nullptr};  // model.input_mode = mel (hybrid.gin) only
  VariationalEncoder encoder{nullptr};
  std::shared_ptr<DecoderBase> decoder;
  std::shared_ptr<DiscriminatorBase> discriminator;  // nullptr when options.discriminator = none

 private:
  RaveOptions options_;
  bool warmed_up_ = false;
  ReceptiveField receptive_field_;  // host copy of the buffer: the crop reads it every step
};
TORCH_MODULE(RaveModel);

// Loss settings of RAVE's training step that are not model architecture.
struct RaveLossOptions {
  std::vector<int64_t> stft_scales{2048, 1024, 512, 256, 128};
  double log_epsilon = 1e-7;
  // v2.gin's weights['feature_matching'] = 20 (v1: 10). RAVE's training_step multiplies the
  // feature-matching distance by it when it fills loss_gen (the logged `feature_matching`) and
  // again when it sums loss_gen, so RAVE trains with its square (400; v1 100): `twice`. With
  // twice = false it is applied once.
  double feature_matching_weight = 20.0;
  bool feature_matching_weight_twice = true;
  // v2/v3 (RAVE.valid_signal_crop = True): both multiband signals are cut to the model's
  // receptive field (receptive_field.h) before the multiband distance; v1: false.
  bool valid_signal_crop = true;
  bool relative_feature_matching = true;  // v2.gin; v1 uses the plain L1 mean
  // RAVE's weights of the loss_gen terms by their names (the second application in
  // training_step's sum, weights.get(k, 1.); wasserstein.gin: 2, 2 and 2). RAVE multiplies the
  // adversarial term by weights['adversarial'] when it fills loss_gen as well, so it trains with
  // the square, like feature matching (`feature_matching_weight_twice` governs both).
  double fullband_distance_weight = 1.0;
  double multiband_distance_weight = 1.0;
  double adversarial_weight = 1.0;
  int64_t num_skipped_features = 1;  // v2.gin; v1: 0
  // v1 | v2 | v3 RAVE values (v1: weight 10, not relative, no skipped features, no crop).
  static RaveLossOptions preset(RaveVersion version);
};

enum class RaveStep { kGenerator, kDiscriminator };

// Losses of one step, as scalars (0-dim tensors). Adversarial terms are zero in phase 1.
struct RaveLosses {
  torch::Tensor fullband_spectral_distance, multiband_spectral_distance;
  torch::Tensor regularization;  // β·KL (β·MMD; 0 for the spherical encoder, not logged then)
  bool has_regularization = true;
  // As RAVE logs them: feature_matching is the distance times the weight once (loss_gen adds it
  // times the weight again unless feature_matching_weight_twice is false); adversarial as added.
  torch::Tensor feature_matching, adversarial;
  torch::Tensor loss_dis, pred_real, pred_fake;
  torch::Tensor loss_gen;  // what a generator step back-propagates
  torch::Tensor y;         // the reconstruction (B, C, T)
  // RAVE's TensorBoard tags → detached 0-d tensors (adversarial ones only when
  // `adversarial_active`). Reads nothing on the host.
  std::vector<std::pair<std::string, torch::Tensor>> scalars() const;
  bool adversarial_active = false;
};

// Computes RAVE training_step's losses for audio x (B, C, T). In a kDiscriminator step the
// autoencoder runs without gradients and the discriminator sees the reconstruction detached,
// so only loss_dis carries a graph (into the discriminator). REQUIRES: kDiscriminator only when
// model.warmed_up() and the model has a discriminator.
RaveLosses rave_losses(RaveModelImpl& model, const torch::Tensor& x, const RaveLossOptions& opts,
                       double beta_factor, RaveStep step = RaveStep::kGenerator);

// The same computation in two halves, so that a trainer can time the forward pass and the
// losses separately: rave_forward runs the autoencoder (without a graph in a discriminator
// step); rave_losses_from_forward computes the distances, KL and adversarial terms from it.
// With `opts` in a data-parallel step (models::batch_slice_distributed()), rave_forward also
// starts the all-reduce of the spectral denominators (RaveForward::real_spectra), which
// rave_losses_from_forward then reads instead of all-reducing them itself.
RaveForward rave_forward(RaveModelImpl& model, const torch::Tensor& x, RaveStep step = RaveStep::kGenerator,
                         const RaveLossOptions* opts = nullptr);
RaveLosses rave_losses_from_forward(RaveModelImpl& model, const torch::Tensor& x, const RaveForward& f,
                                    const RaveLossOptions& opts, double beta_factor,
                                    RaveStep step = RaveStep::kGenerator);

// RAVE validation_step's `validation`: fullband spectral distance of forward(x) to x (no grad).
torch::Tensor rave_validation_loss(RaveModelImpl& model, const torch::Tensor& x, const RaveLossOptions& opts);

}  // namespace rt::rave

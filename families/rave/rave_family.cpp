#include "families/rave/rave_family.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <tuple>

#include "config/config.h"
#include "config/family_registry.h"
#include "data/audio_dataset.h"
#include "data/augment.h"
#include "data/data_kind.h"
#include "data/loader.h"
#include "data/split.h"
#include "distributed/sync_batch_norm.h"
#include "families/common/data_keys.h"
#include "families/rave/rave_data.h"
#include "models/common/summary.h"
#include "models/rave/latent_pca.h"
#include "models/rave/rave.h"
#include "training/ema.h"
#include "training/fused_adam.h"
#include "training/phases.h"
#include "util/error.h"

namespace rt {

namespace {

class RaveFamily final : public ModelFamily {
 public:
  explicit RaveFamily(const Config& config)
      : options_(rave_options_from(config)),
        loss_options_(rave_loss_options_from(config)),
        train_(rave_train_keys().from(config)),
        data_(rave_data_keys().from(config)),
        device_(torch::kCPU) {}

  TrainData make_data(const Config& c) override {
    RaveData d = make_rave_data(c, options_, n_signal());
    channels_ = d.channels;
    sampling_rate_ = d.sampling_rate;
    return std::move(d.data);
  }

  void build(const FamilyContext& context, const TrainData* data) override {
    device_ = context.device;
    sync_ = context.gradient_sync;
    comm_ = context.comm;
    options_.channels = data != nullptr ? channels_ : std::max<int64_t>(1, data_.channels);
    if (data != nullptr) options_.sampling_rate = sampling_rate_;
    options_.validate();
    model_ = rave::RaveModel(options_);
    model_->to(device_);
    if (train_.ema > 0) ema_ = std::make_unique<ParameterEma>(train_.ema);
    // RAVE measures its receptive field in Lightning's sanity validation, before step 0; the
    // multiband distance is cropped to it from the first step on (a resumed run keeps the one
    // its checkpoint holds, see load()).
    if (data != nullptr && loss_options_.valid_signal_crop) measure_receptive_field();
    // v1's encoder BatchNorm: statistics over every rank's batch (sync), or each rank its own
    // with rank 0's running statistics broadcast before validation (local).
    local_batch_norm_ = train_.batch_norm == "local";
    if (comm_->world_size() > 1 && !local_batch_norm_) dist::set_batch_norm_sync(*model_, comm_);
    const std::tuple<double, double> betas{train_.adam_beta1, train_.adam_beta2};
    gen_opt_ = make_adam(model_->generator_parameters(), torch::optim::AdamOptions(train_.lr).betas(betas),
                         train_.fused_optimizer);
    if (model_->discriminator) {
      dis_opt_ =
          make_adam(model_->discriminator_parameters(),
                    torch::optim::AdamOptions(train_.discriminator_lr).betas(betas), train_.fused_optimizer);
    }
  }

  StepResult train_step(const Batch& batch, int64_t step) override {
    // Built without data (no receptive field yet): measured before the first step, as RAVE's
    // sanity validation does.
    if (loss_options_.valid_signal_crop && model_->receptive_field().empty()) measure_receptive_field();
    model_->train();
    const bool warm = step >= train_.phase_1_duration;
    model_->set_warmed_up(warm);
    // RAVE's QuantizeCallback: the quantiser from batch warmup_quantize on (see train.warmup_quantize).
    // (Setting the buffer needs no host read; quantizing() would sync a device every step.)
    if (options_.encoder == rave::EncoderKind::kDiscrete && step >= train_.warmup_quantize)
      model_->encoder->set_quantizing(true);
    // RAVE: `not batch_idx % update_discriminator_every`, with Lightning's batch_idx counting
    // the batches of the current epoch.
    const bool dis_step = warm && dis_opt_ && batch_in_epoch(batch) % train_.update_discriminator_every == 0;
    const auto kind = dis_step ? rave::RaveStep::kDiscriminator : rave::RaveStep::kGenerator;
    const double beta = rave_beta_at(step, train_.beta_start, train_.beta_end, train_.beta_warmup_steps);
    const double lr = train_.lr * rave_lr_factor_at(step, train_.lr_end_factor, train_.phase_1_duration);
    torch::Tensor x = batch.input.to(device_, /*non_blocking=*/true);

    rave::RaveForward fwd;
    {
      PhaseScope p(Phase::kForward);
      fwd = rave::rave_forward(*model_, x, kind, &loss_options_);
    }
    rave::RaveLosses l;
    {
      PhaseScope p(Phase::kLoss);
      l = rave::rave_losses_from_forward(*model_, x, fwd, loss_options_, beta, kind);
    }
    torch::optim::Optimizer& opt = dis_step ? *dis_opt_ : *gen_opt_;
    const torch::Tensor& loss = dis_step ? l.loss_dis : l.loss_gen;
    {
      PhaseScope p(Phase::kBackward);
      clear_gradients(opt);
      // Only the parameters of the optimizer that steps now are synchronised.
      backward_with_sync(loss, optimizer_parameters(opt), *sync_);
    }
    {
      PhaseScope p(Phase::kOptimizer);
      if (!dis_step) {
        if (warm && model_->encoder->frozen_in_phase_2()) {
          // (RAVE's SphericalEncoder and DiscreteEncoder are never frozen: they train on in phase 2.)
          // Frozen encoder: LibTorch 1.13's zero_grad() leaves zero-filled gradients, on
          // which Adam would keep moving the encoder by its momentum. Undefined gradients are
          // skipped by Adam, so the encoder stays exactly where phase 1 left it.
          for (auto& p : model_->encoder_parameters()) p.mutable_grad() = torch::Tensor();
        }
        for (auto& group : gen_opt_->param_groups()) {
          static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
        }
      }
      opt.step();
    }
    if (ema_) ema_->update(*model_);  // RAVE's EMA.on_train_batch_end, after every batch
    // Data parallel: each rank moved its codebooks by its own frames; as DDP's broadcast_buffers
    // does before RAVE's next forward, rank 0's codebooks become every rank's.
    if (model_->encoder->rvq && comm_->world_size() > 1)
      dist::broadcast_buffers(*comm_, *model_->encoder->rvq);
    StepResult r;
    r.loss = loss.detach();
    for (auto& [tag, value] : l.scalars()) r.scalars.add(tag, value);
    r.scalars.add("beta_factor", beta);
    r.scalars.add("train/lr", lr);
    r.examples = batch.input.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t step) override {
    torch::NoGradGuard no_grad;
    EmaSwap averages(ema_.get(), *model_);  // RAVE validates on the EMA weights
    if (local_batch_norm_) dist::broadcast_buffers(*comm_, *model_);
    model_->eval();
    double sum = 0.0;
    int64_t count = 0;
    ValidationResult v;
    // RAVE fits the latent PCA (for export) on the posterior means in phase 1 only; from
    // phase 2 on it stays as the last phase-1 validation left it (rave/model.py).
    const bool fit_pca =
        step < train_.phase_1_duration && options_.encoder == rave::EncoderKind::kVariational;
    rave::LatentPcaAccumulator pca(options_.latent_size);
    while (auto batch = val_loader.next()) {
      torch::Tensor x = batch->input.to(device_);
      auto f = model_->forward_train(x);
      if (fit_pca) pca.add(f.stats.chunk(2, 1)[0]);
      // Per example, so the metric does not depend on how the validation set is batched or
      // shared out over ranks (the spectral convergence term is a ratio of means).
      for (int64_t i = 0; i < x.size(0); ++i) {
        sum += rave::spectral_distance(x.narrow(0, i, 1), f.y.narrow(0, i, 1), loss_options_.stft_scales,
                                       loss_options_.log_epsilon)
                   .item<double>();
      }
      count += x.size(0);
      if (!v.audio.defined()) {
        // Original then reconstruction, half a second of silence between (TensorBoard audio).
        auto original = x[0].to(torch::kCPU);
        auto recon = f.y[0].to(torch::kCPU).clamp(-1.0, 1.0);
        if (data_.derivative) {
          // RAVE logs the derivative model's audio integrated back (model.integrator).
          original = original.contiguous();
          recon = recon.contiguous();
          integrate_derivative(original, sampling_rate_);
          integrate_derivative(recon, sampling_rate_);
        }
        auto gap = torch::zeros({original.size(0), sampling_rate_ / 2});
        v.audio = torch::cat({original, gap, recon}, 1);
        v.sample_rate = sampling_rate_;
      }
    }
    if (fit_pca) {
      pca.reduce([this](torch::Tensor& t) { comm_->all_reduce_sum(t); });
      if (pca.count() >= 2) rave::store_latent_pca(*model_, pca.fit());
    }
    model_->train();
    // The global mean over every rank's share: sums and counts, never a mean of rank means.
    auto totals = torch::tensor({sum, static_cast<double>(count)}, torch::kDouble);
    comm_->all_reduce_sum(totals);
    const double global_sum = totals[0].item<double>(), global_count = totals[1].item<double>();
    v.metrics["validation"] = global_count > 0 ? global_sum / global_count : std::nan("");
    return v;
  }

  std::string monitor_metric() const override { return "validation"; }
  bool monitor_higher_is_better() const override { return false; }

  void save(torch::serialize::OutputArchive& a) override {
    torch::serialize::OutputArchive m, g;
    model_->save(m);
    a.write("rave", m);
    a.write("rave_losses_revision", c10::IValue(kLossesRevision));
    a.write("rave_model_revision", c10::IValue(kModelRevision));
    // The audio format comes from the database, not the config: export needs it.
    a.write("sampling_rate", c10::IValue(static_cast<int64_t>(sampling_rate_)));
    a.write("channels", c10::IValue(options_.channels));
    if (ema_ && !ema_->empty()) {
      // The averages as a model of their own (same names; buffers as the model's).
      torch::serialize::OutputArchive e;
      ema_->save_as_module(*model_, e);
      a.write("rave_ema", e);
    }
    gen_opt_->save(g);
    a.write("gen_opt", g);
    if (dis_opt_) {
      torch::serialize::OutputArchive d;
      dis_opt_->save(d);
      a.write("dis_opt", d);
    }
  }

  void load(torch::serialize::InputArchive& a) override {
    torch::serialize::InputArchive m, g;
    c10::IValue model_revision;
    if (!a.try_read("rave_model_revision", model_revision) &&
        options_.activation == models::Activation::kSnake) {
      // Written when the dilated units had Snake too: their `alpha` would be dropped unread.
      throw Error(
          "this checkpoint was written by a trainer that put Snake activations inside the dilated units "
          "(model.activation = snake, as v3); RAVE builds those units with LeakyReLU(0.2) and so does this "
          "trainer (docs/rave_fidelity.md, \"v3 activations\"), so the checkpoint's unit parameters have no "
          "place "
          "in the model and its function would change: resume or export it with the trainer version that "
          "wrote "
          "it, or start a new run");
    }
    torch::serialize::InputArchive e;
    if (ema_ && a.try_read("rave_ema", e)) {
      model_->load(e);  // the averages, taken from the model before its own weights are loaded
      ema_->assign_from(*model_);
    }
    a.read("rave", m);
    model_->load(m);
    model_->sync_receptive_field();
    c10::IValue revision;
    if (!a.try_read("rave_losses_revision", revision)) {
      // Written before the losses followed RAVE's crop and feature-matching weight.
      std::cerr << "warning: this checkpoint was written by a trainer whose RAVE losses differ from "
                   "this one's: no receptive-field crop of the multiband distance and the feature-matching "
                   "weight applied once. Resuming, the losses follow RAVE's from here on"
                << (loss_options_.valid_signal_crop ? " (train.valid_signal_crop = true)" : "")
                << (loss_options_.feature_matching_weight_twice
                        ? " (train.feature_matching_weight_twice = true)"
                        : "")
                << "; to keep the run's earlier losses, resume with --override train.valid_signal_crop=false "
                   "--override train.feature_matching_weight_twice=false\n";
    }
    if (loss_options_.valid_signal_crop && model_->receptive_field().empty()) measure_receptive_field();
    a.read("gen_opt", g);
    gen_opt_->load(g);
    if (dis_opt_) {
      torch::serialize::InputArchive d;
      a.read("dis_opt", d);
      dis_opt_->load(d);
    }
    model_->to(device_);
  }

  std::string summary() override {
    if (!model_) build(FamilyContext{}, nullptr);
    std::ostringstream s;
    s << "RAVE " << enum_name(options_.version) << " (capacity " << options_.capacity << ", latent "
      << options_.latent_size << ", " << options_.n_band << " bands, ratios";
    for (auto r : options_.ratios) s << ' ' << r;
    s << ")\n\n" << models::module_summary(*model_, "rave", 3) << "\n";
    auto count = [](const std::shared_ptr<torch::nn::Module>& m) -> int64_t {
      return m ? models::count_parameters(*m) : 0;
    };
    const int64_t enc = count(model_->encoder.ptr()), dec = count(model_->decoder),
                  dis = count(model_->discriminator), pq = models::count_parameters(*model_->pqmf);
    s << "encoder:       " << models::format_count(enc) << "\n"
      << "decoder:       " << models::format_count(dec) << "\n"
      << "discriminator: " << models::format_count(dis) << "\n"
      << "pqmf:          " << models::format_count(pq) << " (fixed filter bank, in no optimizer)\n"
      << "total trained: " << models::format_count(enc + dec + dis) << "\n";
    return s.str();
  }

  // Phase 1 (reconstruction and KL) from step 0, phase 2 (encoder frozen, adversarial) from
  // train.phase_1_duration; the smoke test runs phase 2 long enough to update the discriminator.
  std::vector<SchedulePhase> schedule_phases() const override {
    return {{0, "phase 1", 2},
            {train_.phase_1_duration, "phase 2 (adversarial)",
             std::max<int64_t>(2, train_.update_discriminator_every)}};
  }

  // Phase 2's generator step, its heaviest: the discriminator's forward on the real and the
  // reconstructed audio, and backward through the discriminator into the decoder.
  bool probe_phase_step(const torch::Tensor& input, int64_t first_step) override {
    if (first_step != train_.phase_1_duration || !model_->discriminator) return false;
    if (loss_options_.valid_signal_crop && model_->receptive_field().empty()) measure_receptive_field();
    drop_gradients();
    std::vector<torch::Tensor> buffers;
    {
      torch::NoGradGuard no_grad;
      for (const auto& b : model_->buffers(true)) buffers.push_back(b.clone());
    }
    const bool warm = model_->warmed_up();
    model_->train();
    model_->set_warmed_up(true);
    {
      const torch::Tensor x = input.to(device_);
      const auto kind = rave::RaveStep::kGenerator;
      const rave::RaveForward fwd = rave::rave_forward(*model_, x, kind, &loss_options_);
      const rave::RaveLosses l =
          rave::rave_losses_from_forward(*model_, x, fwd, loss_options_, train_.beta_end, kind);
      l.loss_gen.backward();
    }
    model_->set_warmed_up(warm);
    drop_gradients();
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& b : model_->buffers(true)) b.copy_(buffers[i++]);
    return true;
  }

  // The discriminator's Adam moments, created at its first update.
  int64_t phase_new_state_bytes(int64_t first_step) const override {
    if (first_step != train_.phase_1_duration || !dis_opt_ || !optimizer_state_tensors(*dis_opt_).empty())
      return 0;
    int64_t bytes = 0;
    for (const auto& p : optimizer_parameters(*dis_opt_)) bytes += p.numel() * p.element_size();
    return 2 * bytes;
  }

  std::string describe() const override {
    std::string d = "RAVE " + std::string(enum_name(options_.version)) + " (" +
                    std::to_string(options_.channels) + " ch, " + std::to_string(options_.sampling_rate) +
                    " Hz";
    if (model_ && !model_->receptive_field().empty()) d += ", receptive field " + describe_receptive_field();
    return d + ")";
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> out;
    out.emplace_back("pqmf", model_->pqmf.ptr());
    out.emplace_back("encoder", model_->encoder.ptr());
    out.emplace_back("decoder", model_->decoder);
    if (model_->discriminator) out.emplace_back("discriminator", model_->discriminator);
    return out;
  }

  MemoryHolders memory_holders() override {
    MemoryHolders h{model_->parameters(), model_->buffers(), {gen_opt_.get()}};
    if (dis_opt_) h.optimizers.push_back(dis_opt_.get());
    return h;
  }

 private:
  void drop_gradients() {
    for (auto& p : model_->parameters(true)) p.mutable_grad() = torch::Tensor();
  }
  // Checkpoints record which losses they were trained with; 2: RAVE's crop and twice-applied
  // feature-matching weight (absent: earlier checkpoints).
  static constexpr int64_t kLossesRevision = 2;
  // 2: the dilated units' activation is RAVE's LeakyReLU whatever model.activation is (absent:
  // earlier checkpoints, whose snake models had Snake in the units).
  static constexpr int64_t kModelRevision = 2;

  // Lightning's batch_idx: the index of `batch` among its epoch's batches (only the last batch
  // of an epoch can be smaller than the others).
  static int64_t batch_in_epoch(const Batch& batch) {
    const int64_t size = std::max<int64_t>(1, batch.global_examples);
    return std::max<int64_t>(0, (batch.position.example + size - 1) / size - 1);
  }

  std::string describe_receptive_field() const {
    const auto field = model_->receptive_field();
    auto ms = [this](int64_t samples) {
      std::ostringstream s;
      s.setf(std::ios::fixed);
      s.precision(2);
      s << 1000.0 * static_cast<double>(samples) / static_cast<double>(sampling_rate_) << " ms";
      return s.str();
    };
    return ms(field.left) + " <-- x --> " + ms(field.right) + " (" + std::to_string(field.left) + " / " +
           std::to_string(field.right) + " samples)";
  }

  // Measures and stores the receptive field, and checks that the multiband signal of
  // data.n_signal keeps enough samples after the crop for every STFT scale.
  void measure_receptive_field() {
    model_->set_receptive_field(rave::measure_receptive_field(*model_));
    const auto field = model_->receptive_field();
    const int64_t dim = options_.n_band * options_.channels;
    const int64_t kept = rave::valid_signal_length(n_signal() / options_.n_band, dim, field);
    const int64_t largest =
        *std::max_element(loss_options_.stft_scales.begin(), loss_options_.stft_scales.end());
    if (largest / 2 >= kept) {
      throw Error(
          "data.n_signal = " + std::to_string(n_signal()) + " leaves " + std::to_string(kept) +
          " samples per band after RAVE's receptive-field crop (" + std::to_string(field.left) + " / " +
          std::to_string(field.right) + " samples cut left / right, over " + std::to_string(dim) +
          " bands × channels), too few for model.stft_scales' " + std::to_string(largest) +
          " (needs more than " + std::to_string(largest / 2) +
          "): raise --n_signal, lower the largest STFT scale, or set train.valid_signal_crop = false");
    }
    if (comm_->rank() == 0) std::cout << "receptive field: " << describe_receptive_field() << "\n";
  }

  int64_t n_signal() const { return data_.n_signal; }

  rave::RaveOptions options_;
  rave::RaveLossOptions loss_options_;
  RaveTrainOptions train_;
  AudioDatasetOptions data_;  // the config's: make_data reads its own config's
  torch::Device device_;
  GradientSync* sync_ = &single_process_sync();
  std::shared_ptr<dist::Communicator> comm_ = std::make_shared<dist::LocalCommunicator>();
  bool local_batch_norm_ = false;  // train.distributed.batch_norm = local
  rave::RaveModel model_{nullptr};
  std::unique_ptr<torch::optim::Adam> gen_opt_,
      dis_opt_;                        // rt::FusedAdam unless train.fused_optimizer = false
  std::unique_ptr<ParameterEma> ema_;  // train.ema > 0 (training/ema.h)
  int64_t channels_ = 1;
  int sampling_rate_ = 44100;
};

}  // namespace

FamilyRegistration rave_family_registration() {
  using namespace keys;
  return {"rave", "RAVE audio autoencoder (v1, v2, v3) trained on an audio database",
          family_factory<RaveFamily>(),
          concat_specs({rave_model_keys().specs(), rave_train_keys().specs(), rave_loss_keys().specs()}),
          [](const Config& config) {
            (void)rave_data_keys().from(config);  // refuses unknown data.augment names
            rave_options_from(config).validate();
          }};
}

}  // namespace rt

#include "trainer/rave_family.h"

#include <cmath>
#include <sstream>

#include "data/audio_dataset.h"
#include "data/loader.h"
#include "data/split.h"
#include "util/error.h"
#include "models/common/summary.h"
#include "models/rave/rave.h"
#include "trainer/config.h"
#include "trainer/fused_adam.h"
#include "trainer/phases.h"

namespace rt {

double rave_beta_at(int64_t step, double beta_start, double beta_end, int64_t warmup_steps) {
  if (warmup_steps <= 0 || step >= warmup_steps) return beta_end;
  const double t = static_cast<double>(step) / static_cast<double>(warmup_steps);
  return std::exp(std::log(beta_start) + t * (std::log(beta_end) - std::log(beta_start)));
}

double rave_lr_factor_at(int64_t step, double end_factor, int64_t total) {
  if (total <= 0) return end_factor;
  const double t = std::min<double>(1.0, static_cast<double>(step) / static_cast<double>(total));
  return 1.0 + (end_factor - 1.0) * t;
}

namespace {

rave::RaveOptions rave_options_from(const Config& c) {
  rave::RaveOptions o;
  o.version = c.get_string("model.version");
  o.capacity = c.get_int("model.capacity");
  o.latent_size = c.get_int("model.latent_size");
  o.n_band = c.get_int("model.n_band");
  o.ratios = c.get_int_list("model.ratios");
  o.dilations = c.get_int_list_list("model.dilations");
  o.kernel_size = c.get_int("model.kernel_size");
  o.activation = c.get_string("model.activation");
  o.padding = c.get_string("model.padding");
  o.amplitude_modulation = c.get_bool("model.amplitude_modulation");
  o.noise_bands = c.get_int("model.noise_bands");
  o.noise_ratios = c.get_int_list("model.noise_ratios");
  o.adain = c.get_bool("model.adain");
  o.discriminator = c.get_string("model.discriminator");
  o.discriminator_capacity = c.get_int("model.discriminator_capacity");
  o.discriminator_n_layers = c.get_int("model.discriminator_n_layers");
  o.periods = c.get_int_list("model.periods");
  o.n_scales = c.get_int("model.n_scales");
  o.mrd_n_ffts = c.get_int_list("model.mrd_n_ffts");
  o.stft_scales = c.get_int_list("model.stft_scales");
  return o;
}

class RaveFamily final : public ModelFamily {
 public:
  explicit RaveFamily(const Config& config)
      : config_(config), options_(rave_options_from(config)), device_(torch::kCPU) {
    loss_options_ = rave::RaveLossOptions::preset(options_.version == "v1" ? "v1" : "v2");
    loss_options_.stft_scales = options_.stft_scales;
    loss_options_.feature_matching_weight = config.get_float("train.feature_matching_weight");
    phase_1_duration_ = config.get_int("train.phase_1_duration");
    update_dis_every_ = config.get_int("train.update_discriminator_every");
    n_signal_ = config.get_int("data.n_signal");
  }

  TrainData make_data(const Config& c) override {
    const std::string db = c.get_string("data.db_path");
    if (db.empty()) throw Error("no dataset: pass --db_path DB (or set data.db_path)");
    if (c.get_string("data.kind") != "audio") {
      throw Error("model.family = 'rave' trains on audio databases, but data.kind = '" + c.get_string("data.kind") +
                  "' (accepted: audio)");
    }
    AudioDatasetOptions train_opts;
    train_opts.n_signal = n_signal_;
    train_opts.channels = 0;  // From the database; checked against data.channels below.
    train_opts.phase_mangle = c.get_bool("data.phase_mangle");
    train_opts.phase_mangle_p = c.get_float("data.phase_mangle_p");
    train_opts.dequantize = c.get_bool("data.dequantize");
    train_opts.slowdown_ms = c.get_float("data.slowdown_ms");
    auto train = std::make_shared<AudioDataset>(db, train_opts);
    // Validation sees the audio as it is: no random phase or dither, so values are comparable.
    AudioDatasetOptions val_opts = train_opts;
    val_opts.phase_mangle = false;
    val_opts.dequantize = false;
    val_opts.slowdown_ms = 0.0;
    auto val = std::make_shared<AudioDataset>(db, val_opts);
    const int64_t want_channels = c.get_int("data.channels");
    if (want_channels != 0 && want_channels != train->channels()) {
      throw Error("data.channels = " + std::to_string(want_channels) + ", but database '" + db + "' holds " +
                  std::to_string(train->channels()) + "-channel audio: set data.channels to " +
                  std::to_string(train->channels()) + " (or 0 = from the database), or rebuild the database with " +
                  "preprocess --channels " + std::to_string(want_channels));
    }

    const int64_t length = train->record(0).size(1);
    if (length < n_signal_) {
      throw Error("database '" + db + "' holds examples of " + std::to_string(length) +
                  " samples, fewer than data.n_signal = " + std::to_string(n_signal_) +
                  ": lower --n_signal (at most " + std::to_string(length) +
                  ") or rebuild the database with a larger --num_signal");
    }
    const int64_t compression = options_.compression();
    if (n_signal_ % compression != 0) {
      throw Error("data.n_signal = " + std::to_string(n_signal_) + " must be a multiple of the model's compression " +
                  std::to_string(compression) + " (n_band × product of ratios)");
    }
    const int64_t band_length = n_signal_ / options_.n_band;
    for (int64_t scale : options_.stft_scales) {
      if (scale / 2 >= band_length) {
        throw Error("model.stft_scales holds " + std::to_string(scale) + ", too large for data.n_signal = " +
                    std::to_string(n_signal_) + " split in " + std::to_string(options_.n_band) +
                    " bands (band signals of " + std::to_string(band_length) +
                    " samples need scales below " + std::to_string(2 * band_length) + ")");
      }
    }
    channels_ = train->channels();
    sampling_rate_ = train->sampling_rate();

    Split split = split_indices(train->size(), c.get_float("data.val_fraction"),
                                static_cast<size_t>(c.get_int("data.val_max")),
                                static_cast<uint64_t>(c.get_int("data.split_seed")));
    if (split.val.empty()) {
      // Tiny databases: validate on one training example rather than on nothing.
      split.val.push_back(split.train.back());
    }
    TrainData d;
    d.train = train;
    d.val = val;
    d.train_indices = std::move(split.train);
    d.val_indices = std::move(split.val);
    d.samples_per_example = n_signal_;
    d.sample_unit = "audio samples";
    return d;
  }

  void build(const FamilyContext& context, const TrainData* data) override {
    device_ = context.device;
    sync_ = context.gradient_sync;
    options_.channels = data != nullptr ? channels_ : std::max<int64_t>(1, config_.get_int("data.channels"));
    if (data != nullptr) options_.sampling_rate = sampling_rate_;
    options_.validate();
    model_ = rave::RaveModel(options_);
    model_->to(device_);
    const double b1 = config_.get_float("train.adam_beta1"), b2 = config_.get_float("train.adam_beta2");
    lr_ = config_.get_float("train.lr");
    const bool fused = config_.get_bool("train.fused_optimizer");
    gen_opt_ = make_adam(model_->generator_parameters(), torch::optim::AdamOptions(lr_).betas({b1, b2}), fused);
    if (model_->discriminator) {
      dis_opt_ = make_adam(model_->discriminator_parameters(),
                           torch::optim::AdamOptions(config_.get_float("train.discriminator_lr")).betas({b1, b2}), fused);
    }
  }

  StepResult train_step(const Batch& batch, int64_t step) override {
    model_->train();
    const bool warm = step >= phase_1_duration_;
    model_->set_warmed_up(warm);
    const bool dis_step = warm && dis_opt_ && step % update_dis_every_ == 0;
    const auto kind = dis_step ? rave::RaveStep::kDiscriminator : rave::RaveStep::kGenerator;
    const double beta = rave_beta_at(step, config_.get_float("train.beta_start"), config_.get_float("train.beta_end"),
                                     config_.get_int("train.beta_warmup_steps"));
    torch::Tensor x = batch.input.to(device_, /*non_blocking=*/true);

    rave::RaveForward fwd;
    {
      PhaseScope p(Phase::kForward);
      fwd = rave::rave_forward(*model_, x, kind);
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
        if (warm) {
          // Frozen encoder: LibTorch 1.13's zero_grad() leaves zero-filled gradients, on
          // which Adam would keep moving the encoder by its momentum. Undefined gradients are
          // skipped by Adam, so the encoder stays exactly where phase 1 left it.
          for (auto& p : model_->encoder_parameters()) p.mutable_grad() = torch::Tensor();
        }
        const double factor = rave_lr_factor_at(step, config_.get_float("train.lr_end_factor"), phase_1_duration_);
        for (auto& group : gen_opt_->param_groups()) {
          static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr_ * factor);
        }
      }
      opt.step();
    }
    StepResult r;
    r.loss = loss.detach();
    for (auto& [tag, value] : l.scalars()) r.scalars.add(tag, value);
    r.scalars.add("beta_factor", beta);
    r.scalars.add("train/lr", lr_ * rave_lr_factor_at(step, config_.get_float("train.lr_end_factor"), phase_1_duration_));
    r.examples = batch.input.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    double sum = 0.0;
    int64_t count = 0;
    ValidationResult v;
    while (auto batch = val_loader.next()) {
      torch::Tensor x = batch->input.to(device_);
      auto f = model_->forward_train(x);
      const double d = rave::spectral_distance(x, f.y, loss_options_.stft_scales, loss_options_.log_epsilon).item<double>();
      sum += d * static_cast<double>(x.size(0));
      count += x.size(0);
      if (!v.audio.defined()) {
        // Original then reconstruction, half a second of silence between (TensorBoard audio).
        auto original = x[0].to(torch::kCPU);
        auto recon = f.y[0].to(torch::kCPU).clamp(-1.0, 1.0);
        auto gap = torch::zeros({original.size(0), sampling_rate_ / 2});
        v.audio = torch::cat({original, gap, recon}, 1);
        v.sample_rate = sampling_rate_;
      }
    }
    model_->train();
    v.metrics["validation"] = count > 0 ? sum / static_cast<double>(count) : std::nan("");
    return v;
  }

  std::string monitor_metric() const override { return "validation"; }
  bool monitor_higher_is_better() const override { return false; }

  void save(torch::serialize::OutputArchive& a) override {
    torch::serialize::OutputArchive m, g;
    model_->save(m);
    a.write("rave", m);
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
    a.read("rave", m);
    model_->load(m);
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
    s << "RAVE " << options_.version << " (capacity " << options_.capacity << ", latent " << options_.latent_size
      << ", " << options_.n_band << " bands, ratios";
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

  std::string describe() const override {
    return "RAVE " + options_.version + " (" + std::to_string(options_.channels) + " ch, " +
           std::to_string(options_.sampling_rate) + " Hz)";
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> out;
    out.emplace_back("pqmf", model_->pqmf.ptr());
    out.emplace_back("encoder", model_->encoder.ptr());
    out.emplace_back("decoder", model_->decoder);
    if (model_->discriminator) out.emplace_back("discriminator", model_->discriminator);
    return out;
  }

 private:
  Config config_;
  rave::RaveOptions options_;
  rave::RaveLossOptions loss_options_;
  torch::Device device_;
  GradientSync* sync_ = &single_process_sync();
  rave::RaveModel model_{nullptr};
  std::unique_ptr<torch::optim::Adam> gen_opt_, dis_opt_;  // rt::FusedAdam unless train.fused_optimizer = false
  double lr_ = 1e-3;
  int64_t phase_1_duration_ = 0, update_dis_every_ = 4, n_signal_ = 0;
  int64_t channels_ = 1;
  int sampling_rate_ = 44100;
};

}  // namespace

std::unique_ptr<ModelFamily> make_rave_family(const Config& config) { return std::make_unique<RaveFamily>(config); }

}  // namespace rt

#include "families/prior/prior_family.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "config/config.h"
#include "config/run_keys.h"
#include "data/loader.h"
#include "families/prior/prior_checkpoint.h"
#include "families/prior/prior_keys.h"
#include "families/rave/rave_data.h"
#include "families/rave/rave_keys.h"
#include "models/common/summary.h"
#include "models/rave/latent_pca.h"
#include "models/rave/prior.h"
#include "models/rave/rave.h"
#include "training/fused_adam.h"
#include "training/phases.h"
#include "util/enum_names.h"
#include "util/error.h"

namespace rt {
namespace {

// The common [train] keys the prior reads.
struct PriorTrainKeys {
  double lr = 1e-4;
  bool fused_optimizer = true;
};
const OptionsTable<PriorTrainKeys>& prior_train_keys() {
  static const OptionsTable<PriorTrainKeys> table = {
      {&PriorTrainKeys::lr, "train.lr"},
      {&PriorTrainKeys::fused_optimizer, "train.fused_optimizer"},
  };
  return table;
}

// What the prior needs to see the signal its RAVE encodes: the RAVE's own data transforms.
void check_same_signal(const AudioDatasetOptions& prior, const AudioDatasetOptions& rave,
                       const std::string& rave_name) {
  auto differs = [&](const char* key, bool mine, bool its, const char* flag) {
    if (mine == its) return;
    throw Error(std::string(key) + " = " + (mine ? "true" : "false") + ", but the RAVE (model.rave = '" +
                rave_name + "') trained with " + key + " = " + (its ? "true" : "false") +
                ": the prior must see the signal its RAVE encodes (" + (its ? "add " : "drop ") + flag + ")");
  };
  differs("data.derivative", prior.derivative, rave.derivative, "--derivative");
  differs("data.normalize", prior.normalize, rave.normalize, "--normalize");
}

class PriorFamily final : public ModelFamily {
 public:
  explicit PriorFamily(const Config& config)
      : keys_(prior_model_keys().from(config)), train_(prior_train_keys().from(config)) {}

  TrainData make_data(const Config& c) override {
    load_rave();
    const auto& ro = rave_->options();
    // train_prior's max(--n_signal, the prior's min_receptive_field).
    const AudioDatasetOptions data = rave_data_keys().from(c);
    const int64_t n_signal = std::max(data.n_signal, prior_example_samples(options_, ro.compression()));
    check_same_signal(data, rave_data_keys().from(rave_checkpoint_.config), keys_.rave);
    RaveData d = make_rave_data(c, ro, n_signal, /*for_losses=*/false);
    if (d.channels != ro.channels || d.sampling_rate != ro.sampling_rate) {
      throw Error("database '" + run_keys(c).db_path + "' holds " + std::to_string(d.channels) +
                  "-channel audio at " + std::to_string(d.sampling_rate) + " Hz, the RAVE (model.rave = '" +
                  keys_.rave + "') " + std::to_string(ro.channels) + "-channel at " +
                  std::to_string(ro.sampling_rate) +
                  " Hz: train the prior on a database of the RAVE's format (its own, data.db_path = '" +
                  run_keys(rave_checkpoint_.config).db_path + "')");
    }
    n_signal_ = n_signal;
    return std::move(d.data);
  }

  void build(const FamilyContext& context, const TrainData* data) override {
    (void)data;
    device_ = context.device;
    sync_ = context.gradient_sync;
    comm_ = context.comm;
    if (!rave_ && !keys_.rave.empty()) load_rave();
    // --summary without a RAVE: the network alone, at model.prior_latent_size (else 8 dimensions).
    if (!rave_)
      options_ = prior_options(keys_, rave::prior_latent_size(keys_.latent_size > 0 ? keys_.latent_size : 8));
    options_.validate();
    prior_ = rave::VariationalPrior(options_);
    prior_->to(device_);
    if (rave_) rave_->to(device_);
    // RAVE's configure_optimizers: Adam over pre_net, residuals and post_net at train.lr (prior
    // configs: 1e-4), torch's default betas.
    opt_ = make_adam(prior_->parameters(), torch::optim::AdamOptions(train_.lr), train_.fused_optimizer);
  }

  StepResult train_step(const Batch& batch, int64_t step) override {
    (void)step;
    prior_->train();
    torch::Tensor x = batch.input.to(device_, /*non_blocking=*/true);
    torch::Tensor latent;
    rave::PriorLoss l;
    {
      PhaseScope p(Phase::kForward);
      latent = rave::prior_latent(*rave_, x, options_.latent_size);
      l = rave::prior_loss(*prior_, latent);
    }
    {
      PhaseScope p(Phase::kBackward);
      clear_gradients(*opt_);
      backward_with_sync(l.loss, optimizer_parameters(*opt_), *sync_);
    }
    {
      PhaseScope p(Phase::kOptimizer);
      opt_->step();
    }
    StepResult r;
    r.loss = l.loss.detach();
    r.scalars.add("latent_prediction", r.loss);
    r.examples = batch.input.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t step) override {
    (void)step;
    torch::NoGradGuard no_grad;
    prior_->eval();
    double sum = 0.0, count = 0.0;
    torch::Tensor first;
    while (auto batch = val_loader.next()) {
      torch::Tensor x = batch->input.to(device_);
      const auto latent = rave::prior_latent(*rave_, x, options_.latent_size);
      // Each batch's loss is a mean over its (example, dimension, frame) terms, equally many per
      // example: weighted by examples, the sum over batches and ranks is the set's mean.
      sum += rave::prior_loss(*prior_, latent).loss.item<double>() * static_cast<double>(x.size(0));
      count += static_cast<double>(x.size(0));
      if (!first.defined()) first = latent;
    }
    auto totals = torch::tensor({sum, count}, torch::kDouble);
    comm_->all_reduce_sum(totals);
    ValidationResult v;
    v.metrics["validation"] =
        totals[1].item<double>() > 0 ? totals[0].item<double>() / totals[1].item<double>() : std::nan("");
    if (first.defined() && comm_->rank() == 0) generation(first, v);
    prior_->train();
    return v;
  }

  std::string monitor_metric() const override { return "validation"; }
  bool monitor_higher_is_better() const override { return false; }

  void save(torch::serialize::OutputArchive& a) override {
    torch::serialize::OutputArchive m, o;
    prior_->save(m);
    a.write("prior", m);
    a.write("prior_latent_size", c10::IValue(options_.latent_size));
    const rave::LatentPca pca = rave::stored_latent_pca(*rave_);
    a.write("rave_latent_mean", pca.mean.to(torch::kCPU), /*is_buffer=*/true);
    a.write("rave_latent_pca", pca.components.to(torch::kCPU), /*is_buffer=*/true);
    a.write("sampling_rate", c10::IValue(rave_->options().sampling_rate));
    a.write("channels", c10::IValue(rave_->options().channels));
    opt_->save(o);
    a.write("prior_opt", o);
  }

  void load(torch::serialize::InputArchive& a) override {
    torch::Tensor mean, pca;
    a.read("rave_latent_mean", mean, /*is_buffer=*/true);
    a.read("rave_latent_pca", pca, /*is_buffer=*/true);
    check_same_rotation(mean, pca, *rave_, "the checkpoint's prior", "model.rave = '" + keys_.rave + "'");
    torch::serialize::InputArchive m, o;
    a.read("prior", m);
    prior_->load(m);
    a.read("prior_opt", o);
    opt_->load(o);
    prior_->to(device_);
  }

  std::string summary() override {
    if (!prior_) build(FamilyContext{}, nullptr);
    std::ostringstream s;
    s << describe() << "\n\n" << models::module_summary(*prior_, "prior", 3) << "\n";
    s << "prior (trained): " << models::format_count(models::count_parameters(*prior_)) << "\n";
    if (rave_) s << "RAVE (frozen):   " << models::format_count(models::count_parameters(*rave_)) << "\n";
    return s.str();
  }

  std::string describe() const override {
    std::ostringstream s;
    s << "RAVE prior (latent " << options_.latent_size << " × " << options_.resolution << " bins, "
      << options_.n_layers << " layers, " << rave::prior_receptive_field(options_) << " frames seen";
    if (rave_) {
      s << "; frozen RAVE " << enum_name(rave_->options().version) << " of '"
        << rave_checkpoint_.path.string() << "'" << (rave_checkpoint_.ema ? " (moving averages)" : "") << ", "
        << n_signal_ << "-sample examples";
    }
    s << ")";
    return s.str();
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> out;
    out.emplace_back("prior", prior_.ptr());
    if (rave_) out.emplace_back("rave", rave_.ptr());
    return out;
  }

  MemoryHolders memory_holders() override {
    MemoryHolders h{prior_->parameters(), prior_->buffers(), {opt_.get()}};
    if (rave_) {
      for (const auto& p : rave_->parameters()) h.parameters.push_back(p);
      for (const auto& b : rave_->buffers()) h.buffers.push_back(b);
    }
    return h;
  }

 private:
  void load_rave() {
    if (rave_) return;
    rave_checkpoint_ = load_frozen_rave(keys_.rave);
    rave_ = rave_checkpoint_.model;
    options_ = prior_options(keys_, prior_latent_size_over(keys_, *rave_));
  }

  // RAVE's validation_epoch_end: from standard normal noise shaped as the first validation
  // batch's latent, quantised and staggered, the prior draws each next frame from its softmax;
  // the result, unstaggered, decoded by the RAVE, its examples one after another.
  void generation(const torch::Tensor& latent, ValidationResult& v) {
    const auto noise = torch::randn(latent.sizes(), torch::kFloat).to(latent.device(), latent.scalar_type());
    const auto start = rave::quantized_normal_encode(rave::diagonal_shift(noise), options_.resolution);
    const auto one_hot = rave::prior_generate(*prior_, start, /*argmax=*/false);
    const auto z = rave::diagonal_shift_inverse(rave::quantized_normal_decode(one_hot, options_.resolution));
    const auto y = rave_->decode(rave::prior_to_rave_latent(*rave_, z)).to(torch::kCPU, torch::kFloat);
    v.audio = y.permute({1, 0, 2}).reshape({y.size(1), -1}).clamp(-1.0, 1.0);
    v.sample_rate = static_cast<int>(rave_->options().sampling_rate);
    v.audio_tag = "audio/generation";
  }

  PriorModelKeys keys_;
  PriorTrainKeys train_;
  rave::PriorOptions options_;
  RaveCheckpoint rave_checkpoint_;
  rave::RaveModel rave_{nullptr};
  rave::VariationalPrior prior_{nullptr};
  std::unique_ptr<torch::optim::Adam> opt_;
  torch::Device device_{torch::kCPU};
  GradientSync* sync_ = &single_process_sync();
  std::shared_ptr<dist::Communicator> comm_ = std::make_shared<dist::LocalCommunicator>();
  int64_t n_signal_ = 0;
};

}  // namespace

FamilyRegistration prior_family_registration() {
  return {"prior",
          "RAVE's prior: an autoregressive model of a trained RAVE's latent (model.rave), for nn~'s prior "
          "method and generate --prior",
          family_factory<PriorFamily>(), prior_model_keys().specs(), [](const Config& config) {
            const PriorModelKeys k = prior_model_keys().from(config);
            if (k.latent_size > 0) prior_options(k, rave::prior_latent_size(k.latent_size)).validate();
          }};
}

}  // namespace rt

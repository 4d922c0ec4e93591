#include "trainer/ssm_family.h"

#include <cmath>
#include <sstream>

#include "data/data_kind.h"
#include "data/loader.h"
#include "data/neural/neural_dataset.h"
#include "data/split.h"
#include "models/common/summary.h"
#include "models/ssm/decoders.h"
#include "trainer/config.h"
#include "trainer/config_value.h"
#include "trainer/fused_adam.h"
#include "trainer/phases.h"
#include "util/error.h"

namespace rt {

const OptionsTable<ssm::SsmOptions>& ssm_model_keys() {
  using keys::Field;
  using ssm::SsmOptions;
  // Defaults: the SsmOptions initialisers (Melina-Jingting/foundational_ssm, NLB MC_Maze).
  static const OptionsTable<SsmOptions> table = {
      {&SsmOptions::variant, Field("model.variant", "SSM decoder variant").defines_architecture()},
      {&SsmOptions::input_dim,
       Field("model.input_dim", "SSM input channels (neural units)").ge(1).defines_architecture()},
      {&SsmOptions::output_dim,
       Field("model.output_dim", "SSM output channels (behaviour)").ge(1).defines_architecture()},
      {&SsmOptions::d_model, Field("model.d_model", "SSM model width").ge(1).defines_architecture()},
      {&SsmOptions::state_dim,
       Field("model.state_dim", "SSM state size P").ge(2).is_even().defines_architecture()},
      {&SsmOptions::n_layers, Field("model.n_layers", "SSM layers").ge(1).defines_architecture()},
      {&SsmOptions::dropout, Field("model.dropout", "SSM dropout probability").ge(0).lt(1)},
      {&SsmOptions::discretization,
       Field("model.discretization", "SSM discretization").defines_architecture()},
      // An implementation choice: the same function of the same parameters, so a checkpoint
      // resumes under another scan.
      {&SsmOptions::scan, Field("model.scan", "SSM scan implementation (fused: CPU kernel)")},
      // Initialisation ranges of the log step: no part of a trained model's shape.
      {&SsmOptions::dt_min, Field("model.dt_min", "SSM minimum initial time step").gt(0)},
      {&SsmOptions::dt_max, Field("model.dt_max", "SSM maximum initial time step (> dt_min)").gt(0)},
      {&SsmOptions::ssm_blocks,
       Field("model.ssm_blocks", "SSM blocks (block-diagonal HiPPO init)").ge(1).defines_architecture()},
      {&SsmOptions::context_dim,
       Field("model.context_dim", "foundational SSM session context size").ge(0).defines_architecture()},
      {&SsmOptions::conj_sym,
       Field("model.conj_sym", "SSM conjugate symmetry (half the state stored)").defines_architecture()},
  };
  return table;
}

ssm::SsmOptions ssm_options_from(const Config& config) { return ssm_model_keys().from(config); }

double ssm_lr_factor_at(int64_t step, LrSchedule schedule, int64_t warmup, int64_t total) {
  if (warmup > 0 && step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (schedule != LrSchedule::kCosine || total <= warmup) return 1.0;
  const double t = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return 0.5 * (1.0 + std::cos(M_PI * t));
}

namespace {

// R² per output dimension (1 − SS_res/(SS_tot+1e-8)) of predictions against targets, both
// [N, dims]: the reference's metric, computed over every (trial, bin) of the set.
torch::Tensor r2_per_dim(const torch::Tensor& pred, const torch::Tensor& target) {
  auto ss_res = (target - pred).pow(2).sum(0);
  auto ss_tot = (target - target.mean(0)).pow(2).sum(0);
  return 1.0 - ss_res / (ss_tot + 1e-8);
}

class SsmFamily final : public ModelFamily {
 public:
  explicit SsmFamily(const Config& config) : config_(config), options_(ssm_options_from(config)), device_(torch::kCPU) {}

  TrainData make_data(const Config& c) override {
    const std::string db = c.get_string("data.db_path");
    if (db.empty()) throw Error("no dataset: pass --db_path DB (or set data.db_path)");
    if (c.get_enum<DataKind>("data.kind") != DataKind::kNeural) {
      throw Error("model.family = 'ssm' trains on neural databases, but data.kind = '" + c.get_string("data.kind") +
                  "' (accepted: neural)");
    }
    neural::NeuralDatasetOptions o;
    o.smoothing_sigma_ms = c.get_float("data.smoothing_sigma_ms");
    o.pad_to_widest = true;
    dataset_ = std::make_shared<neural::NeuralDataset>(db, o);
    if (c.was_set("model.input_dim") && options_.variant == ssm::SsmVariant::kS5Maze &&
        options_.input_dim != dataset_->max_units()) {
      throw Error("model.input_dim = " + std::to_string(options_.input_dim) + " but database '" + db + "' has " +
                  std::to_string(dataset_->max_units()) + " units; remove the key to take it from the data");
    }
    if (c.was_set("model.output_dim") && options_.output_dim != dataset_->behavior_dims()) {
      throw Error("model.output_dim = " + std::to_string(options_.output_dim) + " but database '" + db + "' has " +
                  std::to_string(dataset_->behavior_dims()) + " behaviour dimensions");
    }
    options_.input_dim = dataset_->max_units();
    options_.output_dim = dataset_->behavior_dims();
    n_groups_ = static_cast<int64_t>(dataset_->group_names().size());

    Split split = split_indices(dataset_->size(), std::max(0.1, c.get_float("data.val_fraction")),
                                static_cast<size_t>(c.get_int("data.val_max")),
                                static_cast<uint64_t>(c.get_int("data.split_seed")));
    if (split.val.empty()) split.val.push_back(split.train.back());
    TrainData d;
    d.train = dataset_;
    d.val = dataset_;
    d.train_indices = split.train;
    d.val_indices = split.val;
    const int64_t batch = c.get_int("train.batch");
    const uint64_t seed = static_cast<uint64_t>(c.get_int("train.seed"));
    auto ds = dataset_;
    auto train_idx = split.train, val_idx = split.val;
    // Every batch from one group, as the reference sampler (multi-session models need it).
    d.train_sampler = [ds, train_idx, batch, seed](uint64_t epoch) {
      return neural::group_batches(*ds, train_idx, batch, epoch, seed, /*drop_last=*/false);
    };
    d.val_sampler = [ds, val_idx, batch, seed](uint64_t) {
      return neural::group_batches(*ds, val_idx, batch, 0, seed, /*drop_last=*/false);
    };
    d.samples_per_example = dataset_->get(0, *std::make_unique<std::mt19937_64>(0)).input.size(0);
    d.sample_unit = "time bins";
    return d;
  }

  void build(const FamilyContext& context, const TrainData* /*data*/) override {
    device_ = context.device;
    sync_ = context.gradient_sync;
    model_ = ssm::make_ssm_model(options_, std::max<int64_t>(1, n_groups_));
    model_->to(device_);
    auto [decay, no_decay] = ssm::split_weight_decay_parameters(*model_);
    lr_ = config_.get_float("train.lr");
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(lr_).weight_decay(config_.get_float("train.weight_decay"))));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(lr_).weight_decay(0.0)));
    opt_ = make_adamw(std::move(groups), config_.get_bool("train.fused_optimizer"));
  }

  StepResult train_step(const Batch& batch, int64_t step) override {
    model_->train();
    torch::Tensor x = batch.input.to(device_, true), y = batch.target.to(device_, true);
    torch::Tensor pred, loss;
    {
      PhaseScope p(Phase::kForward);
      pred = model_->forward(x, batch.group);
    }
    {
      PhaseScope p(Phase::kLoss);
      loss = torch::mse_loss(pred, y);
    }
    {
      PhaseScope p(Phase::kBackward);
      clear_gradients(*opt_);
      backward_with_sync(loss, optimizer_parameters(*opt_), *sync_);
    }
    const double factor =
        ssm_lr_factor_at(step, config_.get_enum<LrSchedule>("train.lr_schedule"),
                         config_.get_int("train.warmup_steps"), config_.get_int("train.max_steps"));
    {
      PhaseScope p(Phase::kOptimizer);
      for (auto& group : opt_->param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_ * factor);
      }
      opt_->step();
    }
    StepResult r;
    r.loss = loss.detach();
    r.scalars.add("train/loss", r.loss);
    r.scalars.add("train/lr", lr_ * factor);
    r.examples = x.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    std::vector<torch::Tensor> preds, targets;
    std::map<int64_t, std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>> by_group;
    double loss_sum = 0.0;
    int64_t n = 0;
    while (auto batch = val_loader.next()) {
      auto x = batch->input.to(device_), y = batch->target.to(device_);
      auto p = model_->forward(x, batch->group);
      loss_sum += torch::mse_loss(p, y).item<double>() * static_cast<double>(x.size(0));
      n += x.size(0);
      auto p2 = p.reshape({-1, p.size(-1)}).to(torch::kCPU), y2 = y.reshape({-1, y.size(-1)}).to(torch::kCPU);
      preds.push_back(p2);
      targets.push_back(y2);
      by_group[batch->group].first.push_back(p2);
      by_group[batch->group].second.push_back(y2);
    }
    model_->train();
    ValidationResult v;
    if (n == 0) return v;
    auto r2 = r2_per_dim(torch::cat(preds), torch::cat(targets));
    v.metrics["val/loss"] = loss_sum / static_cast<double>(n);
    v.metrics["val/r2"] = r2.mean().item<double>();
    for (int64_t d = 0; d < r2.size(0); ++d) v.metrics["val/r2_" + std::to_string(d)] = r2[d].item<double>();
    if (n_groups_ > 1) {
      for (auto& [g, pt] : by_group) {
        auto rg = r2_per_dim(torch::cat(pt.first), torch::cat(pt.second));
        v.metrics["val/r2_group_" + dataset_->group_names().at(static_cast<size_t>(g))] = rg.mean().item<double>();
      }
    }
    return v;
  }

  std::string monitor_metric() const override { return "val/r2"; }
  bool monitor_higher_is_better() const override { return true; }

  void save(torch::serialize::OutputArchive& a) override {
    torch::serialize::OutputArchive m, o;
    model_->save(m);
    a.write("ssm", m);
    opt_->save(o);
    a.write("opt", o);
  }

  void load(torch::serialize::InputArchive& a) override {
    torch::serialize::InputArchive m, o;
    a.read("ssm", m);
    model_->load(m);
    a.read("opt", o);
    opt_->load(o);
    model_->to(device_);
  }

  std::string summary() override {
    if (!model_) build(FamilyContext{}, nullptr);
    std::ostringstream s;
    s << "SSM decoder " << enum_name(options_.variant) << " (input " << options_.input_dim << ", d_model "
      << options_.d_model << ", state " << options_.state_dim << ", " << options_.n_layers
      << " block(s), output " << options_.output_dim << ", " << enum_name(options_.scan) << " scan)\n\n"
      << models::module_summary(*model_, "ssm", 3) << "\n";
    int64_t ssm_params = 0;
    for (const auto& p : model_->named_parameters()) {
      if (ssm::is_ssm_parameter_name(p.key())) ssm_params += p.value().numel();
    }
    s << "SSM parameters (Λ, log-step; no weight decay): " << models::format_count(ssm_params) << "\n"
      << "total: " << models::format_count(models::count_parameters(*model_)) << "\n";
    return s.str();
  }

  std::string describe() const override {
    return "SSM " + std::string(enum_name(options_.variant)) + " (" + std::to_string(options_.input_dim) +
           " units → " + std::to_string(options_.output_dim) + " dims, " + std::to_string(n_groups_) +
           " group(s))";
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> out;
    for (const auto& c : model_->named_children()) out.emplace_back(c.key(), c.value());
    return out;
  }

 private:
  Config config_;
  ssm::SsmOptions options_;
  torch::Device device_;
  GradientSync* sync_ = &single_process_sync();
  std::shared_ptr<neural::NeuralDataset> dataset_;
  std::shared_ptr<ssm::SsmModelImpl> model_;
  std::unique_ptr<torch::optim::AdamW> opt_;  // rt::FusedAdamW unless train.fused_optimizer = false
  double lr_ = 1e-3;
  int64_t n_groups_ = 1;
};

// foundational_ssm: dt_min/dt_max bound the initial log step; checked here with the keys'
// origins, before the options' own cross-field checks.
void check_ssm_config(const Config& c) {
  const double dt_min = c.get_float("model.dt_min"), dt_max = c.get_float("model.dt_max");
  if (!(dt_max > dt_min)) {
    throw Error(c.origin("model.dt_max") + ": model.dt_max = " + value_text(dt_max) +
                " must be greater than model.dt_min = " + value_text(dt_min) + " (" +
                c.origin("model.dt_min") + ")");
  }
  ssm_options_from(c).validate();
}

}  // namespace

FamilyRegistration ssm_family_registration() {
  using namespace keys;
  return {"ssm",
          "S5-style SSM decoders of neural activity (s5_maze, foundational) trained on a neural database",
          family_factory<SsmFamily>(),
          ssm_model_keys().specs({
              F("train.weight_decay", 0.01, "SSM: AdamW weight decay").ge(0),
              E("train.lr_schedule", LrSchedule::kConstant, "SSM: learning rate schedule"),
              I("train.warmup_steps", 0, "SSM: linear learning rate warmup steps").ge(0),
          }),
          check_ssm_config};
}

}  // namespace rt

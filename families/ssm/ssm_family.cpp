#include "families/ssm/ssm_family.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <type_traits>
#include <variant>

#include "config/config.h"
#include "config/config_schema.h"
#include "config/config_value.h"
#include "data/data_kind.h"
#include "data/loader.h"
#include "data/neural/neural_dataset.h"
#include "data/split.h"
#include "distributed/sync_batch_norm.h"
#include "families/common/data_keys.h"
#include "families/ssm/ssm_transfer.h"
#include "models/common/summary.h"
#include "models/ssm/decoders.h"
#include "training/checkpoint.h"
#include "training/fused_adam.h"
#include "training/phases.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/profile_schema.h"

namespace rt {

const OptionsTable<ssm::SsmOptions>& ssm_model_keys() {
  using keys::Field;
  using ssm::SsmOptions;
  // Defaults: the SsmOptions initialisers (Melina-Jingting/foundational_ssm, NLB MC_Maze).
  static const OptionsTable<SsmOptions> table = {
      {&SsmOptions::variant, Field("model.variant", "SSM decoder variant").defines_architecture()},
      {&SsmOptions::kind,
       Field("model.ssm",
             "the SSM layer in each block: s5 (Smith et al. 2023), s4d (Gu et al. 2022, S4D-Lin), lru "
             "(Orvieto et al. 2023), as foundational_ssm compares them")
           .defines_architecture()},
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

const OptionsTable<SsmTrainOptions>& ssm_train_keys() {
  using keys::Field;
  using T = SsmTrainOptions;
  static const OptionsTable<T> table = {
      {&T::weight_decay, Field("train.weight_decay", "SSM: AdamW weight decay").ge(0)},
      {&T::lr_schedule, Field("train.lr_schedule", "SSM: learning rate schedule")},
      {&T::warmup_steps, Field("train.warmup_steps", "SSM: linear learning rate warmup steps").ge(0)},
      {&T::init_from,
       Field("train.init_from",
             "SSM: start from a pretrained model, a run directory (its best.ckpt, else last.ckpt) or a "
             "checkpoint: its SSM blocks and decoder are copied where their shapes carry over, the read-in "
             "and session context are made anew for this database (foundational_ssm's transfer)")
           .cli("init_from")},
      {&T::transfer_mode,
       Field("train.transfer_mode",
             "SSM: what trains (foundational_ssm's optimizer.mode): all; freeze_a (the SSMs' A and log steps "
             "frozen); encoder_only (only the read-in and session context train)")},
      {&T::max_train_trials,
       Field("data.max_train_trials",
             "SSM: train on the first N training trials of each session (few-shot transfer, data-efficiency "
             "curves); 0 = all")
           .ge(0)
           .cli("max_train_trials")},
      {&T::lr, "train.lr"},
      {&T::max_steps, "train.max_steps"},
      {&T::seed, "train.seed"},
      {&T::fused_optimizer, "train.fused_optimizer"},
      {&T::ckpt, "train.ckpt"},
      {&T::batch_norm, "train.distributed.batch_norm"},
  };
  return table;
}

const OptionsTable<neural::NeuralDatasetOptions>& ssm_data_keys() {
  static const OptionsTable<neural::NeuralDatasetOptions> table = {
      {&neural::NeuralDatasetOptions::smoothing_sigma_ms, "data.smoothing_sigma_ms"},
      {&neural::NeuralDatasetOptions::example_cache_mb,
       keys::Field("data.example_cache_mb",
                   "SSM: keep each example once prepared (decoded, smoothed, padded), up to this many MiB in "
                   "all, so later epochs read it from memory; 0 = prepare every read")
           .ge(0)},
  };
  return table;
}

double ssm_lr_factor_at(int64_t step, LrSchedule schedule, int64_t warmup, int64_t total) {
  if (warmup > 0 && step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (schedule != LrSchedule::kCosine || total <= warmup) return 1.0;
  const double t = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return 0.5 * (1.0 + std::cos(M_PI * t));
}

namespace {

// R² per output dimension (1 − SS_res/(SS_tot+1e-8)) of predictions against targets, both
// [N, dims]: the reference's metric, computed over every (trial, bin) of the set.
// R² per output dimension from sufficient statistics: per dim, Σy, Σy², Σ(y − ŷ)² and the row
// count n (float64), so that a data-parallel job sums them over ranks and gets the exact global
// value: R² = 1 − SS_res / SS_tot, SS_tot = Σy² − (Σy)²/n.
struct R2Sums {
  torch::Tensor sum_y, sum_y2, ss_res;  // [D] float64
  double rows = 0;
};

torch::Tensor r2_from_sums(const R2Sums& s) {
  auto ss_tot = s.sum_y2 - s.sum_y * s.sum_y / std::max(1.0, s.rows);
  return 1.0 - s.ss_res / (ss_tot + 1e-8);
}

// The database's session names, stored in the checkpoint as one byte tensor ("a\nb\nc"), and
// their unit counts (int64, one per session, in the same order).
constexpr const char* kGroupNamesKey = "ssm_group_names";
constexpr const char* kGroupUnitsKey = "ssm_group_units";

torch::Tensor group_names_tensor(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : "\n") + n;
  auto t = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  std::copy(text.begin(), text.end(), reinterpret_cast<char*>(t.data_ptr<uint8_t>()));
  return t;
}

std::vector<std::string> group_names_of(const torch::Tensor& t) {
  const auto bytes = t.contiguous().to(torch::kUInt8);
  const std::string text(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                         static_cast<size_t>(bytes.numel()));
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) names.push_back(line);
  return names;
}

std::string group_names_text(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + printable(n);
  return "[" + text + "]";
}

class SsmFamily final : public ModelFamily {
 public:
  explicit SsmFamily(const Config& config)
      : options_(ssm_options_from(config)), train_(ssm_train_keys().from(config)), device_(torch::kCPU) {}

  TrainData make_data(const Config& c) override {
    const DataSourceOptions source = data_source_for(c, DataKind::kNeural, "ssm");
    const std::string& db = source.db_path;
    db_path_ = db;
    neural::NeuralDatasetOptions o = ssm_data_keys().from(c);
    o.pad_to_widest = true;
    dataset_ = std::make_shared<neural::NeuralDataset>(db, o);
    if (c.was_set("model.input_dim") && options_.variant == ssm::SsmVariant::kS5Maze &&
        options_.input_dim != dataset_->max_units()) {
      throw Error("model.input_dim = " + std::to_string(options_.input_dim) + " but database '" + db +
                  "' has " + std::to_string(dataset_->max_units()) +
                  " units; remove the key to take it from the data");
    }
    if (c.was_set("model.output_dim") && options_.output_dim != dataset_->behavior_dims()) {
      throw Error("model.output_dim = " + std::to_string(options_.output_dim) + " but database '" + db +
                  "' has " + std::to_string(dataset_->behavior_dims()) + " behaviour dimensions");
    }
    if (dataset_->behavior_dims() < 1) {
      throw Error("database '" + db + "' holds no behaviour to decode (0 behaviour dimensions)");
    }
    options_.input_dim = dataset_->max_units();
    options_.output_dim = dataset_->behavior_dims();
    n_groups_ = static_cast<int64_t>(dataset_->group_names().size());

    Split split =
        split_indices(dataset_->size(), std::max(0.1, source.val_fraction),
                      static_cast<size_t>(source.val_max), static_cast<uint64_t>(source.split_seed));
    if (split.val.empty()) split.val.push_back(split.train.back());
    if (const int64_t n = train_.max_train_trials; n > 0) keep_first_trials(split.train, n, db);
    TrainData d;
    d.train = dataset_;
    d.val = dataset_;
    d.train_indices = split.train;
    d.val_indices = split.val;
    const uint64_t seed = static_cast<uint64_t>(train_.seed);
    auto ds = dataset_;
    auto train_idx = split.train, val_idx = split.val;
    // Every batch from one group, as the reference sampler (multi-session models need it).
    d.train_sampler = [ds, train_idx, seed](uint64_t epoch, int64_t batch) {
      return neural::group_batches(*ds, train_idx, batch, epoch, seed, /*drop_last=*/false);
    };
    d.sampler_over = [ds, seed](std::vector<size_t> indices) -> TrainData::Sampler {
      return [ds, indices, seed](uint64_t, int64_t batch) {
        return neural::group_batches(*ds, indices, batch, 0, seed, /*drop_last=*/false);
      };
    };
    d.val_sampler = d.sampler_over(val_idx);
    d.group_names = dataset_->group_names();
    d.samples_per_example = dataset_->get(0, *std::make_unique<std::mt19937_64>(0)).input.size(0);
    // The multi-session decoder normalises with batch statistics in eval too (SsmModelImpl):
    // its validation batches must be the single-process ones on every rank.
    shard_validation_ = options_.variant != ssm::SsmVariant::kFoundational;
    d.shard_validation = shard_validation_;
    d.sample_unit = "time bins";
    return d;
  }

  void build(const FamilyContext& context, const TrainData* /*data*/) override {
    device_ = context.device;
    sync_ = context.gradient_sync;
    comm_ = context.comm;
    model_ = ssm::make_ssm_model(options_, std::max<int64_t>(1, n_groups_));
    model_->to(device_);
    transfer(context);
    // train.distributed.batch_norm = sync: SyncBatchNorm semantics in a data-parallel job, batch
    // statistics over every rank's rows, so N ranks × B train as one process with N·B
    // (distributed/sync_batch_norm.h); local: each rank its own rows, running statistics
    // broadcast from rank 0 before validation.
    local_batch_norm_ = train_.batch_norm == "local";
    if (comm_->world_size() > 1 && !local_batch_norm_) model_->set_batch_norm_sync(comm_);
    auto [decay, no_decay] = ssm::split_weight_decay_parameters(*model_);
    // Frozen parameters (train.transfer_mode) are in no group: they stay as they are.
    for (auto* group : {&decay, &no_decay}) {
      group->erase(std::remove_if(group->begin(), group->end(),
                                  [](const torch::Tensor& t) { return !t.requires_grad(); }),
                   group->end());
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(train_.lr).weight_decay(train_.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(train_.lr).weight_decay(0.0)));
    opt_ = make_adamw(std::move(groups), train_.fused_optimizer);
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
    const double factor = ssm_lr_factor_at(step, train_.lr_schedule, train_.warmup_steps, train_.max_steps);
    {
      PhaseScope p(Phase::kOptimizer);
      for (auto& group : opt_->param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(train_.lr * factor);
      }
      opt_->step();
    }
    StepResult r;
    r.loss = loss.detach();
    r.scalars.add("train/loss", r.loss);
    r.scalars.add("train/lr", train_.lr * factor);
    r.examples = x.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    if (local_batch_norm_) dist::broadcast_buffers(*comm_, *model_);
    model_->eval();
    // Per group g: [Σy (D), Σy² (D), Σ(y−ŷ)² (D), rows] then [Σ loss·examples, examples], float64,
    // summed over ranks in one all-reduce.
    const int64_t D = options_.output_dim, G = std::max<int64_t>(1, n_groups_), per_group = 3 * D + 1;
    auto sums = torch::zeros({G * per_group + 2}, torch::kDouble);
    while (auto batch = val_loader.next()) {
      auto x = batch->input.to(device_), y = batch->target.to(device_);
      auto p = model_->forward(x, batch->group);
      auto p2 = p.reshape({-1, p.size(-1)}).to(torch::kCPU, torch::kDouble);
      auto y2 = y.reshape({-1, y.size(-1)}).to(torch::kCPU, torch::kDouble);
      auto g = sums.narrow(0, batch->group * per_group, per_group);
      g.narrow(0, 0, D) += y2.sum(0);
      g.narrow(0, D, D) += (y2 * y2).sum(0);
      g.narrow(0, 2 * D, D) += (y2 - p2).pow(2).sum(0);
      g[3 * D] += static_cast<double>(y2.size(0));
      sums[G * per_group] +=
          torch::mse_loss(p, y).to(torch::kCPU, torch::kDouble) * static_cast<double>(x.size(0));
      sums[G * per_group + 1] += static_cast<double>(x.size(0));
    }
    model_->train();
    if (shard_validation_) comm_->all_reduce_sum(sums);  // else every rank saw every example
    ValidationResult v;
    const double n = sums[G * per_group + 1].item<double>();
    if (n == 0) return v;
    auto group_sums = [&](int64_t g) {
      auto t = sums.narrow(0, g * per_group, per_group);
      return R2Sums{t.narrow(0, 0, D), t.narrow(0, D, D), t.narrow(0, 2 * D, D), t[3 * D].item<double>()};
    };
    R2Sums total{torch::zeros({D}, torch::kDouble), torch::zeros({D}, torch::kDouble),
                 torch::zeros({D}, torch::kDouble), 0.0};
    for (int64_t g = 0; g < G; ++g) {
      R2Sums s = group_sums(g);
      total.sum_y += s.sum_y;
      total.sum_y2 += s.sum_y2;
      total.ss_res += s.ss_res;
      total.rows += s.rows;
    }
    auto r2 = r2_from_sums(total);
    v.metrics["val/loss"] = sums[G * per_group].item<double>() / n;
    v.metrics["val/r2"] = r2.mean().item<double>();
    for (int64_t d = 0; d < r2.size(0); ++d) v.metrics["val/r2_" + std::to_string(d)] = r2[d].item<double>();
    if (n_groups_ > 1) {
      for (int64_t g = 0; g < G; ++g) {
        R2Sums s = group_sums(g);
        if (s.rows == 0) continue;  // a group without validation examples
        v.metrics[profile_schema::summary::kSessionR2Prefix +
                  dataset_->group_names().at(static_cast<size_t>(g))] = r2_from_sums(s).mean().item<double>();
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
    a.write(kGroupNamesKey, group_names_tensor(dataset_->group_names()), /*is_buffer=*/true);
    a.write(kGroupUnitsKey, torch::tensor(dataset_->group_units(), torch::kInt64), /*is_buffer=*/true);
  }

  void load(torch::serialize::InputArchive& a) override {
    torch::serialize::InputArchive m, o;
    a.read("ssm", m);
    model_->load(m);
    a.read("opt", o);
    opt_->load(o);
    model_->to(device_);
    // Each session has its own read-in: the database must hold the sessions the checkpoint was
    // trained on, in the same order (checkpoints written before the key existed are not checked).
    torch::Tensor names;
    if (a.try_read(kGroupNamesKey, names)) {
      const std::vector<std::string> there = group_names_of(names), here = dataset_->group_names();
      if (there != here) {
        throw Error("the checkpoint was trained on the session(s) " + group_names_text(there) +
                    ", but database '" + db_path_ + "' holds " + group_names_text(here) +
                    ": each session has its own read-in, so the model decodes the sessions it was trained "
                    "on, in that order (a new session takes a transfer: train --init_from CKPT)");
      }
    }
    // The same sessions with other unit counts (a session re-recorded, a database rebuilt): a
    // read-in padded to the widest session keeps its shape, so the weights load, but each unit
    // column means another neuron. Checkpoints written before the key existed are not checked.
    torch::Tensor units;
    if (a.try_read(kGroupUnitsKey, units)) check_group_units(units);
  }

  void check_group_units(const torch::Tensor& units) const {
    const auto t = units.to(torch::kCPU, torch::kInt64).contiguous();
    const std::vector<int64_t> there(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    const std::vector<int64_t>& here = dataset_->group_units();
    const auto& names = dataset_->group_names();
    std::string differ;
    for (size_t g = 0; g < names.size(); ++g) {
      const int64_t was = g < there.size() ? there[g] : -1;
      if (g >= there.size() || was != here[g]) {
        differ += (differ.empty() ? "" : ", ") + printable(names[g]) + ": " +
                  (was < 0 ? std::string("none recorded") : std::to_string(was)) + " → " +
                  std::to_string(here[g]);
      }
    }
    if (!differ.empty() || there.size() != here.size()) {
      throw Error("the checkpoint's sessions have other unit counts in database '" + db_path_ + "' (" +
                  (differ.empty() ? std::to_string(there.size()) + " recorded for " +
                                        std::to_string(here.size()) + " sessions"
                                  : differ) +
                  " units): each unit is one input column of its session's read-in, so the model "
                  "decodes only the recordings it was trained on (other units take a transfer: train "
                  "--init_from CKPT)");
    }
  }

  std::string summary() override {
    if (!model_) build(FamilyContext{}, nullptr);
    std::ostringstream s;
    s << "SSM decoder " << enum_name(options_.variant) << ", " << enum_name(options_.kind)
      << " layers (input " << options_.input_dim << ", d_model " << options_.d_model << ", state "
      << options_.state_dim << ", " << options_.n_layers << " block(s), output " << options_.output_dim
      << ", " << enum_name(options_.scan) << " scan)\n\n"
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
    return "SSM " + std::string(enum_name(options_.variant)) + " (" + enum_name(options_.kind) + ", " +
           std::to_string(options_.input_dim) + " units → " + std::to_string(options_.output_dim) +
           " dims, " + std::to_string(n_groups_) + " group(s))";
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> out;
    for (const auto& c : model_->named_children()) out.emplace_back(c.key(), c.value());
    return out;
  }

  MemoryHolders memory_holders() override { return {model_->parameters(), model_->buffers(), {opt_.get()}}; }

 private:
  // data.max_train_trials: the first `n` training trials of each group, in database order (the
  // split's validation trials stay held out as they are).
  void keep_first_trials(std::vector<size_t>& train, int64_t n, const std::string& db) const {
    std::sort(train.begin(), train.end());
    std::map<int64_t, int64_t> kept;
    std::vector<size_t> out;
    for (size_t i : train) {
      if (kept[dataset_->group_of(i)]++ < n) out.push_back(i);
    }
    std::cout << "data.max_train_trials = " << n << ": training on " << out.size() << " of the "
              << train.size() << " training trials of '" << db << "' (the first " << n << " of each of "
              << kept.size() << " group(s))" << std::endl;
    train = std::move(out);
  }

  // train.init_from (a fresh run only: a resumed one holds the transferred model already) and
  // train.transfer_mode (every run: what trains).
  void transfer(const FamilyContext& context) {
    const bool chatty = context.comm->rank() == 0;
    if (!train_.init_from.empty() && train_.ckpt.empty()) {
      const TransferReport r = transfer_pretrained_ssm(
          resolve_run_or_checkpoint(train_.init_from, "train.init_from"), *model_, options_);
      if (chatty) std::cout << r.text() << std::flush;
    }
    const TransferMode mode = train_.transfer_mode;
    int64_t frozen = 0, tensors = 0;
    for (auto& p : model_->named_parameters()) {
      if (trains_in_transfer_mode(p.key(), mode)) continue;
      p.value().set_requires_grad(false);
      frozen += p.value().numel();
      ++tensors;
    }
    if (chatty && mode != TransferMode::kAll) {
      std::cout << "train.transfer_mode = " << enum_name(mode) << ": " << tensors << " tensors ("
                << models::format_count(frozen) << " parameters) frozen, "
                << models::format_count(models::count_parameters(*model_) - frozen) << " train" << std::endl;
    }
  }

  ssm::SsmOptions options_;
  SsmTrainOptions train_;
  std::string db_path_;  // make_data's database
  torch::Device device_;
  GradientSync* sync_ = &single_process_sync();
  std::shared_ptr<dist::Communicator> comm_ = std::make_shared<dist::LocalCommunicator>();
  std::shared_ptr<neural::NeuralDataset> dataset_;
  std::shared_ptr<ssm::SsmModelImpl> model_;
  std::unique_ptr<torch::optim::AdamW> opt_;  // rt::FusedAdamW unless train.fused_optimizer = false
  int64_t n_groups_ = 1;
  bool shard_validation_ = true;
  bool local_batch_norm_ = false;  // train.distributed.batch_norm = local
};

// foundational_ssm: dt_min/dt_max bound the initial log step; checked here with the keys'
// origins, before the options' own cross-field checks.
void check_ssm_config(const Config& c) {
  // Keys of audio data mean nothing to a decoder trained on whole trials of a neural database:
  // set to another value than their default, they are refused, on a fresh run and on a resume
  // alike (a config.toml written by a run holds them at their defaults and stays accepted).
  for (const char* key :
       {"data.n_signal", "data.channels", "data.phase_mangle", "data.phase_mangle_p", "data.dequantize"}) {
    if (!c.was_set(key) || c.holds_default(key)) continue;
    throw Error(
        c.origin(key) + ": " + key + " does not apply to model.family = ssm: an SSM decoder trains on " +
        "whole trials of a neural database, and " + key + " is a setting of audio data (RAVE); remove it");
  }
  const ssm::SsmOptions o = ssm_options_from(c);
  const double dt_min = o.dt_min, dt_max = o.dt_max;
  if (!(dt_max > dt_min)) {
    throw Error(c.origin("model.dt_max") + ": model.dt_max = " + value_text(dt_max) +
                " must be greater than model.dt_min = " + value_text(dt_min) + " (" +
                c.origin("model.dt_min") + ")");
  }
  o.validate();
}

}  // namespace

FamilyRegistration ssm_family_registration() {
  using namespace keys;
  return {"ssm",
          "S5-style SSM decoders of neural activity (s5_maze, foundational) trained on a neural database",
          family_factory<SsmFamily>(),
          concat_specs({ssm_model_keys().specs(), ssm_train_keys().specs(), ssm_data_keys().specs()}),
          check_ssm_config};
}

}  // namespace rt

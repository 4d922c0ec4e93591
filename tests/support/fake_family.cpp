#include "support/fake_family.h"

#include <cmath>
#include <memory>
#include <sstream>
#include <utility>

#include "config/config.h"
#include "config/family_registry.h"
#include "data/loader.h"
#include "distributed/gradient_sync.h"
#include "families/builtin.h"
#include "models/common/summary.h"
#include "training/fused_adam.h"
#include "training/model_family.h"
#include "training/phases.h"

namespace rt::testing {
namespace {

constexpr size_t kExamples = 40, kValExamples = 8;

std::function<void(int64_t)>& step_hook() {
  static std::function<void(int64_t)> hook;
  return hook;
}

// Example i: x_k = sin(0.37·(i+1)·(k+1)), y = Σ_k x_k / (k+1): a linear target, computed
// without any random generator so that workers may call it concurrently.
class FakeSource final : public ExampleSource {
 public:
  explicit FakeSource(int64_t width) : width_(width) {}
  size_t size() const override { return kExamples; }
  Example get(size_t index, std::mt19937_64& /*rng*/) const override {
    Example e;
    e.input = torch::empty({width_});
    auto x = e.input.accessor<float, 1>();
    float y = 0.0f;
    for (int64_t k = 0; k < width_; ++k) {
      x[k] = std::sin(0.37f * static_cast<float>((index + 1) * static_cast<size_t>(k + 1)));
      y += x[k] / static_cast<float>(k + 1);
    }
    e.target = torch::full({1}, y);
    return e;
  }

 private:
  int64_t width_;
};

class FakeFamily final : public ModelFamily {
 public:
  explicit FakeFamily(const Config& config)
      : options_(fake_model_keys().from(config)), lr_(config.get_float("train.lr")) {}

  TrainData make_data(const Config& /*config*/) override {
    TrainData d;
    d.train = d.val = std::make_shared<FakeSource>(options_.width);
    for (size_t i = 0; i < kExamples; ++i)
      (i < kExamples - kValExamples ? d.train_indices : d.val_indices).push_back(i);
    d.sample_unit = "examples";
    return d;
  }

  void build(const FamilyContext& context, const TrainData* /*data*/) override {
    device_ = context.device;
    sync_ = context.gradient_sync;
    linear_ = torch::nn::Linear(options_.width, 1);
    linear_->to(device_);
    opt_ = std::make_unique<torch::optim::SGD>(linear_->parameters(), torch::optim::SGDOptions(lr_));
  }

  StepResult train_step(const Batch& batch, int64_t step) override {
    if (step_hook()) step_hook()(step);
    torch::Tensor x = batch.input.to(device_), y = batch.target.to(device_), pred, loss;
    {
      PhaseScope p(Phase::kForward);
      pred = linear_->forward(x);
    }
    {
      PhaseScope p(Phase::kLoss);
      loss = torch::mse_loss(pred, y);
    }
    {
      PhaseScope p(Phase::kBackward);
      opt_->zero_grad();
      backward_with_sync(loss, optimizer_parameters(*opt_), *sync_);
    }
    {
      PhaseScope p(Phase::kOptimizer);
      opt_->step();
    }
    StepResult r;
    r.loss = loss.detach();
    r.scalars.add("train/loss", r.loss);
    r.examples = x.size(0);
    return r;
  }

  ValidationResult validate(Loader& val_loader, int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    double sum = 0.0;
    int64_t n = 0;
    while (auto batch = val_loader.next()) {
      auto x = batch->input.to(device_), y = batch->target.to(device_);
      sum += torch::mse_loss(linear_->forward(x), y).item<double>() * static_cast<double>(x.size(0));
      n += x.size(0);
    }
    ValidationResult v;
    v.metrics["val/loss"] = n > 0 ? sum / static_cast<double>(n) : std::nan("");
    return v;
  }

  std::string monitor_metric() const override { return "val/loss"; }
  bool monitor_higher_is_better() const override { return false; }

  // Plain SGD keeps no state: the layer's parameters are all there is to resume.
  void save(torch::serialize::OutputArchive& a) override { linear_->save(a); }

  void load(torch::serialize::InputArchive& a) override {
    linear_->load(a);
    linear_->to(device_);
  }

  std::string summary() override {
    if (!linear_) build(FamilyContext{}, nullptr);
    return "fake linear (width " + std::to_string(options_.width) + ")\n\n" +
           models::module_summary(*linear_, "linear", 1) + "\n";
  }

  std::string describe() const override {
    return "fake linear (width " + std::to_string(options_.width) + ")";
  }

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() override {
    return {{"linear", linear_.ptr()}};
  }

  MemoryHolders memory_holders() override {
    return {linear_->parameters(), linear_->buffers(), {opt_.get()}};
  }

 private:
  FakeOptions options_;
  double lr_;
  torch::Device device_{torch::kCPU};
  GradientSync* sync_ = &single_process_sync();
  torch::nn::Linear linear_{nullptr};
  std::unique_ptr<torch::optim::SGD> opt_;
};

// The one call that makes the family known to every test of the binary. It runs before main():
// the built-ins register first, as they come first in every program.
const bool kRegistered =
    (register_builtin_model_families(), register_model_family(fake_family_registration()), true);

}  // namespace

void set_fake_step_hook(std::function<void(int64_t)> hook) { step_hook() = std::move(hook); }

const OptionsTable<FakeOptions>& fake_model_keys() {
  static const OptionsTable<FakeOptions> table = {
      {&FakeOptions::width, keys::Field("model.fake_width", "fake: input features of the linear layer")
                                .ge(1)
                                .le(64)
                                .defines_architecture()},
  };
  return table;
}

Config fake_run_config(const std::filesystem::path& out_path, const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& overrides) {
  Config c;
  c.merge_toml_string(std::string("[model]\nfamily = \"") + kFakeFamily + "\"\n", "fake.toml");
  std::vector<std::pair<std::string, std::string>> settings = {{"train.out_path", out_path.string()},
                                                               {"train.name", name},
                                                               {"train.max_steps", "6"},
                                                               {"train.batch", "4"},
                                                               {"train.val_every", "3"},
                                                               {"train.log_every", "2"},
                                                               {"train.lr", "0.1"},
                                                               {"train.threads", "1"},
                                                               {"train.device", "cpu"},
                                                               {"data.workers", "0"}};
  settings.insert(settings.end(), overrides.begin(), overrides.end());
  for (const auto& [key, value] : settings) c.set(key, value, "test");
  c.finalize();
  return c;
}

FamilyRegistration fake_family_registration() {
  return {kFakeFamily,
          "a linear layer on synthetic in-memory data (tests only)",
          family_factory<FakeFamily>(),
          fake_model_keys().specs(),
          {}};
}

}  // namespace rt::testing

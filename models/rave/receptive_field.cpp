#include "models/rave/receptive_field.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "models/rave/rave.h"
#include "util/error.h"

namespace rt::rave {

namespace {

// Restores the model's mode and warm-up state however measure_receptive_field leaves.
// Recurrent layers (hybrid.gin's GRU) are switched off for the measurement, as RAVE's
// get_rave_receptive_field disables every module with a `gru_state`: a GRU makes every output
// depend on the whole past.
struct ModelStateGuard {
  RaveModelImpl& model;
  bool training, warmed_up;
  std::vector<GruLayerImpl*> grus;
  explicit ModelStateGuard(RaveModelImpl& m) : model(m), training(m.is_training()), warmed_up(m.warmed_up()) {
    for (const auto& module : m.modules()) {
      if (auto* gru = module->as<GruLayerImpl>()) {
        grus.push_back(gru);
        gru->set_enabled(false);
      }
    }
  }
  ~ModelStateGuard() {
    model.train(training);
    model.set_warmed_up(warmed_up);
    for (auto* gru : grus) gru->set_enabled(true);
  }
};

}  // namespace

ReceptiveField measure_receptive_field(RaveModelImpl& model) {
  ModelStateGuard restore(model);
  model.eval();
  model.set_warmed_up(false);
  torch::AutoGradMode grad_mode(true);
  const auto params = model.parameters();
  const auto options = params.empty() ? torch::TensorOptions() : params.front().options();
  auto generator = at::detail::createCPUGenerator(0x7265636570ULL);
  const auto cpu = options.device(torch::kCPU).requires_grad(false);
  constexpr int64_t kMaxLength = int64_t{1} << 24;
  for (int64_t n = int64_t{1} << 15; n <= kMaxLength; n *= 2) {
    auto x = torch::randn({1, model.options().channels, n}, generator, cpu)
                 .to(options.device())
                 .requires_grad_(true);
    const auto stats = model.encode_stats(x);
    // The latent the decoder gets; its draws never reach x's gradient. The wasserstein latent
    // skips reparametrize (its MMD over every pair of frames is not needed) and takes zero noise
    // channels; so does the discrete one (its quantiser works frame by frame, and in eval mode
    // passes no gradient: RAVE measures before the quantiser is enabled).
    torch::Tensor z;
    const auto kind = model.encoder->kind;
    if (kind == EncoderKind::kWasserstein || kind == EncoderKind::kDiscrete) {
      z = torch::cat({stats, torch::zeros({stats.size(0), model.encoder->noise_augmentation, stats.size(2)},
                                          stats.options())},
                     1);
    } else if (kind == EncoderKind::kVariational) {
      const auto noise = torch::randn(stats.chunk(2, 1)[0].sizes(), generator, cpu).to(options.device());
      z = model.encoder->reparametrize(stats, noise).first;
    } else {
      z = model.encoder->reparametrize(stats).first;
    }
    const auto y = model.decode(z);
    const auto grad =
        torch::autograd::grad({y.select(0, 0).select(0, 0).select(0, n / 2)}, {x})[0].reshape(-1).cpu();
    const auto halves = grad.chunk(2, 0);
    if (halves[0][0].item<double>() == 0.0 && halves[1][-1].item<double>() == 0.0) {
      return {halves[0].ne(0).sum().item<int64_t>(), halves[1].ne(0).sum().item<int64_t>()};
    }
  }
  throw Error("RAVE's receptive field spans more than " + std::to_string(kMaxLength) +
              " samples: the model's configuration (model.ratios, model.dilations, model.kernel_size) "
              "makes every output depend on the whole input");
}

int64_t valid_signal_length(int64_t length, int64_t dim, ReceptiveField field) {
  return std::max<int64_t>(0, length - field.left / dim - (field.right + dim - 1) / dim);
}

torch::Tensor valid_signal_crop(const torch::Tensor& x, ReceptiveField field) {
  const int64_t dim = x.size(1), length = x.size(-1);
  const int64_t begin = std::min(field.left / dim, length);
  return x.narrow(-1, begin, valid_signal_length(length, dim, field));
}

}  // namespace rt::rave

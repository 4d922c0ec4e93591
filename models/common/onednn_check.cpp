#include "models/common/onednn_check.h"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace rt::models {

namespace {

constexpr double kTolerance = 1e-3;  // float32 rounding of these sums is below 1e-6

// A deterministic, non-periodic fill: no random numbers are drawn, so a model's initialisation
// does not depend on whether the check ran.
torch::Tensor fill(at::IntArrayRef shape, double phase) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  auto i = torch::arange(n, torch::kFloat64);
  return (torch::sin(i * 0.7311 + phase) + 0.5 * torch::cos(i * 0.1379 + 2 * phase)).reshape(shape);
}

struct Probe {
  const char* name;
  std::vector<int64_t> input, weight;
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> conv;
};

struct Gradients {
  torch::Tensor output, input, weight;
};

Gradients run(const Probe& p, torch::Dtype dtype) {
  auto x = fill(p.input, 0.3).to(dtype).requires_grad_();
  auto w = fill(p.weight, 1.1).to(dtype).requires_grad_();
  auto y = p.conv(x, w);
  y.backward(fill(y.sizes(), 2.3).to(dtype));
  return {y.detach().to(torch::kFloat64), x.grad().to(torch::kFloat64), w.grad().to(torch::kFloat64)};
}

double rel_error(const torch::Tensor& got, const torch::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  const auto diff = (got - ref).abs().max().item<double>();
  if (!std::isfinite(diff)) return std::numeric_limits<double>::infinity();
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

OneDnnConvolutionCheck measure_onednn_convolutions() {
  OneDnnConvolutionCheck r;
  auto& ctx = at::globalContext();
  if (!at::hasMKLDNN() || !ctx.userEnabledMkldnn()) return r;
  c10::InferenceMode not_inference(false);
  torch::AutoGradMode grad_on(true);
  const std::vector<Probe> probes = {
      {"conv1d 4→8 channels, kernel 7, padding 3",
       {2, 4, 128},
       {8, 4, 7},
       [](const torch::Tensor& x, const torch::Tensor& w) { return torch::conv1d(x, w, {}, 1, 3); }},
      {"conv1d 8→8 channels, kernel 3, padding 1",
       {2, 8, 64},
       {8, 8, 3},
       [](const torch::Tensor& x, const torch::Tensor& w) { return torch::conv1d(x, w, {}, 1, 1); }},
      {"conv1d 4→8 channels, kernel 7, no padding",
       {2, 4, 128},
       {8, 4, 7},
       [](const torch::Tensor& x, const torch::Tensor& w) { return torch::conv1d(x, w); }},
      {"conv2d 4→8 channels, kernel 3×3, padding 1",
       {2, 4, 16, 16},
       {8, 4, 3, 3},
       [](const torch::Tensor& x, const torch::Tensor& w) { return torch::conv2d(x, w, {}, 1, 1); }},
  };
  r.ran = true;
  for (const auto& p : probes) {
    const auto got = run(p, torch::kFloat32);
    ctx.setUserEnabledMkldnn(false);
    Gradients ref;
    try {
      ref = run(p, torch::kFloat64);
    } catch (...) {
      ctx.setUserEnabledMkldnn(true);
      throw;
    }
    ctx.setUserEnabledMkldnn(true);
    const std::pair<const char*, double> errors[] = {{"output", rel_error(got.output, ref.output)},
                                                     {"input gradient", rel_error(got.input, ref.input)},
                                                     {"weight gradient", rel_error(got.weight, ref.weight)}};
    for (const auto& [what, e] : errors) {
      if (r.worst.empty() || e > r.max_rel_error) {
        r.max_rel_error = e;
        r.worst = std::string(p.name) + ": " + what;
      }
    }
  }
  return r;
}

const OneDnnConvolutionCheck& ensure_correct_cpu_convolutions() {
  static OneDnnConvolutionCheck result;
  static std::once_flag once;
  std::call_once(once, [] {
    result = measure_onednn_convolutions();
    if (result.ran && !(result.max_rel_error <= kTolerance)) {
      at::globalContext().setUserEnabledMkldnn(false);
      result.disabled = true;
      std::fprintf(stderr,
                   "warning: this LibTorch's oneDNN (MKL-DNN) computes wrong float32 convolution "
                   "gradients on this CPU (%s off by %.3g of its largest value); oneDNN is turned "
                   "off for this process and ATen's own convolution kernels are used instead\n",
                   result.worst.c_str(), result.max_rel_error);
    }
  });
  return result;
}

}  // namespace rt::models

#include "trainer/precision.h"

#include <ATen/autocast_mode.h>

#include "util/error.h"
#include "util/torch_compat.h"

namespace rt {
namespace {

bool autocast_enabled(const torch::Device& device) { return compat::autocast_enabled(device.type()); }

at::ScalarType autocast_dtype_of(const torch::Device& device) {
#if RT_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device.type());
#else
  return device.is_cuda() ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_autocast(const torch::Device& device, bool enabled, at::ScalarType dtype) {
#if RT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device.type(), enabled);
  at::autocast::set_autocast_dtype(device.type(), dtype);
#else
  if (device.is_cuda()) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  throw Error("train.precision = '" + text + "': expected one of fp32, bf16, fp16");
}

void LossScale::update(bool overflowed, const GradScalerOptions& o) {
  if (overflowed) {
    scale *= o.backoff_factor;
    growth_tracker = 0;
  } else if (++growth_tracker >= o.growth_interval) {
    scale *= o.growth_factor;
    growth_tracker = 0;
  }
}

bool unscale_and_check_overflow(const std::vector<torch::Tensor>& grads, double inverse_scale) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> defined;
  for (const auto& g : grads)
    if (g.defined()) defined.push_back(g);
  if (defined.empty()) return false;
  if (defined.front().is_cuda()) {
    // One fused kernel per dtype and device (what GradScaler.unscale_ calls).
    const auto on = torch::TensorOptions().device(defined.front().device()).dtype(torch::kFloat);
    auto found_inf = torch::zeros({1}, on);
    const auto inv = torch::full({1}, inverse_scale, on);
    at::_amp_foreach_non_finite_check_and_unscale_(defined, found_inf, inv);
    return found_inf.item<float>() != 0.0f;
  }
  bool overflow = false;
  for (auto& g : defined) {
    g.mul_(inverse_scale);
    if (!torch::isfinite(g).all().item<bool>()) overflow = true;
  }
  return overflow;
}

MixedPrecision::MixedPrecision(Precision precision, torch::Device device, GradScalerOptions scaler)
    : precision_(precision), device_(device), options_(scaler) {
  if (precision_ == Precision::kFp16) {
    if (!device_.is_cuda()) {
      throw Error("train.precision = fp16 needs a CUDA device, but this run trains on " + device_.str() +
                  " (autocast on the CPU computes in bfloat16): use train.precision = bf16 or fp32");
    }
    scale_.scale = options_.init_scale;
  }
}

at::ScalarType MixedPrecision::autocast_dtype() const {
  return precision_ == Precision::kFp16 ? at::kHalf : at::kBFloat16;
}

MixedPrecision::StepScope::StepScope(MixedPrecision& mp) : mp_(mp), hooks_(mp.enabled() ? &mp : nullptr) {
  if (!mp_.enabled()) return;
  was_enabled_ = autocast_enabled(mp_.device_);
  was_dtype_ = autocast_dtype_of(mp_.device_);
  at::autocast::increment_nesting();
  set_autocast(mp_.device_, true, mp_.autocast_dtype());
}

MixedPrecision::StepScope::~StepScope() {
  if (!mp_.enabled()) return;
  set_autocast(mp_.device_, was_enabled_, was_dtype_);
  // torch.autocast.__exit__: the cache of weights cast in this region goes with it.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  mp_.end_step();
}

void MixedPrecision::before_backward() { set_autocast(device_, false, autocast_dtype()); }

void MixedPrecision::after_backward(const std::vector<torch::Tensor>& params) {
  set_autocast(device_, true, autocast_dtype());
  if (precision_ != Precision::kFp16) return;
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) grads.push_back(p.grad());
  if (!unscale_and_check_overflow(grads, 1.0 / scale_.scale)) return;
  // GradScaler.step skips optimizer.step() when the gradients overflowed: without a gradient,
  // the optimizers leave a parameter and its state alone.
  for (const auto& p : params) p.mutable_grad() = torch::Tensor();
  overflow_in_step_ = true;
  ++skipped_;
}

void MixedPrecision::end_step() {
  if (precision_ != Precision::kFp16) return;
  scale_.update(overflow_in_step_, options_);
  overflow_in_step_ = false;
}

}  // namespace rt

// train.precision: mixed-precision training as PyTorch's automatic mixed precision (AMP) does it.
// fp32: nothing changes. bf16 / fp16: each training step runs its forward pass and loss under
// autocast (torch.autocast(device_type, dtype)): matmuls and convolutions in the lower
// precision, reductions and losses in float32; parameters, gradients, optimizer state and
// checkpoints stay float32. Backward runs outside autocast (BackwardHooks, distributed/
// gradient_sync.h). fp16 also scales the loss (torch.cuda.amp.GradScaler: initial scale 2^16,
// halved on a step whose gradients overflow, which is then skipped; doubled after 2000 steps
// without one). bf16 needs no scaler (float32's exponent range).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/gradient_sync.h"

namespace rt {

class Config;

enum class Precision { kFp32, kBf16, kFp16 };
Precision parse_precision(const std::string& text);  // "fp32" | "bf16" | "fp16"; throws rt::Error

// GradScaler's dynamic loss scale (torch/amp/grad_scaler.py, its defaults).
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// The scale's update after a step (GradScaler.update): halved after a step that overflowed,
// doubled after growth_interval steps in a row that did not.
struct LossScale {
  double scale = 1.0;
  int64_t growth_tracker = 0;
  void update(bool overflowed, const GradScalerOptions& options);
};

// Divides every defined gradient of `grads` by the scale (multiplies by `inverse_scale`) and
// says whether any value is inf or NaN (torch._amp_foreach_non_finite_check_and_unscale_ on
// CUDA tensors; the same elementwise on others).
bool unscale_and_check_overflow(const std::vector<torch::Tensor>& grads, double inverse_scale);

class MixedPrecision final : public BackwardHooks {
 public:
  // Throws rt::Error naming train.precision when `device` cannot run it (fp16 needs CUDA:
  // autocast on the CPU computes in bfloat16; bf16 on a GPU without bfloat16 support).
  MixedPrecision(Precision precision, torch::Device device, GradScalerOptions scaler = {});

  Precision precision() const { return precision_; }
  bool enabled() const { return precision_ != Precision::kFp32; }
  at::ScalarType autocast_dtype() const;

  // One training step: autocast on (and these hooks installed) while alive; on exit the
  // autocast cache of cast weights is dropped (it would hold the weights of before the
  // optimizer step) and the scale updated.
  class StepScope {
   public:
    explicit StepScope(MixedPrecision& mp);
    ~StepScope();
    StepScope(const StepScope&) = delete;
    StepScope& operator=(const StepScope&) = delete;

   private:
    MixedPrecision& mp_;
    BackwardHooksScope hooks_;
    bool was_enabled_ = false;
    at::ScalarType was_dtype_ = at::kFloat;
  };

  // The loss scale (1 unless fp16) and how many backward passes overflowed so far (skipped).
  double scale() const { return scale_.scale; }
  int64_t skipped() const { return skipped_; }

  // BackwardHooks
  double loss_scale() const override { return scale_.scale; }
  void before_backward() override;
  void after_backward(const std::vector<torch::Tensor>& params) override;

 private:
  void end_step();

  Precision precision_;
  torch::Device device_;
  GradScalerOptions options_;
  LossScale scale_;
  int64_t skipped_ = 0;
  bool overflow_in_step_ = false;
};

}  // namespace rt

// Adam and AdamW whose step() updates each parameter in one pass over its elements.
//
// LibTorch's torch::optim::Adam runs ~8 ATen operators per parameter and step (weight decay,
// two moment updates, sqrt, division, eps, addcdiv, plus the bookkeeping), each a full pass
// over the parameter and a dispatcher round trip; RAVE v2 has 112 generator parameters, so
// the optimizer alone issues over 3,000 operator calls per step (BENCHMARKS.md, operator
// counts). FusedAdam/FusedAdamW compute the same update element by element in one loop per
// parameter (at::parallel_for over elements for large ones; the result does not depend on the
// thread count), in the parameter's dtype with the same operation order as LibTorch 1.13's
// adam.cpp/adamw.cpp, so results agree with torch::optim::Adam/AdamW to rounding (tested:
// relative difference ≤ 1e-6 after 20 steps).
//
// They ARE torch::optim::Adam/AdamW: same options, same per-parameter Adam(W)ParamState stored
// under the same keys, so save()/load() archives and checkpoints are interchangeable with the
// stock optimizers. A group with amsgrad takes the stock operator-by-operator update. The
// parameters whose tensors are not dense contiguous float/double CPU tensors (CUDA ones, above
// all) take the stock update's operators too, each applied to all of them at once (ATen's
// _foreach_* kernels, per device, dtype and step count): on CUDA that is one launch per operator
// rather than one per operator and parameter, as PyTorch's Adam(foreach=True), its default on
// CUDA and what RAVE's optimizers run there.
#pragma once

#include <torch/torch.h>

namespace rt {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// The Adam / AdamW `train` builds: rt::FusedAdam(W) when `fused` (train.fused_optimizer), else
// LibTorch's stock optimizer.
std::unique_ptr<torch::optim::Adam> make_adam(std::vector<torch::Tensor> params,
                                              const torch::optim::AdamOptions& options, bool fused);
std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                bool fused);

// Clears the gradients before a backward as the optimizer kind expects: set to none for
// FusedAdam / FusedAdamW (zero_grad_to_none), LibTorch's zero_grad() for any other optimizer.
void clear_gradients(torch::optim::Optimizer& opt);

// Every parameter of `opt`, group by group (what a gradient sync must make global before step()).
std::vector<torch::Tensor> optimizer_parameters(const torch::optim::Optimizer& opt);

// The tensors `opt` keeps per parameter (Adam/AdamW: exp_avg, exp_avg_sq, and max_exp_avg_sq
// with amsgrad; SGD: momentum_buffer), for the memory categories. Empty before the first
// step(), which creates them. Undefined tensors (no amsgrad, no momentum) are included.
// REQUIRES: `opt` is an Adam, AdamW or SGD; another optimizer's state throws rt::Error.
std::vector<torch::Tensor> optimizer_state_tensors(const torch::optim::Optimizer& opt);

// Makes every gradient of `opt`'s parameters undefined (PyTorch's zero_grad(set_to_none=True),
// the default since 2.0). The next backward then writes fresh gradient tensors instead of
// zero-filling and accumulating into the old ones (two to three fewer operators per parameter),
// and Adam skips parameters that received no gradient instead of moving them on momentum.
void zero_grad_to_none(torch::optim::Optimizer& opt);

}  // namespace rt

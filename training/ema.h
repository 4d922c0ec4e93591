// Exponential moving average of a module's parameters: RAVE's EMA callback (acids-ircam/RAVE
// 2.3.1 scripts/train.py, `rave train --ema FACTOR`). After every training batch, generator and
// discriminator steps alike, each parameter's average becomes
//   average · factor + parameter · (1 − factor)        (the first batch copies the parameter)
// over every parameter of the module, the discriminator's included (pl_module.named_parameters()).
// Validation runs on the averages (swapped in at its start and back at its end); checkpoints keep
// them, and `export --ema_weights` exports them, as RAVE's export does.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace rt {

class ParameterEma {
 public:
  explicit ParameterEma(double factor);
  // After a step: updates (or, the first time, copies) the average of every parameter of `module`.
  void update(torch::nn::Module& module);
  bool empty() const { return weights_.empty(); }
  double factor() const { return factor_; }
  // Exchanges the averages and the parameters' values, in place (calling it twice restores both).
  // REQUIRES: !empty() and the same parameter names and shapes as the module the averages come from.
  void swap(torch::nn::Module& module);
  // The averages, by parameter name (for checkpoints and tests).
  const std::map<std::string, torch::Tensor>& weights() const { return weights_; }
  // Writes `module` as Module::save does (same archive layout, so it loads back with
  // Module::load), with each parameter replaced by a copy of its average and the buffers as they
  // are. REQUIRES: !empty().
  void save_as_module(const torch::nn::Module& module, torch::serialize::OutputArchive& archive) const;
  // Takes the averages from the module's current parameter values (a resume: the module holds
  // the saved averages at that moment).
  void assign_from(torch::nn::Module& module);

 private:
  double factor_;
  std::map<std::string, torch::Tensor> weights_;
};

// RAII: the averages swapped into `module` for a scope (validation); nothing when `ema` is null
// or empty.
class EmaSwap {
 public:
  EmaSwap(ParameterEma* ema, torch::nn::Module& module);
  ~EmaSwap();
  EmaSwap(const EmaSwap&) = delete;
  EmaSwap& operator=(const EmaSwap&) = delete;

 private:
  ParameterEma* ema_;
  torch::nn::Module& module_;
};

}  // namespace rt

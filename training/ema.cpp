#include "training/ema.h"

#include "util/error.h"

namespace rt {

ParameterEma::ParameterEma(double factor) : factor_(factor) {
  if (!(factor > 0.0 && factor < 1.0))
    throw Error("train.ema = " + std::to_string(factor) + ": expected a factor in (0, 1)");
}

void ParameterEma::update(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (const auto& p : module.named_parameters(true)) {
    auto it = weights_.find(p.key());
    if (it == weights_.end()) {
      weights_.emplace(p.key(), p.value().detach().clone());
      continue;
    }
    // RAVE: weights[n] * factor + p.data * (1 - factor), as two products and a sum.
    it->second.mul_(factor_).add_(p.value().detach() * (1.0 - factor_));
  }
}

void ParameterEma::swap(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters(true)) {
    auto it = weights_.find(p.key());
    if (it == weights_.end()) throw Error("EMA: no average for parameter '" + p.key() + "'");
    torch::Tensor current = p.value().detach().clone();
    p.value().detach().copy_(it->second);
    it->second.copy_(current);
  }
}

namespace {

void save_tree(const torch::nn::Module& m, torch::serialize::OutputArchive& a, const std::string& prefix,
               const std::map<std::string, torch::Tensor>& weights) {
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    auto it = weights.find(prefix + p.key());
    if (it == weights.end()) throw Error("EMA: no average for parameter '" + prefix + p.key() + "'");
    a.write(p.key(), it->second.clone());
  }
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    a.write(b.key(), b.value().clone(), /*is_buffer=*/true);
  for (const auto& c : m.named_children()) {
    torch::serialize::OutputArchive child(a.compilation_unit());
    save_tree(*c.value(), child, prefix + c.key() + ".", weights);
    a.write(c.key(), child);
  }
}

}  // namespace

void ParameterEma::save_as_module(const torch::nn::Module& module,
                                  torch::serialize::OutputArchive& archive) const {
  save_tree(module, archive, "", weights_);
}

void ParameterEma::assign_from(torch::nn::Module& module) {
  weights_.clear();
  for (const auto& p : module.named_parameters(true)) weights_.emplace(p.key(), p.value().detach().clone());
}

EmaSwap::EmaSwap(ParameterEma* ema, torch::nn::Module& module) : ema_(ema), module_(module) {
  if (ema_ != nullptr && ema_->empty()) ema_ = nullptr;
  if (ema_ != nullptr) ema_->swap(module_);
}

EmaSwap::~EmaSwap() {
  if (ema_ != nullptr) ema_->swap(module_);
}

}  // namespace rt

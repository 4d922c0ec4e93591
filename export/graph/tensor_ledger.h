// The tensors of a trained model, by state-dict name, each to be accounted for exactly once.
//
// RAVE's own export loads with load_state_dict(strict=False) and so silently keeps random
// weights when names drift. Here every tensor the exported module holds is taken from the
// ledger, and every tensor of the ledger must be taken or dropped with a reason (the
// discriminator, training flags): finish() throws, listing the keys, when one is left over.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace rt::exporting {

// Every parameter and buffer of `model` by state-dict name, detached: what a ledger starts from.
std::map<std::string, torch::Tensor> model_tensors(torch::nn::Module& model);

class TensorLedger {
 public:
  explicit TensorLedger(std::map<std::string, torch::Tensor> tensors);

  bool has(const std::string& key) const { return tensors_.count(key) != 0; }
  // The tensor named `key`, marked as used. Throws rt::Error when absent or already used.
  torch::Tensor take(const std::string& key);
  // The convolution kernel of the module at `prefix`: `prefix.weight`, or the weight-normed
  // pair folded into one kernel g·v/‖v‖ (torch._weight_norm over dim 0, as the model
  // computes it in every forward pass; RAVE's export removes weight norm the same way).
  torch::Tensor take_kernel(const std::string& prefix);
  // `prefix.bias` when present (marked as used), else an undefined tensor.
  torch::Tensor take_bias(const std::string& prefix);
  // Marks every key starting with `prefix` as accounted for without use; `why` is kept for
  // the report. Returns how many keys it covered.
  size_t drop_prefix(const std::string& prefix, const std::string& why);
  // Throws rt::Error listing every key neither taken nor dropped.
  void finish() const;
  // Dropped keys grouped by reason, for the export report.
  const std::map<std::string, std::vector<std::string>>& dropped() const { return dropped_; }

 private:
  std::map<std::string, torch::Tensor> tensors_;
  std::map<std::string, bool> used_;
  std::map<std::string, std::vector<std::string>> dropped_;
};

}  // namespace rt::exporting

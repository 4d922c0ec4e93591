#include "export/graph/tensor_ledger.h"

#include "util/error.h"

namespace rt::exporting {

std::map<std::string, torch::Tensor> model_tensors(torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model.named_parameters()) out[p.key()] = p.value().detach();
  for (const auto& b : model.named_buffers()) out[b.key()] = b.value().detach();
  return out;
}

TensorLedger::TensorLedger(std::map<std::string, torch::Tensor> tensors) : tensors_(std::move(tensors)) {
  for (const auto& [key, t] : tensors_) used_[key] = false;
}

torch::Tensor TensorLedger::take(const std::string& key) {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) throw Error("export: the model has no tensor '" + key + "'");
  if (used_[key]) throw Error("export: tensor '" + key + "' is used twice");
  used_[key] = true;
  return it->second.detach();
}

torch::Tensor TensorLedger::take_kernel(const std::string& prefix) {
  if (has(prefix + ".weight_g") || has(prefix + ".weight_v")) {
    torch::NoGradGuard no_grad;
    auto g = take(prefix + ".weight_g"), v = take(prefix + ".weight_v");
    return torch::_weight_norm(v, g, 0).contiguous();
  }
  return take(prefix + ".weight").contiguous();
}

torch::Tensor TensorLedger::take_bias(const std::string& prefix) {
  return has(prefix + ".bias") ? take(prefix + ".bias") : torch::Tensor();
}

size_t TensorLedger::drop_prefix(const std::string& prefix, const std::string& why) {
  size_t n = 0;
  for (auto& [key, used] : used_) {
    if (used || key.compare(0, prefix.size(), prefix) != 0) continue;
    used = true;
    dropped_[why].push_back(key);
    ++n;
  }
  return n;
}

void TensorLedger::finish() const {
  std::string left;
  size_t n = 0;
  for (const auto& [key, used] : used_) {
    if (used) continue;
    left += (n++ ? ", " : "") + key;
  }
  if (n > 0) {
    throw Error("export: " + std::to_string(n) +
                " tensor(s) of the model have no place in the exported module: " + left);
  }
}

}  // namespace rt::exporting

#include "models/common/blocks.h"

namespace rt::models {

void SeqImpl::set_module_path(std::string path) {
  child_paths_.clear();
  for (size_t i = 0; i < size(); ++i) child_paths_.push_back(path + "." + std::to_string(i));
  TracedModule::set_module_path(std::move(path));
}

torch::Tensor SeqImpl::forward_with_spans(const torch::Tensor& x) {
  if (child_paths_.size() != size()) set_module_path(module_path().empty() ? "Seq" : module_path());
  torch::Tensor y = x;
  size_t i = 0;
  for (auto& child : *this) {
    prof::ModuleScope span(child_paths_[i++]);
    y = child.forward(y);
  }
  return y;
}

SnakeImpl::SnakeImpl(int64_t dim) { alpha = register_parameter("alpha", torch::ones({dim, 1})); }

torch::Tensor SnakeImpl::forward(const torch::Tensor& x) {
  return x + (alpha + 1e-9).reciprocal() * (alpha * x).sin().pow(2);
}

torch::nn::AnyModule make_activation(Activation kind, int64_t dim) {
  if (kind == Activation::kSnake) return torch::nn::AnyModule(Snake(dim));
  return torch::nn::AnyModule(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)));
}

namespace {
constexpr int64_t kMaxBatchSize = 64;  // cached_conv MAX_BATCH_SIZE
}

AdaINImpl::AdaINImpl(int64_t dim) {
  mean_x = register_buffer("mean_x", torch::zeros({kMaxBatchSize, dim, 1}));
  std_x = register_buffer("std_x", torch::ones({kMaxBatchSize, dim, 1}));
  learn_x = register_buffer("learn_x", torch::zeros({1}));
  num_update_x = register_buffer("num_update_x", torch::zeros({1}));
  mean_y = register_buffer("mean_y", torch::zeros({kMaxBatchSize, dim, 1}));
  std_y = register_buffer("std_y", torch::ones({kMaxBatchSize, dim, 1}));
  learn_y = register_buffer("learn_y", torch::zeros({1}));
  num_update_y = register_buffer("num_update_y", torch::zeros({1}));
}

torch::Tensor AdaINImpl::forward(const torch::Tensor& x) {
  if (is_training()) return x;
  torch::NoGradGuard no_grad;
  const int64_t bs = x.size(0);
  TORCH_CHECK(bs <= kMaxBatchSize, "AdaIN: batch larger than ", kMaxBatchSize);
  auto update = [&](torch::Tensor& target, const torch::Tensor& source, torch::Tensor& n) {
    auto t = target.narrow(0, 0, bs);
    t.add_((source - t) / (n + 1));
  };
  if (learn_y.item<float>() != 0.f) {
    update(mean_y, x.mean(-1, true), num_update_y);
    update(std_y, x.std(-1, true, true), num_update_y);
    num_update_y.add_(1);
    return x;
  }
  if (learn_x.item<float>() != 0.f) {
    update(mean_x, x.mean(-1, true), num_update_x);
    update(std_x, x.std(-1, true, true), num_update_x);
    num_update_x.add_(1);
  }
  if (num_update_x.item<float>() != 0.f && num_update_y.item<float>() != 0.f) {
    auto y = (x - mean_x.narrow(0, 0, bs)) / (std_x.narrow(0, 0, bs) + 1e-5);
    return y * std_y.narrow(0, 0, bs) + mean_y.narrow(0, 0, bs);
  }
  return x;
}

BranchesImpl::BranchesImpl(std::vector<torch::nn::AnyModule> modules_) : modules(std::move(modules_)) {
  branches = register_module("branches", torch::nn::ModuleList());
  for (auto& m : modules) branches->push_back(m.ptr());
}

std::vector<torch::Tensor> BranchesImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> out;
  out.reserve(modules.size());
  for (auto& m : modules) out.push_back(m.forward<torch::Tensor>(x));
  return out;
}

ResidualImpl::ResidualImpl(torch::nn::AnyModule inner_) : inner(std::move(inner_)) {
  aligned = register_module("aligned", Branches(std::vector<torch::nn::AnyModule>{
                                           inner, torch::nn::AnyModule(torch::nn::Identity())}));
}

torch::Tensor ResidualImpl::forward(const torch::Tensor& x) { return inner.forward<torch::Tensor>(x) + x; }

namespace {

WNConv1d make_same_conv(int64_t dim, int64_t kernel_size, int64_t dilation, PaddingMode mode) {
  const auto pad = get_padding(kernel_size, dilation, mode);
  return WNConv1d(
      WNConv1dOptions(dim, dim, kernel_size).dilation(dilation).pad_left(pad.first).pad_right(pad.second));
}

// RAVE blocks.ResidualBlock: `net` = Sequential of ResidualLayers.
struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int64_t dim, int64_t kernel_size, const std::vector<std::vector<int64_t>>& dilations_list,
                    Activation act, PaddingMode mode) {
    for (const auto& d : dilations_list) net->push_back(ResidualLayer(dim, kernel_size, d, act, mode));
    register_module("net", net);
  }
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }
  Seq net;
};
TORCH_MODULE(ResidualBlock);

}  // namespace

DilatedUnitImpl::DilatedUnitImpl(int64_t dim, int64_t kernel_size, int64_t dilation, Activation act,
                                 PaddingMode mode) {
  net->push_back(make_activation(act, dim));
  net->push_back(make_same_conv(dim, kernel_size, dilation, mode));
  net->push_back(make_activation(act, dim));
  net->push_back(make_same_conv(dim, 1, 1, mode));
  register_module("net", net);
}

torch::Tensor DilatedUnitImpl::forward(const torch::Tensor& x) { return net->forward(x); }

ResidualLayerImpl::ResidualLayerImpl(int64_t dim, int64_t kernel_size, const std::vector<int64_t>& dilations,
                                     Activation act, PaddingMode mode) {
  Seq seq;
  for (int64_t d : dilations) {
    seq->push_back(make_activation(act, dim));
    seq->push_back(make_same_conv(dim, kernel_size, d, mode));
  }
  net = register_module("net", Residual(torch::nn::AnyModule(seq)));
}

torch::Tensor ResidualLayerImpl::forward(const torch::Tensor& x) { return net->forward(x); }

ResidualStackImpl::ResidualStackImpl(int64_t dim, const std::vector<int64_t>& kernel_sizes,
                                     const std::vector<std::vector<int64_t>>& dilations_list, Activation act,
                                     PaddingMode mode) {
  std::vector<torch::nn::AnyModule> blocks;
  for (int64_t k : kernel_sizes) blocks.emplace_back(ResidualBlock(dim, k, dilations_list, act, mode));
  net = register_module("net", Branches(std::move(blocks)));
}

torch::Tensor ResidualStackImpl::forward(const torch::Tensor& x) {
  auto outs = net->forward(x);
  torch::Tensor sum = outs[0];
  for (size_t i = 1; i < outs.size(); ++i) sum = sum + outs[i];
  return sum;
}

}  // namespace rt::models

// Activations and residual blocks shared by the RAVE encoders and generators
// (acids-ircam/RAVE rave/blocks.py). Submodule names mirror RAVE's so state-dict keys match,
// e.g. a residual dilated unit's second conv is `<seq>.<i>.aligned.branches.0.net.3.weight_g`.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/common/conv.h"
#include "models/common/module_path.h"
#include "profiling/annotation.h"
#include "util/enum_names.h"

namespace rt::models {

// nn::Sequential with a plain forward(Tensor), so it can itself be stored in an AnyModule
// (nested sequences). Children are named "0", "1", … as in torch.nn.Sequential. With module
// spans on (profiling.with_modules), each child's forward is a span "<path>.<i>".
struct SeqImpl : torch::nn::SequentialImpl, TracedModule {
  using torch::nn::SequentialImpl::SequentialImpl;
  torch::Tensor forward(const torch::Tensor& x) {
    if (!prof::module_spans_enabled()) return torch::nn::SequentialImpl::forward(x);
    return forward_with_spans(x);
  }
  void set_module_path(std::string path) override;

 private:
  torch::Tensor forward_with_spans(const torch::Tensor& x);
  std::vector<std::string> child_paths_;
};
TORCH_MODULE(Seq);

// model.activation (RAVE blocks: nn.LeakyReLU(.2) or Snake).
enum class Activation { kLeakyRelu, kSnake, kMaxValue = kSnake };
constexpr EnumNames<Activation> enum_names(Activation) { return {{"leaky_relu", "snake"}}; }

// Snake (RAVE blocks.Snake): x + 1/(α+1e-9)·sin²(αx), α of shape (dim, 1), initialised to 1.
struct SnakeImpl : torch::nn::Module {
  explicit SnakeImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor alpha;
};
TORCH_MODULE(Snake);

// The activation inside RAVE's dilated units (EncoderV2, GeneratorV2), whatever
// model.activation is. acids-ircam/RAVE 2.3.1 builds them with DilatedUnit's default
// nn.LeakyReLU(.2) even under snake.gin (v3): its `blocks.DilatedUnit.activation` binding does
// not reach the units the encoder and generator construct, so a v3 RAVE has Snake (and `alpha`
// parameters) only between stages. Checked on the state_dict of the v3 RAVE builds
// (tests/trainer/rave_configs_oracle_test.cpp).
inline constexpr Activation kRaveUnitActivation = Activation::kLeakyRelu;

// LeakyReLU(0.2) or Snake(dim), type-erased so it can sit in a Sequential.
torch::nn::AnyModule make_activation(Activation kind, int64_t dim);

// RAVE blocks.AdaptiveInstanceNormalization (v3 adain.gin): the identity while training; in
// evaluation it can learn target/source statistics and transfer them. Buffers (mean_x, std_x,
// learn_x, num_update_x and the same for y) are sized for cached_conv's MAX_BATCH_SIZE = 64.
struct AdaINImpl : torch::nn::Module {
  explicit AdaINImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor mean_x, std_x, learn_x, num_update_x, mean_y, std_y, learn_y, num_update_y;
};
TORCH_MODULE(AdaIN);

// cached_conv Branches (AlignBranches without caching): applies every module of `branches` to
// the same input.
struct BranchesImpl : torch::nn::Module {
  explicit BranchesImpl(std::vector<torch::nn::AnyModule> modules);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::ModuleList branches;
  std::vector<torch::nn::AnyModule> modules;
};
TORCH_MODULE(Branches);

// RAVE blocks.Residual: inner(x) + x, kept as `aligned.branches = [inner, Identity]`.
struct ResidualImpl : torch::nn::Module {
  explicit ResidualImpl(torch::nn::AnyModule inner);
  torch::Tensor forward(const torch::Tensor& x);
  Branches aligned{nullptr};
  torch::nn::AnyModule inner;
};
TORCH_MODULE(Residual);

// RAVE blocks.DilatedUnit: act → WNConv(dim, dim, k, dilation d) → act → WNConv(dim, dim, 1),
// as `net` = [act, conv, act, conv]. Convs without bias (v1.gin cc.Conv1d.bias = False).
struct DilatedUnitImpl : torch::nn::Module {
  DilatedUnitImpl(int64_t dim, int64_t kernel_size, int64_t dilation, Activation act, PaddingMode mode);
  torch::Tensor forward(const torch::Tensor& x);
  Seq net;
};
TORCH_MODULE(DilatedUnit);

// RAVE blocks.ResidualLayer (v1 generator): Residual([act, WNConv(dim,dim,k,dil d)] per d).
struct ResidualLayerImpl : torch::nn::Module {
  ResidualLayerImpl(int64_t dim, int64_t kernel_size, const std::vector<int64_t>& dilations, Activation act,
                    PaddingMode mode);
  torch::Tensor forward(const torch::Tensor& x);
  Residual net{nullptr};
};
TORCH_MODULE(ResidualLayer);

// RAVE blocks.ResidualStack (v1): one ResidualBlock (`net` = Sequential of ResidualLayers) per
// kernel size, all applied to x and summed; kept as `net.branches.<i>.net.<j>`.
struct ResidualStackImpl : torch::nn::Module {
  ResidualStackImpl(int64_t dim, const std::vector<int64_t>& kernel_sizes,
                    const std::vector<std::vector<int64_t>>& dilations_list, Activation act,
                    PaddingMode mode);
  torch::Tensor forward(const torch::Tensor& x);
  Branches net{nullptr};
};
TORCH_MODULE(ResidualStack);

}  // namespace rt::models

#include "training/fused_adam.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "training/fused_adam_kernel.h"
#include "util/error.h"
#include "util/torch_compat.h"

namespace rt {

namespace {

// Scalars of one parameter's update, computed in double as LibTorch does and rounded to the
// parameter's dtype where ATen would round them (Scalar → scalar_t inside each kernel).
struct AdamScalars {
  double beta1, beta2, eps, step_size, bias_correction2_sqrt;
  double l2 = 0;     // Adam: grad += l2 · p
  double decay = 1;  // AdamW: p *= decay (1 − lr · weight_decay)
  bool decoupled = false;
};

template <typename T>
void adam_pass(T* p, const T* g, T* m, T* v, int64_t n, const AdamScalars& s) {
  detail::AdamConsts<T> c;
  c.b1 = static_cast<T>(s.beta1);
  c.one_minus_b1 = static_cast<T>(1 - s.beta1);
  c.b2 = static_cast<T>(s.beta2);
  c.one_minus_b2 = static_cast<T>(1 - s.beta2);
  c.eps = static_cast<T>(s.eps);
  c.bc2 = static_cast<T>(s.bias_correction2_sqrt);
  c.neg_step = static_cast<T>(-s.step_size);
  c.l2 = static_cast<T>(s.l2);
  c.decay = static_cast<T>(s.decay);
  const auto mode = s.l2 != 0     ? detail::AdamMode::kL2
                    : s.decoupled ? detail::AdamMode::kDecoupled
                                  : detail::AdamMode::kPlain;
  // Elements are independent and the kernel rounds identically everywhere: any split gives
  // the same result.
  at::parallel_for(0, n, 65536, [&](int64_t begin, int64_t end) {
    detail::adam_update(p + begin, g + begin, m + begin, v + begin, end - begin, c, mode);
  });
}

bool fusable(const torch::Tensor& p, const torch::Tensor& g, const torch::Tensor& m, const torch::Tensor& v) {
  const auto dt = p.scalar_type();
  if (dt != torch::kFloat && dt != torch::kDouble) return false;
  for (const auto* t : {&p, &g, &m, &v}) {
    if (!t->device().is_cpu() || t->is_sparse() || !t->is_contiguous() || t->scalar_type() != dt ||
        t->numel() != p.numel()) {
      return false;
    }
  }
  return true;
}

// The stock operator-by-operator update with amsgrad (LibTorch 1.13's adam.cpp/adamw.cpp):
// neither the fused pass nor the multi-tensor one keeps max_exp_avg_sq.
template <typename State>
void amsgrad_ops(torch::Tensor p, torch::Tensor grad, State& state, const AdamScalars& s) {
  if (s.l2 != 0) grad = grad.add(p, s.l2);
  if (s.decoupled) p.mul_(s.decay);
  state.exp_avg().mul_(s.beta1).add_(grad, 1 - s.beta1);
  state.exp_avg_sq().mul_(s.beta2).addcmul_(grad, grad, 1 - s.beta2);
  torch::max_out(state.max_exp_avg_sq(), state.exp_avg_sq(), state.max_exp_avg_sq());
  const auto denom = (state.max_exp_avg_sq().sqrt() / s.bias_correction2_sqrt).add_(s.eps);
  p.addcdiv_(state.exp_avg(), denom, -s.step_size);
}

// Parameters of one group that share device, dtype and step count, updated by the stock
// operators applied to all of them at once (ATen's _foreach_* multi-tensor kernels): on CUDA one
// launch per operator for the bucket instead of one per operator and parameter, as PyTorch's
// Adam(foreach=True), the default there on CUDA. Per element: LibTorch 1.13's adam.cpp/adamw.cpp.
struct MultiTensorBucket {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  AdamScalars scalars;
};

void multi_tensor_update(MultiTensorBucket& b) {
  const AdamScalars& s = b.scalars;
  std::vector<torch::Tensor> grads = s.l2 != 0 ? at::_foreach_add(b.grads, b.params, s.l2) : b.grads;
  if (s.decoupled) at::_foreach_mul_(b.params, s.decay);
  at::_foreach_mul_(b.exp_avgs, s.beta1);
  at::_foreach_add_(b.exp_avgs, grads, 1 - s.beta1);
  at::_foreach_mul_(b.exp_avg_sqs, s.beta2);
  at::_foreach_addcmul_(b.exp_avg_sqs, grads, grads, 1 - s.beta2);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(b.exp_avg_sqs);
  at::_foreach_div_(denom, s.bias_correction2_sqrt);
  at::_foreach_add_(denom, s.eps);
  at::_foreach_addcdiv_(b.params, b.exp_avgs, denom, -s.step_size);
}

template <typename Options, typename State>
torch::Tensor fused_step(std::vector<torch::optim::OptimizerParamGroup>& groups,
                         compat::OptimizerStateMap& states,
                         const torch::optim::Optimizer::LossClosure& closure, bool decoupled) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  RECORD_USER_SCOPE(decoupled ? "rt::FusedAdamW::step" : "rt::FusedAdam::step");
  for (auto& group : groups) {
    auto& options = static_cast<Options&>(group.options());
    // (device, dtype, step) → the parameters updated together by multi_tensor_update.
    std::map<std::tuple<std::string, int, int64_t>, MultiTensorBucket> buckets;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = p.grad();
      TORCH_CHECK(!grad.is_sparse(), "FusedAdam does not support sparse gradients");
      auto key = compat::optimizer_state_key(p);
      auto it = states.find(key);
      if (it == states.end()) {
        auto fresh = std::make_unique<State>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (options.amsgrad()) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = states.emplace(std::move(key), std::move(fresh)).first;
      }
      auto& state = static_cast<State&>(*it->second);
      state.step(state.step() + 1);
      const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
      AdamScalars s;
      s.beta1 = beta1;
      s.beta2 = beta2;
      s.eps = options.eps();
      s.step_size = options.lr() / (1 - std::pow(beta1, static_cast<double>(state.step())));
      s.bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, static_cast<double>(state.step())));
      s.decoupled = decoupled && options.weight_decay() != 0;
      if (s.decoupled) s.decay = 1 - options.lr() * options.weight_decay();
      if (!decoupled) s.l2 = options.weight_decay();
      if (options.amsgrad()) {
        amsgrad_ops(p, grad, state, s);
        continue;
      }
      if (!fusable(p, grad, state.exp_avg(), state.exp_avg_sq())) {
        auto& b = buckets[{p.device().str(), static_cast<int>(p.scalar_type()), state.step()}];
        b.params.push_back(p);
        b.grads.push_back(grad);
        b.exp_avgs.push_back(state.exp_avg());
        b.exp_avg_sqs.push_back(state.exp_avg_sq());
        b.scalars = s;
        continue;
      }
      const torch::Tensor& m = state.exp_avg();
      const torch::Tensor& v = state.exp_avg_sq();
      AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "fused_adam", [&] {
        adam_pass<scalar_t>(p.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), m.data_ptr<scalar_t>(),
                            v.data_ptr<scalar_t>(), p.numel(), s);
      });
    }
    for (auto& entry : buckets) multi_tensor_update(entry.second);
  }
  return loss;
}

}  // namespace

torch::Tensor FusedAdam::step(LossClosure closure) {
  return fused_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(param_groups_, state_, closure,
                                                                             /*decoupled=*/false);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  return fused_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(param_groups_, state_, closure,
                                                                               /*decoupled=*/true);
}

std::unique_ptr<torch::optim::Adam> make_adam(std::vector<torch::Tensor> params,
                                              const torch::optim::AdamOptions& options, bool fused) {
  if (fused) return std::make_unique<FusedAdam>(std::move(params), options);
  return std::make_unique<torch::optim::Adam>(std::move(params), options);
}

std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                bool fused) {
  if (fused) return std::make_unique<FusedAdamW>(std::move(groups));
  return std::make_unique<torch::optim::AdamW>(std::move(groups));
}

std::vector<torch::Tensor> optimizer_parameters(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> params;
  for (const auto& group : opt.param_groups())
    params.insert(params.end(), group.params().begin(), group.params().end());
  return params;
}

std::vector<torch::Tensor> optimizer_state_tensors(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& [key, state] : opt.state()) {
    if (const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      out.insert(out.end(), {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()});
    } else if (const auto* w = dynamic_cast<const torch::optim::AdamWParamState*>(state.get())) {
      out.insert(out.end(), {w->exp_avg(), w->exp_avg_sq(), w->max_exp_avg_sq()});
    } else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      out.push_back(g->momentum_buffer());
    } else {
      throw Error("optimizer_state_tensors: the optimizer keeps a state other than Adam's, AdamW's or SGD's");
    }
  }
  return out;  // max_exp_avg_sq is undefined without amsgrad; callers skip undefined tensors
}

void clear_gradients(torch::optim::Optimizer& opt) {
  if (dynamic_cast<FusedAdam*>(&opt) != nullptr || dynamic_cast<FusedAdamW*>(&opt) != nullptr) {
    zero_grad_to_none(opt);
  } else {
    compat::zero_grad_filled(opt);
  }
}

void zero_grad_to_none(torch::optim::Optimizer& opt) {
  for (auto& group : opt.param_groups()) {
    for (auto& p : group.params()) p.mutable_grad() = torch::Tensor();
  }
}

}  // namespace rt

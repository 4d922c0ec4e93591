#include "distributed/sync_batch_norm.h"

#include <cstdint>
#include <ostream>

#include "util/torch_compat.h"

namespace rt::dist {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The communicator travels through saved_data as an integer (IValue holds no pointers).
int64_t to_handle(Communicator* comm) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(comm)); }
Communicator& from_handle(int64_t handle) {
  return *reinterpret_cast<Communicator*>(static_cast<intptr_t>(handle));
}

class SyncBatchNormFn : public torch::autograd::Function<SyncBatchNormFn> {
 public:
  // Returns {y, mean, var, count}; only y is differentiable.
  static tensor_list forward(AutogradContext* ctx, const Tensor& x_in, double eps, int64_t comm_handle) {
    auto x = x_in.contiguous();
    const int64_t C = x.size(1);
    auto xd = x.to(torch::kDouble);
    auto count = torch::full({1}, static_cast<double>(x.size(0)), xd.options());
    auto sums = torch::cat({xd.sum(0), (xd * xd).sum(0), count});
    from_handle(comm_handle).all_reduce_sum(sums);
    auto n = sums.narrow(0, 2 * C, 1);
    auto mean = sums.narrow(0, 0, C) / n;
    auto var = (sums.narrow(0, C, C) / n - mean * mean).clamp_min(0);
    auto invstd = (var + eps).rsqrt();
    auto y = (x - mean.to(x.scalar_type())) * invstd.to(x.scalar_type());
    ctx->save_for_backward({y, invstd.to(x.scalar_type()), n});
    ctx->saved_data["comm"] = comm_handle;
    ctx->mark_non_differentiable({mean, var, n});
    return {y, mean, var, n};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &y = saved[0], &invstd = saved[1], &n = saved[2];
    // Every rank joins the all-reduce, also one whose output got no gradient.
    auto g = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(y);
    const int64_t C = y.size(1);
    auto gd = g.to(torch::kDouble);
    auto sums = torch::cat({gd.sum(0), (gd * y.to(torch::kDouble)).sum(0)});
    from_handle(ctx->saved_data["comm"].toInt()).all_reduce_sum(sums);
    auto mean_g = (sums.narrow(0, 0, C) / n).to(y.scalar_type());
    auto mean_gy = (sums.narrow(0, C, C) / n).to(y.scalar_type());
    return {invstd * (g - mean_g - y * mean_gy), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor sync_batch_norm_rows(const Tensor& x, double eps, Communicator& comm, BatchStats* stats) {
  TORCH_CHECK(x.dim() == 2, "sync_batch_norm_rows: expected [N, C] rows, got ", x.sizes());
  TORCH_CHECK(x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble,
              "sync_batch_norm_rows: float or double only, got ", x.scalar_type());
  auto outs = rt::compat::apply_function<SyncBatchNormFn>(x, eps, to_handle(&comm));
  if (stats != nullptr) {
    stats->mean = outs[1];
    stats->var = outs[2];
    stats->count = outs[3].item<double>();
  }
  return outs[0];
}

Tensor sync_batch_norm(const Tensor& x, torch::nn::BatchNorm1dImpl& norm, Communicator& comm) {
  if (comm.world_size() == 1 || !norm.is_training()) return norm.forward(x);
  const auto& o = norm.options;
  BatchStats stats;
  auto y = sync_batch_norm_rows(x, o.eps(), comm, &stats);
  TORCH_CHECK(stats.count > 1, "Expected more than 1 value per channel when training, got ", stats.count,
              " rows over all ranks");
  if (o.track_running_stats()) update_running_stats(norm, stats.mean, stats.var, stats.count);
  if (o.affine()) y = y * norm.weight + norm.bias;
  return y;
}

void update_running_stats(torch::nn::BatchNorm1dImpl& norm, const Tensor& mean, const Tensor& biased_var,
                          double count) {
  torch::NoGradGuard no_grad;
  const auto& o = norm.options;
  double factor = o.momentum().has_value() ? *o.momentum() : 0.0;
  if (norm.num_batches_tracked.defined()) {
    norm.num_batches_tracked += 1;
    if (!o.momentum().has_value()) factor = 1.0 / norm.num_batches_tracked.item<double>();
  }
  norm.running_mean.mul_(1.0 - factor).add_(mean.to(norm.running_mean.options()), factor);
  norm.running_var.mul_(1.0 - factor)
      .add_(biased_var.to(norm.running_var.options()), factor * count / (count - 1.0));
}

SyncableBatchNorm1dImpl::SyncableBatchNorm1dImpl(const torch::nn::BatchNorm1dOptions& options_)
    : options(options_) {
  reset();
}

void SyncableBatchNorm1dImpl::reset() {
  norm = torch::nn::BatchNorm1d(options);
  if (norm->weight.defined()) register_parameter("weight", norm->weight);
  if (norm->bias.defined()) register_parameter("bias", norm->bias);
  if (norm->running_mean.defined()) register_buffer("running_mean", norm->running_mean);
  if (norm->running_var.defined()) register_buffer("running_var", norm->running_var);
  if (norm->num_batches_tracked.defined()) register_buffer("num_batches_tracked", norm->num_batches_tracked);
}

Tensor SyncableBatchNorm1dImpl::forward(const Tensor& x) {
  // norm is no child, so train()/eval() reach it through here.
  if (norm->is_training() != is_training()) norm->train(is_training());
  if (!sync || sync->world_size() == 1 || !is_training()) return norm->forward(x);
  if (x.dim() == 2) return sync_batch_norm(x, *norm, *sync);
  TORCH_CHECK(x.dim() == 3, "SyncableBatchNorm1d: expected [N, C] or [N, C, L] input, got ", x.sizes());
  const int64_t n = x.size(0), c = x.size(1), l = x.size(2);
  // Rows (n·l) × channels c: the statistics BatchNorm1d takes over N and L.
  auto rows = x.transpose(1, 2).reshape({n * l, c});
  return sync_batch_norm(rows, *norm, *sync).view({n, l, c}).transpose(1, 2).contiguous();
}

void SyncableBatchNorm1dImpl::pretty_print(std::ostream& stream) const {
  stream << "torch::nn::BatchNorm1d(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=" << options.momentum().value_or(0.0) << ", affine=" << std::boolalpha
         << options.affine() << ", track_running_stats=" << options.track_running_stats() << ")";
}

void set_batch_norm_sync(torch::nn::Module& module, const std::shared_ptr<Communicator>& comm) {
  for (const auto& m : module.modules(/*include_self=*/true)) {
    if (auto* bn = dynamic_cast<SyncableBatchNorm1dImpl*>(m.get())) bn->sync = comm;
  }
}

void broadcast_buffers(Communicator& comm, torch::nn::Module& module) {
  if (comm.world_size() == 1) return;
  std::vector<Tensor> buffers;
  for (const auto& b : module.buffers(/*recurse=*/true)) {
    if (b.defined() && b.numel() > 0) buffers.push_back(b);
  }
  if (buffers.empty()) return;
  torch::NoGradGuard no_grad;
  comm.broadcast(buffers, 0);
}

}  // namespace rt::dist

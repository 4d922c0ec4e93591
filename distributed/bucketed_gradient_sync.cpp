#include "distributed/bucketed_gradient_sync.h"

#include <c10/util/strides.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "profiling/annotation.h"
#include "util/clock.h"
#include "util/error.h"

namespace rt::dist {

struct BucketedGradientSync::Plan {
  struct Bucket {
    std::vector<size_t> params;  // indices into Plan::params
    torch::Tensor buffer;        // flat, allocated at the first launch
    size_t ready = 0;
    bool launched = false;
    std::vector<size_t> reduced;  // the parameters whose gradients are in the buffer
    bool carries = false;         // the buffer's last element is carry()'s count
    torch::Tensor flat;           // the reduced part of the buffer (and the count)
    PendingCollective pending;
  };
  std::vector<torch::Tensor> params;
  std::vector<const void*> key;  // TensorImpl of each parameter
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hooks;
  std::vector<size_t> bucket_of;  // per parameter; SIZE_MAX when it needs no gradient
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  size_t next_launch = 0;
};

BucketedGradientSync::BucketedGradientSync(std::shared_ptr<Communicator> comm, BucketOptions options)
    : comm_(std::move(comm)), options_(options) {
  if (!comm_) throw Error("BucketedGradientSync: no communicator");
  if (options_.first_bucket_bytes < 1 || options_.bucket_bytes < 1)
    throw Error("bucket sizes must be >= 1 byte");
}

BucketedGradientSync::~BucketedGradientSync() {
  for (auto& plan : plans_) {
    for (size_t i = 0; i < plan->accumulators.size(); ++i) {
      if (plan->accumulators[i]) plan->accumulators[i]->del_post_hook(plan->hooks[i]);
    }
  }
}

BucketedGradientSync::Plan& BucketedGradientSync::plan_for(const std::vector<torch::Tensor>& params) {
  std::vector<const void*> key;
  key.reserve(params.size());
  for (const auto& p : params) key.push_back(p.unsafeGetTensorImpl());
  for (auto& plan : plans_) {
    if (plan->key == key) return *plan;
  }
  auto plan = std::make_unique<Plan>();
  plan->params = params;
  plan->key = std::move(key);
  plan->accumulators.resize(params.size());
  plan->hooks.resize(params.size());
  plan->bucket_of.assign(params.size(), SIZE_MAX);
  plan->ready.assign(params.size(), false);
  int64_t bytes = 0;
  for (size_t i = params.size(); i-- > 0;) {
    const auto& p = params[i];
    if (!p.requires_grad()) continue;
    if (!p.is_leaf()) throw Error("gradient sync: parameter " + std::to_string(i) + " is not a leaf tensor");
    auto& buckets = plan->buckets;
    const bool fits = !buckets.empty() && [&] {
      const auto& first = params[buckets.back().params.front()];
      const int64_t cap = buckets.size() == 1 ? options_.first_bucket_bytes : options_.bucket_bytes;
      return bytes < cap && first.scalar_type() == p.scalar_type() && first.device() == p.device();
    }();
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().params.push_back(i);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    plan->bucket_of[i] = buckets.size() - 1;
  }
  Plan* raw = plan.get();
  for (size_t i = 0; i < params.size(); ++i) {
    if (raw->bucket_of[i] == SIZE_MAX) continue;
    raw->accumulators[i] = torch::autograd::impl::grad_accumulator(params[i]);
    raw->hooks[i] =
        raw->accumulators[i]->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, raw, i](const torch::autograd::variable_list& outputs,
                           const torch::autograd::variable_list&) {
              on_gradient(*raw, i);
              return outputs;
            }));
  }
  plans_.push_back(std::move(plan));
  return *raw;
}

void BucketedGradientSync::begin(const std::vector<torch::Tensor>& params) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ != nullptr) throw Error("gradient sync: begin() called again before finish()");
  Plan& plan = plan_for(params);
  std::fill(plan.ready.begin(), plan.ready.end(), false);
  for (auto& b : plan.buckets) {
    b.ready = 0;
    b.launched = false;
    b.reduced.clear();
    b.carries = false;
    b.flat = torch::Tensor();
    b.pending = PendingCollective();
  }
  plan.next_launch = 0;
  report_ = Report();
  active_ = &plan;
}

void BucketedGradientSync::on_gradient(Plan& plan, size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ != &plan) return;  // outside begin..finish of this list
  const size_t b = plan.bucket_of[index];
  if (plan.ready[index] || plan.buckets[b].launched) {
    throw Error(
        "gradient sync: parameter " + std::to_string(index) +
        " received a second gradient between begin() and finish(); run one backward pass per begin()");
  }
  plan.ready[index] = true;
  ++plan.buckets[b].ready;
  while (plan.next_launch < plan.buckets.size() &&
         plan.buckets[plan.next_launch].ready == plan.buckets[plan.next_launch].params.size()) {
    launch(plan, plan.next_launch++);
    ++report_.launched_during_backward;
  }
}

void BucketedGradientSync::launch(Plan& plan, size_t index) {
  torch::NoGradGuard no_grad;
  auto& bucket = plan.buckets[index];
  bucket.launched = true;
  int64_t numel = 0;
  for (size_t i : bucket.params) {
    const auto& grad = plan.params[i].grad();
    if (!grad.defined()) continue;
    bucket.reduced.push_back(i);
    numel += grad.numel();
  }
  report_.buckets.push_back(bucket.reduced);
  report_.launch_ns.push_back(steady_ns());
  bucket.carries = index + 1 == plan.buckets.size() && carry_.has_value();
  if (bucket.reduced.empty() && !bucket.carries) return;  // no gradient in this bucket on any rank
  if (!bucket.buffer.defined()) {
    int64_t total = 1;  // room for a carried count
    for (size_t i : bucket.params) total += plan.params[i].numel();
    const auto& first = plan.params[bucket.params.front()];
    bucket.buffer =
        torch::empty({total}, torch::TensorOptions().dtype(first.scalar_type()).device(first.device()));
  }
  bucket.flat = bucket.buffer.narrow(0, 0, numel + (bucket.carries ? 1 : 0));
  // A gradient may already live in this buffer (finish() left it there; the stock optimizers'
  // zero_grad and autograd then work on it in place): at its place it needs no copy; elsewhere
  // (the set of defined gradients changed) it is taken out first, as the copies below may
  // overwrite it.
  const auto& storage = bucket.buffer.storage();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (gradient, its part of the buffer)
  copies.reserve(bucket.reduced.size());
  int64_t offset = 0;
  for (size_t i : bucket.reduced) {
    const auto& grad = plan.params[i].grad();
    auto target = bucket.flat.narrow(0, offset, grad.numel());
    offset += grad.numel();
    if (grad.data_ptr() == target.data_ptr()) continue;  // already in place
    copies.emplace_back(grad.storage().is_alias_of(storage) ? grad.clone() : grad, std::move(target));
  }
  for (auto& [grad, target] : copies) target.copy_(grad.reshape({-1}));
  if (bucket.carries) {
    bucket.flat.narrow(0, numel, 1).fill_(*carry_);
    carry_.reset();
  }
  bucket.pending = comm_->all_reduce_sum_async(bucket.flat);
}

void BucketedGradientSync::carry(double count) {
  std::lock_guard<std::mutex> lock(mu_);
  carry_ = count;
  carried_.reset();
}

std::optional<double> BucketedGradientSync::take_carried() {
  std::lock_guard<std::mutex> lock(mu_);
  carry_.reset();
  return std::exchange(carried_, std::nullopt);
}

void BucketedGradientSync::set_batch_share(int64_t local, int64_t global) {
  if (local < 0 || global <= 0 || local > global) {
    throw Error("gradient sync: batch share " + std::to_string(local) + " of " + std::to_string(global));
  }
  scale_ =
      static_cast<double>(comm_->world_size()) * static_cast<double>(local) / static_cast<double>(global);
}

void BucketedGradientSync::finish() {
  Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ == nullptr) throw Error("gradient sync: finish() without begin()");
    plan = active_;
    active_ = nullptr;  // hooks are off from here on, also when a wait below throws
    for (; plan->next_launch < plan->buckets.size(); ++plan->next_launch) launch(*plan, plan->next_launch);
  }
  prof::ScopedAnnotation span("gradient_sync_wait");
  torch::NoGradGuard no_grad;
  const double world = static_cast<double>(comm_->world_size());
  for (auto& bucket : plan->buckets) {
    if (bucket.reduced.empty() && !bucket.carries) continue;
    bucket.pending.wait();
    if (bucket.carries) {
      const double sum = bucket.flat[-1].item<double>();
      std::lock_guard<std::mutex> lock(mu_);
      carried_ = sum;
    }
    bucket.flat.div_(world);
    // The means stay in the buffer: each gradient becomes its part (DDP's
    // gradient_as_bucket_view), no copy back. An alias of the storage rather than an autograd
    // view: LibTorch's zero_grad() detaches gradients in place, which views refuse.
    int64_t offset = bucket.flat.storage_offset();
    for (size_t i : bucket.reduced) {
      auto& param = plan->params[i];
      const auto sizes = param.grad().sizes().vec();
      const int64_t n = param.grad().numel();
      auto alias = torch::empty({0}, bucket.flat.options());
      alias.set_(bucket.flat.storage(), offset, sizes, c10::contiguous_strides(sizes));
      param.mutable_grad() = alias;
      offset += n;
    }
    bucket.flat = torch::Tensor();
    bucket.pending = PendingCollective();
  }
}

}  // namespace rt::dist

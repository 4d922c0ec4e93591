#include "models/common/batch_slice.h"

#include "distributed/communicator.h"
#include "util/error.h"

namespace rt::models {
namespace {

thread_local BatchSlice t_slice;

bool slices(const torch::Tensor& like) {
  return t_slice.global > 0 && like.dim() > 0 && like.size(0) == t_slice.local &&
         t_slice.local < t_slice.global;
}

// The global batch's shape: `like` with dim 0 = global.
std::vector<int64_t> global_shape(const torch::Tensor& like) {
  std::vector<int64_t> shape = like.sizes().vec();
  shape[0] = t_slice.global;
  return shape;
}

}  // namespace

BatchSliceScope::BatchSliceScope(BatchSlice slice) : previous_(t_slice) {
  if (slice.offset < 0 || slice.local < 0 || slice.offset + slice.local > slice.global) {
    throw Error("BatchSliceScope: examples [" + std::to_string(slice.offset) + ", " +
                std::to_string(slice.offset + slice.local) + ") do not lie in a global batch of " +
                std::to_string(slice.global));
  }
  t_slice = slice;
}

BatchSliceScope::~BatchSliceScope() { t_slice = previous_; }

BatchSlice current_batch_slice() { return t_slice; }

torch::Tensor batch_rand_like(const torch::Tensor& like) {
  if (!slices(like)) return torch::rand_like(like);
  return torch::rand(global_shape(like), like.options()).narrow(0, t_slice.offset, t_slice.local);
}

torch::Tensor batch_randn_like(const torch::Tensor& like) {
  if (!slices(like)) return torch::randn_like(like);
  return torch::randn(global_shape(like), like.options()).narrow(0, t_slice.offset, t_slice.local);
}

torch::Tensor batch_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  TORCH_CHECK(p > 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  const auto keep = (batch_rand_like(x) >= p).to(x.scalar_type());
  return x * keep * (1.0 / (1.0 - p));
}

bool batch_slice_distributed() {
  return t_slice.global > 0 && t_slice.comm != nullptr && t_slice.comm->world_size() > 1;
}

struct PendingGlobalMeans::State {
  torch::Tensor local_means;  // shape and dtype of the result
  torch::Tensor weighted;     // [Σ n_r·mean_r (K), Σ n_r]: the all-reduce's buffer
  dist::PendingCollective work;
  torch::Tensor result;  // once read
};

PendingGlobalMeans batch_global_means_async(const torch::Tensor& local_means) {
  PendingGlobalMeans p;
  p.state_ = std::make_shared<PendingGlobalMeans::State>();
  p.state_->local_means = local_means;
  if (!batch_slice_distributed()) {
    p.state_->result = local_means;
    return p;
  }
  torch::NoGradGuard no_grad;
  // Weighted by this rank's examples: Σ_r n_r·mean_r / Σ_r n_r.
  p.state_->weighted =
      torch::cat(
          {local_means.reshape({-1}).to(torch::kDouble) * static_cast<double>(t_slice.local),
           torch::full({1}, static_cast<double>(t_slice.local), torch::kDouble).to(local_means.device())})
          .contiguous();
  p.state_->work = t_slice.comm->all_reduce_sum_async(p.state_->weighted);
  return p;
}

torch::Tensor PendingGlobalMeans::get() const {
  if (!state_) throw Error("PendingGlobalMeans::get: nothing was started");
  State& s = *state_;
  if (!s.result.defined()) {
    s.work.wait();
    torch::NoGradGuard no_grad;
    const int64_t k = s.local_means.numel();
    s.result =
        (s.weighted.narrow(0, 0, k) / s.weighted[k]).to(s.local_means.scalar_type()).view_as(s.local_means);
  }
  return s.result;
}

torch::Tensor batch_global_means(const torch::Tensor& local_means) {
  return batch_global_means_async(local_means).get();
}

torch::Tensor batch_global_mean(const torch::Tensor& t) {
  if (!batch_slice_distributed()) return t.mean();
  torch::NoGradGuard no_grad;
  return batch_global_means(t.mean().reshape({1}))[0];
}

int64_t batch_row_offset(int64_t rows) {
  if (t_slice.global == 0 || t_slice.local <= 0 || rows % t_slice.local != 0) return 0;
  return t_slice.offset * (rows / t_slice.local);
}

}  // namespace rt::models

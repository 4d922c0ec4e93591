#include "distributed/gradient_sync.h"

#include "distributed/bucketed_gradient_sync.h"

namespace rt {

void SingleProcessSync::begin(const std::vector<torch::Tensor>& /*params*/) {}
void SingleProcessSync::finish() {}

namespace {
thread_local BackwardHooks* t_backward_hooks = nullptr;
}  // namespace

BackwardHooksScope::BackwardHooksScope(BackwardHooks* hooks) : previous_(t_backward_hooks) {
  t_backward_hooks = hooks;
}
BackwardHooksScope::~BackwardHooksScope() { t_backward_hooks = previous_; }

void backward_with_sync(const torch::Tensor& loss, const std::vector<torch::Tensor>& params,
                        GradientSync& sync) {
  BackwardHooks* hooks = t_backward_hooks;
  sync.begin(params);
  double scale = sync.loss_scale();
  if (hooks) {
    hooks->before_backward();
    scale *= hooks->loss_scale();
  }
  if (scale == 1.0) {
    loss.backward();
  } else {
    (loss * scale).backward();
  }
  sync.finish();
  if (hooks) hooks->after_backward(params);
}

GradientSync& single_process_sync() {
  static SingleProcessSync sync;
  return sync;
}

std::shared_ptr<GradientSync> make_gradient_sync(std::shared_ptr<dist::Communicator> comm,
                                                 int64_t first_bucket_bytes, int64_t bucket_bytes) {
  if (!comm || comm->world_size() == 1) return std::make_shared<SingleProcessSync>();
  return std::make_shared<dist::BucketedGradientSync>(std::move(comm),
                                                      dist::BucketOptions{first_bucket_bytes, bucket_bytes});
}

}  // namespace rt

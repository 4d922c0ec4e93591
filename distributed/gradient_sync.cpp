#include "distributed/gradient_sync.h"

#include "distributed/bucketed_gradient_sync.h"

namespace rt {

void SingleProcessSync::begin(const std::vector<torch::Tensor>& /*params*/) {}
void SingleProcessSync::finish() {}

void backward_with_sync(const torch::Tensor& loss, const std::vector<torch::Tensor>& params, GradientSync& sync) {
  sync.begin(params);
  const double scale = sync.loss_scale();
  if (scale == 1.0) {
    loss.backward();
  } else {
    (loss * scale).backward();
  }
  sync.finish();
}

GradientSync& single_process_sync() {
  static SingleProcessSync sync;
  return sync;
}

std::shared_ptr<GradientSync> make_gradient_sync(std::shared_ptr<dist::Communicator> comm,
                                                 int64_t first_bucket_bytes, int64_t bucket_bytes) {
  if (!comm || comm->world_size() == 1) return std::make_shared<SingleProcessSync>();
  return std::make_shared<dist::BucketedGradientSync>(std::move(comm), dist::BucketOptions{first_bucket_bytes, bucket_bytes});
}

}  // namespace rt

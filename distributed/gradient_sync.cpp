#include "distributed/gradient_sync.h"

namespace rt {

void SingleProcessSync::begin(const std::vector<torch::Tensor>& /*params*/) {}
void SingleProcessSync::finish() {}

void backward_with_sync(const torch::Tensor& loss, const std::vector<torch::Tensor>& params, GradientSync& sync) {
  sync.begin(params);
  loss.backward();
  sync.finish();
}

GradientSync& single_process_sync() {
  static SingleProcessSync sync;
  return sync;
}

}  // namespace rt

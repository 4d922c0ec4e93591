// SyncBatchNorm for data-parallel training, with torch.nn.SyncBatchNorm's semantics
// (torch/nn/modules/_functions.py): batch statistics over every rank's rows, so N ranks × B
// rows normalise exactly as one process with N·B rows.
//
//   forward:  one all-reduce of [Σx (C), Σx² (C), n (1)] in float64 → the global mean and
//             biased variance (the equivalent of torch's all_gather + Chan's combination);
//   backward: one all-reduce of [Σdy (C), Σdy·x̂ (C)] → dx = invstd·(dy − Σdy/N − x̂·Σdy·x̂/N).
//
// Running statistics are updated with the global mean and the unbiased global variance
// (var·N/(N−1)). Weight and bias gradients (affine norms) stay local, as in torch: the gradient
// sync averages them with the other parameters. Only training synchronises; evaluation uses the
// running statistics, or the local batch's when the norm tracks none (torch: need_sync =
// training). One process: plain batch norm, no collective.
//
// REQUIRES: every rank calls it for the same norms in the same order (a rank without rows still
// joins, contributing zeros); `comm` outlives the autograd graph.
#pragma once

#include <torch/torch.h>

#include "distributed/communicator.h"

namespace rt::dist {

struct BatchStats {
  torch::Tensor mean;  // [C] float64: global batch mean
  torch::Tensor var;   // [C] float64: global biased variance
  double count = 0;    // rows over all ranks
};

// (x − mean)/sqrt(var + eps) for the columns of x [N, C] (float/double, any device), with the
// statistics of every rank's rows; differentiable in x. `stats`, when given, receives them.
torch::Tensor sync_batch_norm_rows(const torch::Tensor& x, double eps, Communicator& comm,
                                   BatchStats* stats = nullptr);

// torch::nn::BatchNorm1d `norm` applied to the rows x [N, C] (statistics per column over all
// rows) with SyncBatchNorm semantics as above; on one process, or in eval, exactly norm(x).
// Throws c10::Error like torch when training with a single row in total.
torch::Tensor sync_batch_norm(const torch::Tensor& x, torch::nn::BatchNorm1dImpl& norm, Communicator& comm);

// Updates norm's running statistics (and num_batches_tracked) from batch statistics over
// `count` rows, as torch's batch norm does in training: momentum, or a cumulative average when
// momentum is unset; the variance unbiased (var·count/(count−1)).
void update_running_stats(torch::nn::BatchNorm1dImpl& norm, const torch::Tensor& mean,
                          const torch::Tensor& biased_var, double count);

// A BatchNorm1d that, while `sync` holds a communicator of more than one rank and the module is
// training, normalises with the statistics of every rank's batch (sync_batch_norm): input
// [N, C] or [N, C, L], statistics per channel over N (and L). Without `sync` (one process, or
// train.distributed.batch_norm = "local") it is exactly `norm`.
// It registers norm's weight, bias, running_mean, running_var and num_batches_tracked as its
// own (the same tensors), so checkpoints name them as they name a BatchNorm1d's. (Deriving from
// BatchNorm1dImpl would be simpler, but LibTorch 1.13 does not export the base's pretty_print,
// which a derived class's construction vtables need.)
class SyncableBatchNorm1dImpl : public torch::nn::Cloneable<SyncableBatchNorm1dImpl> {
 public:
  explicit SyncableBatchNorm1dImpl(const torch::nn::BatchNorm1dOptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);
  void pretty_print(std::ostream& stream) const override;

  torch::nn::BatchNorm1dOptions options;
  torch::nn::BatchNorm1d norm{nullptr};  // not a child: its tensors are registered here
  std::shared_ptr<Communicator> sync;
};
TORCH_MODULE(SyncableBatchNorm1d);

// Sets `sync` on every SyncableBatchNorm1d in `module` (nullptr: each rank its own statistics).
void set_batch_norm_sync(torch::nn::Module& module, const std::shared_ptr<Communicator>& comm);

// Every buffer of `module` (BatchNorm running statistics among them) becomes rank 0's: with
// per-rank BatchNorm statistics (train.distributed.batch_norm = "local") the ranks' running
// statistics drift apart; DDP broadcasts rank 0's buffers before every forward
// (broadcast_buffers=True, torch/nn/parallel/distributed.py); the trainer does it before each
// validation, the only place running statistics are read (checkpoints hold rank 0's).
// One process: nothing.
void broadcast_buffers(Communicator& comm, torch::nn::Module& module);

}  // namespace rt::dist

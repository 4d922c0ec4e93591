// The seam between a family's backward pass and its optimizer step, where data-parallel
// training makes gradients global. The trainer gives every family one GradientSync (through
// FamilyContext, model_family.h); a family brackets each backward pass with it:
//
//   sync.begin(params);   // the parameters this backward produces gradients for, and that the
//                         // optimizer about to step owns (RAVE: the generator's or the
//                         // discriminator's, whichever steps in this iteration)
//   loss.backward();      // a data-parallel implementation launches bucketed asynchronous
//                         // all-reduces from gradient hooks while backward is still running
//   sync.finish();        // returns once every defined gradient of `params` is the mean over
//                         // all ranks; parameters whose gradient backward left undefined stay
//                         // undefined (a frozen encoder must not move by Adam's momentum)
//   optimizer.step();
//
// One process: both calls do nothing (SingleProcessSync). Several: BucketedGradientSync
// (bucketed_gradient_sync.h); make_gradient_sync picks. REQUIRES: begin/finish are paired,
// called on the training thread, with the same `params` on every rank.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace rt {

namespace dist {
class Communicator;
}

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin(const std::vector<torch::Tensor>& params) = 0;
  virtual void finish() = 0;
  // This rank holds `local` of the step's `global` examples (the trainer sets it before every
  // step). backward_with_sync then scales the rank's loss by world · local/global, so that the
  // synchronised gradient, the mean over ranks, is the gradient of the loss's mean over the
  // global batch, also when the ranks' slices differ in size (a multi-session group batch that
  // does not divide evenly). Scaling the loss rather than the gradients keeps every rank's
  // output gradients on one scale, which SyncBatchNorm's backward sums across ranks. Unset or
  // even slices: 1, the plain mean over ranks as DDP. One process: ignored.
  virtual void set_batch_share(int64_t /*local*/, int64_t /*global*/) {}
  virtual double loss_scale() const { return 1.0; }
  // A small per-step count (the trainer's stop flag: 1 on a rank that got a stop signal) to be
  // summed over ranks by the next begin..finish, inside its last bucket's all-reduce rather
  // than in a collective of its own. take_carried() after finish() returns the sum, or nullopt
  // when no finish() carried it (one process; a step without gradient synchronisation), and
  // drops a count not yet carried. REQUIRES: every rank carries in the same steps; the count
  // is an integer exact in the gradients' dtype (float32: below 2^24 over all ranks).
  virtual void carry(double /*count*/) {}
  virtual std::optional<double> take_carried() { return std::nullopt; }
};

// One process: nothing to synchronise.
class SingleProcessSync final : public GradientSync {
 public:
  void begin(const std::vector<torch::Tensor>& params) override;
  void finish() override;
};

// What mixed-precision training (trainer/precision.h) does around every backward pass: it
// leaves autocast for the backward pass (PyTorch's AMP recipe: autocast covers the forward pass
// and the loss only), multiplies the loss by a gradient scale, and after the synchronisation
// divides the gradients by it, dropping those of a pass whose gradients overflowed (the
// optimizers skip parameters without a gradient, as torch.cuda.amp.GradScaler skips step()).
class BackwardHooks {
 public:
  virtual ~BackwardHooks() = default;
  virtual double loss_scale() const = 0;
  virtual void before_backward() = 0;
  // After sync.finish(): the gradients of `params` are the synchronised ones.
  virtual void after_backward(const std::vector<torch::Tensor>& params) = 0;
};
// Installs `hooks` for backward_with_sync on this thread while alive (null: none).
class BackwardHooksScope {
 public:
  explicit BackwardHooksScope(BackwardHooks* hooks);
  ~BackwardHooksScope();
  BackwardHooksScope(const BackwardHooksScope&) = delete;
  BackwardHooksScope& operator=(const BackwardHooksScope&) = delete;

 private:
  BackwardHooks* previous_;
};

// `sync.begin(params); loss.backward(); sync.finish();` — the bracket every family uses (with
// this thread's BackwardHooks around backward, when installed).
void backward_with_sync(const torch::Tensor& loss, const std::vector<torch::Tensor>& params,
                        GradientSync& sync);

// The process-wide single-process instance (what the trainer hands out without a process group).
GradientSync& single_process_sync();

// The sync for `comm`'s job: a SingleProcessSync for one process, a BucketedGradientSync
// otherwise, its buckets capped at these sizes (DDP's defaults: 1 MiB for the first bucket,
// 25 MiB for the others; train.distributed.first_bucket_mb / bucket_mb).
std::shared_ptr<GradientSync> make_gradient_sync(std::shared_ptr<dist::Communicator> comm,
                                                 int64_t first_bucket_bytes = int64_t{1} << 20,
                                                 int64_t bucket_bytes = int64_t{25} << 20);

}  // namespace rt

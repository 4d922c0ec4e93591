// Data-parallel GradientSync (gradient_sync.h): gradients are averaged over ranks in buckets
// whose all-reduces start from autograd hooks while backward is still running — the design
// of torch's DDP Reducer (torch/csrc/distributed/c10d/reducer.cpp), with buckets of our own
// (Debian 12's libtorch-dev lacks headers reducer.hpp needs).
//
// begin(params), the first time it sees a parameter list, makes that list's plan:
//  - buckets over the parameters that require grad, in reverse order (backward produces the
//    last layers' gradients first), closed once they reach first_bucket_bytes (the first) or
//    bucket_bytes (the others) — DDP's 1 MiB / 25 MiB — or when the dtype or device changes;
//  - a post hook on every parameter's gradient accumulator (autograd AccumulateGrad node,
//    kept alive here as DDP does: the parameter only holds it weakly).
// Plans are kept per list (RAVE's generator and discriminator steps each have one). A hook
// acts only between begin and finish of its own list; elsewhere (validation, the other
// optimizer's backward) it returns at once.
//
// During backward, when every gradient of bucket k has been accumulated and buckets 0..k−1 are
// launched, bucket k's gradients are copied into its flat buffer and its all-reduce (SUM)
// starts — from the hook, so communication overlaps the rest of backward. finish() launches
// the buckets that did not complete (some parameter got no gradient: only the defined
// gradients are reduced, packed together), waits for every all-reduce and divides by the world
// size; each .grad then aliases its part of the bucket (DDP's gradient_as_bucket_view: no
// copy back; a gradient still there at the next launch, as zero_grad leaves it, is not copied
// in either). A parameter without gradient stays undefined on every rank. Its bucket, and
// every later one, waits for finish() (so unused parameters cost overlap only when they sit
// near the output; RAVE's frozen encoder sits at the input).
//
// carry(count): the last bucket's buffer gets one more element, the count, summed with the
// gradients (read back before they are divided by the world size): the trainer's per-step
// stop flag costs no collective of its own. A last bucket without gradients still launches,
// with the count alone.
//
// REQUIRES: one backward pass between begin and finish (a second gradient for a parameter
// throws rt::Error); every rank runs the same phase, so the same gradients are defined on
// every rank; begin/finish on the training thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"

namespace rt::dist {

struct BucketOptions {
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_bytes = int64_t{25} << 20;
};

class BucketedGradientSync final : public GradientSync {
 public:
  explicit BucketedGradientSync(std::shared_ptr<Communicator> comm, BucketOptions options = {});
  ~BucketedGradientSync() override;  // removes every hook it added
  BucketedGradientSync(const BucketedGradientSync&) = delete;
  BucketedGradientSync& operator=(const BucketedGradientSync&) = delete;

  void begin(const std::vector<torch::Tensor>& params) override;
  void finish() override;
  void set_batch_share(int64_t local, int64_t global) override;
  double loss_scale() const override { return scale_; }
  void carry(double count) override;
  std::optional<double> take_carried() override;

  // What the last begin..finish did, for tests and overlap evidence: per bucket (in launch
  // order) the parameter indices it holds and the steady-clock time its all-reduce started,
  // and how many buckets started from hooks (before finish()).
  struct Report {
    std::vector<std::vector<size_t>> buckets;
    std::vector<int64_t> launch_ns;
    size_t launched_during_backward = 0;
  };
  const Report& last_report() const { return report_; }

 private:
  struct Plan;
  Plan& plan_for(const std::vector<torch::Tensor>& params);
  void on_gradient(Plan& plan, size_t index);  // the hook
  void launch(Plan& plan, size_t bucket);      // REQUIRES mu_ held

  std::shared_ptr<Communicator> comm_;
  BucketOptions options_;
  std::mutex mu_;  // hooks may run on autograd device threads
  std::vector<std::unique_ptr<Plan>> plans_;
  Plan* active_ = nullptr;
  double scale_ = 1.0;             // loss_scale(): world · local / global (1 for even slices)
  std::optional<double> carry_;    // carry(): to go into the next last bucket
  std::optional<double> carried_;  // its sum over ranks, once a finish() read it
  Report report_;
};

}  // namespace rt::dist

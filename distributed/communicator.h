// What the rest of the program needs from a process group: its rank and size and a handful of
// collectives. Every rank must call the same collectives in the same order with tensors of the
// same shapes and dtypes (c10d's rule).
//
// One process: LocalCommunicator, where every collective is the identity and costs nothing.
// Several: the c10d implementation (process_group.h), where
//  - every call is bounded by the group's timeout (train.distributed.timeout_s) and turns a
//    backend or store failure into rt::Error naming the operation and, where it can be told,
//    the rank that was lost ("rank 1 stopped answering during gloo:all_reduce (Connection closed
//    by peer [127.0.0.1]:2484); stopping"); after a failure the group is unusable and every
//    later call throws at once;
//  - each collective appears in an open trace window as a span named as PyTorch's profiler
//    names it ("gloo:all_reduce", "nccl:broadcast", ...) with Kineto's communication args
//    ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
//    "In msg size"), on a row of its own: the work runs on the backend's threads.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace rt::dist {

// A collective in flight. wait() returns once it is complete (the tensors hold the result)
// and throws rt::Error as described above. Waiting twice is allowed; an empty handle (one
// process) is complete.
class PendingCollective {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void wait() = 0;
  };
  PendingCollective() = default;
  explicit PendingCollective(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  void wait() {
    if (impl_) impl_->wait();
  }

 private:
  std::shared_ptr<Impl> impl_;
};

// Where a job's communication time went, since the communicator was made.
struct CommStats {
  int64_t collectives = 0;
  int64_t bytes = 0;          // input bytes of every collective
  double busy_seconds = 0.0;  // collectives executing on the backend (may overlap compute)
  double wait_seconds = 0.0;  // the calling thread blocked in wait(): communication not hidden
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "gloo", "nccl", or "none" for one process (the trace's distributedInfo.backend).
  virtual std::string backend() const = 0;

  // In place: `tensor` becomes the elementwise sum over ranks. REQUIRES: contiguous.
  virtual void all_reduce_sum(torch::Tensor& tensor) = 0;
  // The same, started now and finished by the handle's wait(); `tensor` must stay alive and
  // untouched until then. Collectives start in call order.
  virtual PendingCollective all_reduce_sum_async(const torch::Tensor& tensor) = 0;
  // In place: every rank's `tensors` become root's. REQUIRES: contiguous.
  virtual void broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
  // Every rank's `tensor`, in rank order (same shape on every rank).
  virtual std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  virtual CommStats stats() const { return {}; }
  // How the calling thread waits for a collective: "active" (polls, yielding its core) or
  // "passive" (sleeps until woken); train.distributed.wait, process_group.h.
  virtual std::string wait_policy() const { return "passive"; }
  // The scheduling policy of the backend's network event-loop thread (Gloo: "SCHED_BATCH" under
  // train.distributed.gloo_loop = "batch", process_group.h), or "" when it has none.
  virtual std::string event_loop_scheduling() const { return ""; }
};

// One process: rank 0 of 1, every collective the identity.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "none"; }
  void all_reduce_sum(torch::Tensor&) override {}
  PendingCollective all_reduce_sum_async(const torch::Tensor&) override { return {}; }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) override { return {tensor}; }
  void barrier() override {}
};

// Rank `root`'s `text` on every rank (two broadcasts: length, bytes).
std::string broadcast_text(Communicator& comm, const std::string& text, int root = 0);

// Stops with rt::Error when `value` is not the same on every rank: "mismatched <what> across
// ranks: rank 1 differs from rank 0; first difference at line 12: rank 0 has 'seed = 1', rank 1
// has 'seed = 2'; …". Compares 64-bit hashes (one all_gather), so it is cheap for long values
// such as a resolved config; on a mismatch the first differing rank's text is broadcast so
// that every rank reports the same line.
void check_same_on_all_ranks(Communicator& comm, const std::string& what, const std::string& value);

}  // namespace rt::dist

// The Communicator over a c10d process group (made by join_process_group, process_group.h):
// error translation, timeouts and trace spans as communicator.h describes.
//
// Lost ranks are told apart by liveness: every rank registers its host name and pid when the
// group forms; when a collective fails, peers on this host whose process has exited (or is a
// zombie) are the lost ones. Peers on other hosts cannot be checked this way; the message then
// names the failing operation and the backend's reason (e.g. the peer's address).
//
// Small all-reduces (Gloo): Gloo's all-reduce is a ring that splits even a 9-element tensor into
// 2 × world segments and moves each in a transfer of three messages (send-ready, receive-ready,
// data): 4·(world − 1) transfers per rank, and on a busy host every message wakes a Gloo thread.
// An all-gather is world − 1 transfers. So when the other ranks' copies are small
// ((world − 1) × the tensor's bytes ≤ train.distributed.small_all_reduce_kib), all_reduce_sum
// gathers every rank's tensor and sums them on each rank in rank order: every rank gets the
// same sum, bit for bit, and for 2 ranks the same as the ring (a + b = b + a), with the same
// bytes sent. Larger tensors keep the ring, which sends 2·(world − 1)/world of the tensor per
// rank instead of world − 1 times it and pipelines its sums with its transfers. The trace shows
// what ran: a gloo:all_gather span (In msg nelems n, Out msg nelems world·n). BENCHMARKS.md
// "Data-parallel training" measures both.
//
// Trace spans: a collective's span runs from when it starts executing to when it completes.
// Collectives execute in issue order (one backend thread or stream), so the start is the later
// of its launch and the previous collective's completion; the span is recorded by a completion
// callback, and only when a trace window was open at launch.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "distributed/communicator.h"
#include "util/torch_compat.h"

#if RT_C10D_HAS_BACKEND
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace rt::dist {

#if RT_C10D_HAS_BACKEND
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

// How long an active wait (train.distributed.wait, process_group.h) polls before it sleeps.
inline constexpr std::chrono::milliseconds kActiveWaitLimit{50};

struct PeerInfo {
  std::string host;
  int64_t pid = 0;
};

class C10dCommunicator final : public Communicator {
 public:
  // `backend` is "gloo" or "nccl" (span prefix); peers[r] describes rank r. With `staging` (the
  // rank's CUDA device under NCCL, which reduces device tensors only), tensors on another
  // device are copied there for the collective and the result copied back. `active_wait`:
  // wait() polls before it sleeps (train.distributed.wait, process_group.h).
  // `gather_sum_bytes`: Gloo all-reduces whose other ranks' data come to at most this many bytes
  // ((world − 1) × the tensor's bytes) run as an all-gather and a local sum (see below); 0: never.
  C10dCommunicator(c10::intrusive_ptr<C10dBackend> group, std::string backend, int rank, int world_size,
                   std::chrono::milliseconds timeout, std::vector<PeerInfo> peers,
                   c10::optional<torch::Device> staging = c10::nullopt, bool active_wait = false,
                   int64_t gather_sum_bytes = 0, std::string event_loop_scheduling = "");
  ~C10dCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return backend_; }
  void all_reduce_sum(torch::Tensor& tensor) override;
  PendingCollective all_reduce_sum_async(const torch::Tensor& tensor) override;
  void broadcast(std::vector<torch::Tensor>& tensors, int root) override;
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) override;
  void barrier() override;
  CommStats stats() const override;
  std::string wait_policy() const override { return active_wait_ ? "active" : "passive"; }
  std::string event_loop_scheduling() const override { return event_loop_scheduling_; }

  // Waits for `work` of operation `op` ("gloo:all_reduce") within the timeout; throws the
  // translated rt::Error and marks the group failed when it fails.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& op);

 private:
  struct Collective;  // what a span needs to know about one call
  // Starts `start()` (which issues the backend call) as operation `collective` (Kineto's
  // "Collective name": allreduce, broadcast, allgather, barrier) on `tensor`.
  template <class Start>
  c10::intrusive_ptr<c10d::Work> launch(const char* op, const char* collective, const torch::Tensor& tensor,
                                        int64_t out_nelems, const Start& start);
  // True when an all-reduce of `tensor` runs as an all-gather and a local sum.
  bool gathers(const torch::Tensor& tensor) const;
  void check_usable() const;
  [[noreturn]] void fail(const std::string& op, const std::exception& error);
  std::string span_name(const char* op) const { return backend_ + ":" + op; }
  // `t` where the backend can reduce it: itself, or a copy on the staging device.
  torch::Tensor staged(const torch::Tensor& t) const;

  c10::intrusive_ptr<C10dBackend> group_;
  std::string backend_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  std::vector<PeerInfo> peers_;
  c10::optional<torch::Device> staging_;
  bool active_wait_;
  int64_t gather_sum_bytes_;
  std::string event_loop_scheduling_;
  std::string host_;
  // Completion time of the last collective whose span was recorded (shared with callbacks
  // that may run after this object is gone).
  std::shared_ptr<std::atomic<int64_t>> last_end_ns_;
  // CommStats, in ns and bytes (the busy time is added by completion callbacks).
  struct Totals {
    std::atomic<int64_t> collectives{0}, bytes{0}, busy_ns{0}, wait_ns{0};
  };
  std::shared_ptr<Totals> totals_;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;
};

}  // namespace rt::dist

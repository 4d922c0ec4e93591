#include "distributed/c10d_communicator.h"

#include <ATen/record_function.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <thread>

#include "profiling/annotation.h"
#include "profiling/trace/recorded_span.h"
#include "util/clock.h"
#include "util/error.h"

namespace rt::dist {
namespace {

// Work::wait's own bound, past the backend's: the backend's timeout error (naming what timed
// out) normally comes first; this one only guards against a backend that never answers.
constexpr std::chrono::milliseconds kWaitGrace{5000};
// broadcast(): tensors are flattened into buffers of at most this size (DDP's
// _sync_module_states uses 250 MB).
constexpr int64_t kBroadcastBufferBytes = int64_t{256} << 20;

std::string this_host() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The first line of an exception's text, without c10's backtrace and gloo's source location
// ("[./gloo/transport/tcp/pair.cc:598] Connection closed by peer ..." → "Connection closed by
// peer ...").
std::string short_reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find("] ");
    if (close != std::string::npos) text = text.substr(close + 2);
  }
  return text;
}

// True when process `pid` of this host has exited: gone, or a zombie not yet reaped.
bool process_gone(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

bool contains(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

}  // namespace

struct C10dCommunicator::Collective {
  std::string name;
  const char* collective;
  int64_t in_nelems;
  int64_t out_nelems;
  int64_t element_size;
  std::string dtype;       // Kineto's "dtype": c10 ScalarType name ("Float")
  std::string input_type;  // TensorBoard's "Input type": the dtype's C name ("float")
};

C10dCommunicator::C10dCommunicator(c10::intrusive_ptr<C10dBackend> group, std::string backend, int rank,
                                   int world_size, std::chrono::milliseconds timeout,
                                   std::vector<PeerInfo> peers, c10::optional<torch::Device> staging,
                                   bool active_wait, int64_t gather_sum_bytes,
                                   std::string event_loop_scheduling)
    : group_(std::move(group)),
      backend_(std::move(backend)),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout),
      peers_(std::move(peers)),
      staging_(staging),
      active_wait_(active_wait),
      gather_sum_bytes_(gather_sum_bytes),
      event_loop_scheduling_(std::move(event_loop_scheduling)),
      host_(this_host()),
      last_end_ns_(std::make_shared<std::atomic<int64_t>>(0)),
      totals_(std::make_shared<Totals>()) {}

C10dCommunicator::~C10dCommunicator() = default;

torch::Tensor C10dCommunicator::staged(const torch::Tensor& t) const {
  if (!staging_ || !t.defined() || t.device() == *staging_) return t;
  return t.to(*staging_).contiguous();
}

template <class Start>
c10::intrusive_ptr<c10d::Work> C10dCommunicator::launch(const char* op, const char* collective,
                                                        const torch::Tensor& tensor, int64_t out_nelems,
                                                        const Start& start) {
  check_usable();
  const std::string name = span_name(op);
  c10::intrusive_ptr<c10d::Work> work;
  try {
    // The backend's own RecordFunction span would carry no args; ours replaces it.
    at::DisableRecordFunctionGuard no_backend_span;
    work = start();
  } catch (const std::exception& e) {
    fail(name, e);
  }
  const int64_t in_bytes =
      tensor.defined() ? tensor.numel() * static_cast<int64_t>(tensor.element_size()) : 0;
  totals_->collectives += 1;
  totals_->bytes += in_bytes;
  // The span (and the busy time) runs from when the collective starts executing to its
  // completion; collectives execute in issue order, so it starts at the later of its launch and
  // the previous one's completion. Recorded only when a trace window was open at launch.
  std::shared_ptr<Collective> info;
  if (prof::annotations_recording()) {
    info = std::make_shared<Collective>();
    info->name = name;
    info->collective = collective;
    info->in_nelems = tensor.defined() ? tensor.numel() : 0;
    info->out_nelems = out_nelems;
    info->element_size = tensor.defined() ? static_cast<int64_t>(tensor.element_size()) : 0;
    info->dtype = tensor.defined() ? c10::toString(tensor.scalar_type()) : "";
    info->input_type = tensor.defined() ? std::string(tensor.dtype().name()) : "";
  }
  const int64_t launch_ns = steady_ns();
  const int group_size = world_size_;
  auto last_end = last_end_ns_;
  auto totals = totals_;
  work->getFuture()->addCallback([info, launch_ns, group_size, last_end, totals](c10::ivalue::Future&) {
    const int64_t end = steady_ns();
    const int64_t start = std::max(launch_ns, last_end->exchange(end));
    totals->busy_ns += end - start;
    if (!info) return;
    prof::Activity span;
    span.kind = prof::ActivityKind::kUserAnnotation;
    span.name = info->name;
    span.start_ns = start;
    span.end_ns = end;
    if (!info->input_type.empty()) {
      span.input_dims = {{info->in_nelems}};
      span.input_types = {info->input_type};
    }
    span.args = {{"Collective name", info->collective},
                 {"dtype", info->dtype},
                 {"In msg nelems", info->in_nelems},
                 {"Out msg nelems", info->out_nelems},
                 {"Group size", group_size},
                 {"In msg size", info->in_nelems * info->element_size}};
    prof::record_span(info->name.substr(0, info->name.find(':')), std::move(span));
  });
  return work;
}

void C10dCommunicator::check_usable() const {
  if (!failed_.load()) return;
  std::lock_guard<std::mutex> lock(failure_mu_);
  throw Error(failure_);
}

void C10dCommunicator::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& op) {
  check_usable();
  const int64_t t0 = steady_ns();
  try {
    if (active_wait_) {
      // Poll, giving the core to any other runnable thread (the backend's own) between polls;
      // past the limit, sleep as a passive wait does.
      const int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(kActiveWaitLimit).count();
      while (!work->isCompleted() && steady_ns() - t0 < limit) sched_yield();
    }
    work->wait(timeout_ + kWaitGrace);
  } catch (const std::exception& e) {
    totals_->wait_ns += steady_ns() - t0;
    fail(op, e);
  }
  totals_->wait_ns += steady_ns() - t0;
}

CommStats C10dCommunicator::stats() const {
  CommStats s;
  s.collectives = totals_->collectives.load();
  s.bytes = totals_->bytes.load();
  s.busy_seconds = static_cast<double>(totals_->busy_ns.load()) * 1e-9;
  s.wait_seconds = static_cast<double>(totals_->wait_ns.load()) * 1e-9;
  return s;
}

void C10dCommunicator::fail(const std::string& op, const std::exception& error) {
  const std::string reason = short_reason(error);
  // A lost peer's process may still be exiting when its connection drops: look for a while.
  std::vector<int> lost;
  for (int attempt = 0; attempt < 10 && lost.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (size_t r = 0; r < peers_.size(); ++r) {
      if (static_cast<int>(r) != rank_ && peers_[r].host == host_ && peers_[r].pid > 0 &&
          process_gone(peers_[r].pid)) {
        lost.push_back(static_cast<int>(r));
      }
    }
  }
  std::string message;
  if (!lost.empty()) {
    std::string who = lost.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < lost.size(); ++i) who += (i ? ", " : "") + std::to_string(lost[i]);
    message = who + " stopped answering during " + op + " (" + reason + "); stopping";
  } else if (contains(reason, "closed by peer") || contains(reason, "reset by peer")) {
    message = "a rank on another host stopped answering during " + op + " (" + reason + "); stopping";
  } else if (contains(reason, "imed out") || contains(reason, "Timeout")) {
    message = "no answer from the other ranks within " + std::to_string(timeout_.count() / 1000) +
              " s during " + op + " (" + reason + "): a rank is hung, overloaded or unreachable " +
              "(train.distributed.timeout_s bounds the wait); stopping";
  } else {
    message = op + " failed on rank " + std::to_string(rank_) + " (" + reason + "); stopping";
  }
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    if (!failed_.load()) failure_ = message;
    failed_.store(true);
  }
  throw Error(message);
}

bool C10dCommunicator::gathers(const torch::Tensor& tensor) const {
  if (backend_ != "gloo" || staging_ || gather_sum_bytes_ <= 0 || world_size_ < 2) return false;
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes <= gather_sum_bytes_ / (world_size_ - 1);
}

PendingCollective C10dCommunicator::all_reduce_sum_async(const torch::Tensor& tensor) {
  if (!tensor.is_contiguous()) throw Error("all_reduce_sum: the tensor must be contiguous");
  if (gathers(tensor)) {
    // Every rank's copy, then their sum in rank order, into `tensor` when waited for.
    class Gathered final : public PendingCollective::Impl {
     public:
      Gathered(C10dCommunicator* comm, c10::intrusive_ptr<c10d::Work> work, torch::Tensor target,
               std::shared_ptr<std::vector<std::vector<torch::Tensor>>> copies)
          : comm_(comm), work_(std::move(work)), target_(std::move(target)), copies_(std::move(copies)) {}
      void wait() override {
        if (done_) return;
        comm_->wait(work_, comm_->span_name("all_gather"));
        torch::NoGradGuard no_grad;
        const auto& copies = (*copies_)[0];
        at::add_out(target_, copies[0], copies[1]);
        for (size_t r = 2; r < copies.size(); ++r) target_.add_(copies[r]);
        copies_.reset();
        done_ = true;
      }

     private:
      C10dCommunicator* comm_;
      c10::intrusive_ptr<c10d::Work> work_;
      torch::Tensor target_;
      std::shared_ptr<std::vector<std::vector<torch::Tensor>>> copies_;
      bool done_ = false;
    };
    auto copies = std::make_shared<std::vector<std::vector<torch::Tensor>>>(1);
    for (int r = 0; r < world_size_; ++r) (*copies)[0].push_back(torch::empty_like(tensor));
    auto work = launch("all_gather", "allgather", tensor, tensor.numel() * world_size_, [&] {
      std::vector<torch::Tensor> inputs{tensor};
      return group_->allgather(*copies, inputs);
    });
    return PendingCollective(std::make_shared<Gathered>(this, std::move(work), tensor, std::move(copies)));
  }
  class Pending final : public PendingCollective::Impl {
   public:
    Pending(C10dCommunicator* comm, c10::intrusive_ptr<c10d::Work> work, torch::Tensor target,
            torch::Tensor staged)
        : comm_(comm), work_(std::move(work)), target_(std::move(target)), staged_(std::move(staged)) {}
    void wait() override {
      if (done_) return;
      comm_->wait(work_, comm_->span_name("all_reduce"));
      if (!staged_.is_same(target_)) target_.copy_(staged_);  // back from the staging device
      done_ = true;
    }

   private:
    C10dCommunicator* comm_;
    c10::intrusive_ptr<c10d::Work> work_;
    torch::Tensor target_, staged_;
    bool done_ = false;
  };
  torch::Tensor on_device = staged(tensor);
  auto work = launch("all_reduce", "allreduce", on_device, on_device.numel(), [&] {
    std::vector<torch::Tensor> tensors{on_device};
    return group_->allreduce(tensors);
  });
  return PendingCollective(std::make_shared<Pending>(this, std::move(work), tensor, on_device));
}

void C10dCommunicator::all_reduce_sum(torch::Tensor& tensor) { all_reduce_sum_async(tensor).wait(); }

void C10dCommunicator::broadcast(std::vector<torch::Tensor>& tensors, int root) {
  if (root < 0 || root >= world_size_)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank");
  torch::NoGradGuard no_grad;
  // Coalesced: tensors of one dtype and device are flattened into buffers (one collective
  // each), as DDP's broadcast_coalesced does; the order is the same on every rank.
  size_t i = 0;
  while (i < tensors.size()) {
    size_t j = i + 1;
    int64_t bytes = tensors[i].numel() * static_cast<int64_t>(tensors[i].element_size());
    while (j < tensors.size() && tensors[j].scalar_type() == tensors[i].scalar_type() &&
           tensors[j].device() == tensors[i].device() &&
           bytes + tensors[j].numel() * static_cast<int64_t>(tensors[j].element_size()) <=
               kBroadcastBufferBytes) {
      bytes += tensors[j].numel() * static_cast<int64_t>(tensors[j].element_size());
      ++j;
    }
    std::vector<torch::Tensor> pieces;
    for (size_t k = i; k < j; ++k) pieces.push_back(tensors[k].reshape({-1}));
    torch::Tensor flat = staged(torch::cat(pieces));
    auto work = launch("broadcast", "broadcast", flat, flat.numel(), [&] {
      std::vector<torch::Tensor> buffers{flat};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      return group_->broadcast(buffers, options);
    });
    wait(work, span_name("broadcast"));
    int64_t offset = 0;
    for (size_t k = i; k < j; ++k) {
      const int64_t n = tensors[k].numel();
      tensors[k].copy_(flat.narrow(0, offset, n).view_as(tensors[k]));
      offset += n;
    }
    i = j;
  }
}

std::vector<torch::Tensor> C10dCommunicator::all_gather(const torch::Tensor& tensor) {
  std::vector<torch::Tensor> inputs{staged(tensor.contiguous())};
  std::vector<std::vector<torch::Tensor>> outputs(1);
  for (int r = 0; r < world_size_; ++r) outputs[0].push_back(torch::empty_like(inputs[0]));
  auto work = launch("all_gather", "allgather", inputs[0], inputs[0].numel() * world_size_,
                     [&] { return group_->allgather(outputs, inputs); });
  wait(work, span_name("all_gather"));
  for (auto& out : outputs[0]) out = out.to(tensor.device());
  return outputs[0];
}

void C10dCommunicator::barrier() {
  auto work = launch("barrier", "barrier", torch::Tensor(), 0, [&] { return group_->barrier(); });
  wait(work, span_name("barrier"));
}

}  // namespace rt::dist

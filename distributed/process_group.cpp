#include "distributed/process_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef RT_HAS_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#ifndef USE_C10D_GLOO
#error "ProcessGroupGloo needs USE_C10D_GLOO (set by torch's CMake targets)"
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "distributed/c10d_communicator.h"
#include "util/error.h"

namespace rt::dist {
namespace {

std::string reason_of(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

bool mentions(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

std::string seconds(std::chrono::milliseconds t) { return std::to_string(t.count() / 1000) + " s"; }

using Clock = std::chrono::steady_clock;

std::string elapsed_text(Clock::time_point since) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(Clock::now() - since).count());
  return buf;
}

// "rank R: the process group did not form within train.distributed.timeout_s = T s (gave up
// after X s, <stage>; N ranks expected at ADDR:PORT): …": every way the rendezvous ends unformed.
std::string not_formed(const LaunchEnv& env, std::chrono::milliseconds timeout, Clock::time_point start,
                       const std::string& stage) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  return "rank " + std::to_string(env.rank) +
         ": the process group did not form within train.distributed.timeout_s = " + seconds(timeout) +
         " (gave up after " + elapsed_text(start) + ", " + stage + "; " + std::to_string(env.world_size) +
         " ranks expected at " + env.master_addr + ":" + std::to_string(env.master_port) +
         "): did every rank start, with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and is the link "
         "up?" +
         (ifname == nullptr || *ifname == '\0'
              ? " On several hosts, GLOO_SOCKET_IFNAME names the interface each rank advertises (e.g. eth0)"
              : "");
}

// The whole rendezvous (the store, Gloo's mesh, the peers' exchange) within
// train.distributed.timeout_s: each stage's own timeout restarts its clock, so three stages in a row
// could otherwise take several times the setting. At the deadline this prints what it was waiting for
// and how long it waited, then ends the process (exit 2: nothing has been written yet; the library
// calls that wait cannot be interrupted).
class RendezvousDeadline {
 public:
  RendezvousDeadline(const LaunchEnv& env, std::chrono::milliseconds timeout, bool exit_at_deadline)
      : env_(env), timeout_(timeout), start_(Clock::now()) {
    if (exit_at_deadline) thread_ = std::thread([this] { watch(); });
  }
  ~RendezvousDeadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  RendezvousDeadline(const RendezvousDeadline&) = delete;
  RendezvousDeadline& operator=(const RendezvousDeadline&) = delete;

  void stage(std::string what) {
    std::lock_guard<std::mutex> lock(mutex_);
    stage_ = std::move(what);
  }
  Clock::time_point start() const { return start_; }
  // What is left of the timeout (at least 1 ms).
  std::chrono::milliseconds remaining() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start_ + timeout_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_until(lock, start_ + timeout_, [this] { return done_; })) return;
    const std::string text = "error: " + not_formed(env_, timeout_, start_, stage_) + "\n";
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    (void)n;
    ::_exit(2);
  }

  const LaunchEnv& env_;
  std::chrono::milliseconds timeout_;
  Clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string stage_ = "starting";
  std::thread thread_;
};

// This host's name and its addresses (numeric), from the resolver Gloo's default device uses.
std::vector<std::string> host_addresses(std::string* name) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  *name = host;
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0)
      out.push_back(buf);
  }
  freeaddrinfo(res);
  return out;
}

// The local address this host uses to reach `addr` (a UDP socket connected to it sends nothing),
// or "" when there is no route.
std::string source_address_towards(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) ==
            0) {
      out = buf;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

// True when `host` names this machine's loopback (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host) {
  addrinfo hints{};  // zeroed: IPv4 and IPv6 alike (ai_family 0 is the "unspecified" family)
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool loopback = true;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      loopback &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
    }
  }
  freeaddrinfo(found);
  return loopback;
}

c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env, std::chrono::milliseconds timeout,
                                              Clock::time_point started) {
  const bool host = !env.agent_store && env.rank == 0;
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(env.master_port);
  o.isServer = host;
  if (!env.agent_store) o.numWorkers = static_cast<size_t>(env.world_size);
  o.waitWorkers = !env.agent_store;
  o.multiTenant = true;
  o.timeout = timeout;
#if RT_TCPSTORE_HAS_LIBUV
  o.useLibUV = false;
#endif
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    const std::string why = reason_of(e);
    if (host && (mentions(why, "Address already in use") || mentions(why, "errno: 98"))) {
      throw Error("rank 0 cannot host the rendezvous store: port " + std::to_string(env.master_port) +
                  " (MASTER_PORT) is already in use on this host; choose a free MASTER_PORT (torchrun: "
                  "--master_port) or stop the process holding it");
    }
    if (host && !mentions(why, "imeout") && !mentions(why, "imed out")) {
      throw Error("rank 0 cannot host the rendezvous store on " + where + ": " + why);
    }
    throw Error(
        not_formed(env, timeout, started,
                   host ? "waiting for every rank at the rendezvous store it hosts"
                        : "reaching the rendezvous store at MASTER_ADDR:MASTER_PORT (is rank 0, or the "
                          "launcher, running there?)") +
        " (" + why + ")");
  }
  // torchelastic prefixes its workers' keys per restart (torch/distributed/rendezvous.py).
  return c10::make_intrusive<c10d::PrefixStore>("rt/attempt_" + std::to_string(env.restart_count), store);
}

std::vector<std::shared_ptr<gloo::transport::Device>> gloo_devices(const LaunchEnv& env) {
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  const char* ifnames = std::getenv("GLOO_SOCKET_IFNAME");
  try {
    if (ifnames != nullptr && *ifnames != '\0') {
      std::string list = ifnames;
      size_t start = 0;
      for (;;) {
        const size_t comma = list.find(',', start);
        devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForInterface(list.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (is_loopback(env.master_addr)) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      // Gloo's default device advertises the address this host's name resolves to. Where that
      // is loopback (Debian's /etc/hosts: 127.0.1.1) on a job across hosts, the others would
      // wait for it until the timeout: advertise the address that reaches MASTER_ADDR instead,
      // and say so; refuse when there is none.
      std::string host;
      const std::vector<std::string> own = host_addresses(&host);
      const bool own_loopback = !own.empty() && std::all_of(own.begin(), own.end(), [](const std::string& a) {
        return is_loopback(a);
      });
      const bool across_hosts = env.world_size > env.local_world_size;
      if (own_loopback && across_hosts) {
        const std::string route = source_address_towards(env.master_addr, env.master_port);
        if (route.empty() || is_loopback(route)) {
          throw Error("rank " + std::to_string(env.rank) + ": this host's name '" + host + "' resolves to " +
                      own.front() +
                      " (loopback), the address Gloo would advertise to ranks on other hosts, " +
                      "which cannot reach it, and no other address reaches MASTER_ADDR = " + env.master_addr +
                      "; set GLOO_SOCKET_IFNAME to the interface that does (`ip route get " +
                      env.master_addr + "` names it)");
        }
        std::cerr << "note: rank " << env.rank << ": this host's name '" << host << "' resolves to "
                  << own.front() << " (loopback), which ranks on other hosts cannot reach; advertising "
                  << route << ", the address that reaches MASTER_ADDR = " << env.master_addr
                  << " (GLOO_SOCKET_IFNAME chooses the interface)\n";
        devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(route));
      } else {
        devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
    }
  } catch (const std::exception& e) {
    throw Error("cannot open Gloo's network device" +
                std::string(ifnames ? " for GLOO_SOCKET_IFNAME=" + std::string(ifnames) : "") + ": " +
                reason_of(e));
  }
  return devices;
}

// This process's threads (their ids).
std::set<pid_t> process_threads() {
  std::set<pid_t> tids;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') tids.insert(static_cast<pid_t>(std::atol(e->d_name)));
    }
    closedir(dir);
  }
  return tids;
}

// Gloo's devices, and the policy their event-loop threads (the threads that creating them
// started) run under: SCHED_BATCH when `batch` (process_group.h), read back from the kernel.
std::vector<std::shared_ptr<gloo::transport::Device>> gloo_devices_with_loops(const LaunchEnv& env,
                                                                              bool batch,
                                                                              std::string* loop_policy) {
  const std::set<pid_t> before = process_threads();
  auto devices = gloo_devices(env);
  for (const pid_t tid : process_threads()) {
    if (before.count(tid) != 0) continue;
    if (batch) {
      sched_param param{};
      if (sched_setscheduler(tid, SCHED_BATCH, &param) != 0) {
        std::cerr << "warning: rank " << env.rank
                  << ": could not run Gloo's event-loop thread under SCHED_BATCH (" << std::strerror(errno)
                  << "); it keeps the default policy (train.distributed.gloo_loop)\n";
      }
    }
    *loop_policy = scheduling_policy_name(sched_getscheduler(tid));
  }
  return devices;
}

c10::intrusive_ptr<C10dBackend> make_group(Backend backend, const c10::intrusive_ptr<c10d::Store>& store,
                                           const LaunchEnv& env, std::chrono::milliseconds timeout,
                                           bool batch_loop, std::string* loop_policy) {
  if (backend == Backend::kNccl) {
#ifdef RT_HAS_C10D_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
#else
    throw Error("train.distributed.backend = \"nccl\" but this build has no NCCL");
#endif
  }
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices = gloo_devices_with_loops(env, batch_loop, loop_policy);
  options->threads = 1;  // collectives execute in issue order (c10d_communicator.h spans)
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
}

// Every rank's host and pid, through the store (c10d_communicator.h: telling lost ranks apart).
std::vector<PeerInfo> exchange_peers(c10d::Store& store, const LaunchEnv& env) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string mine = std::string(host) + "\n" + std::to_string(getpid());
  store.set("peer/" + std::to_string(env.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<PeerInfo> peers(static_cast<size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) {
    const auto bytes = store.get("peer/" + std::to_string(r));
    const std::string text(bytes.begin(), bytes.end());
    const size_t nl = text.find('\n');
    peers[static_cast<size_t>(r)].host = text.substr(0, nl);
    peers[static_cast<size_t>(r)].pid = nl == std::string::npos ? 0 : std::atoll(text.c_str() + nl + 1);
  }
  return peers;
}

}  // namespace

std::string to_string(Backend backend) { return enum_name(backend); }

std::string scheduling_policy_name(int policy) {
  switch (policy) {
    case SCHED_OTHER:
      return "SCHED_OTHER";
    case SCHED_BATCH:
      return "SCHED_BATCH";
    case SCHED_IDLE:
      return "SCHED_IDLE";
    case SCHED_FIFO:
      return "SCHED_FIFO";
    case SCHED_RR:
      return "SCHED_RR";
    default:
      return "policy " + std::to_string(policy);
  }
}

bool nccl_available() {
#ifdef RT_HAS_C10D_NCCL
  return true;
#else
  return false;
#endif
}

Backend resolve_backend(Backend backend, bool cuda_device) {
  if (backend == Backend::kAuto) return cuda_device && nccl_available() ? Backend::kNccl : Backend::kGloo;
  if (backend == Backend::kNccl && !nccl_available()) {
    throw Error(
        "train.distributed.backend = \"nccl\" but this build's LibTorch has no NCCL (CPU build); use "
        "\"gloo\" or \"auto\"");
  }
  if (backend == Backend::kNccl && !cuda_device) {
    throw Error(
        "train.distributed.backend = \"nccl\" needs a CUDA device (train.device); use \"gloo\" on CPU");
  }
  return backend;
}

bool resolve_active_wait(WaitPolicy policy, Backend backend, int local_ranks, int busy_threads, int cores) {
  if (backend == Backend::kNccl) return false;
  if (policy != WaitPolicy::kAuto) return policy == WaitPolicy::kActive;
  return static_cast<int64_t>(std::max(1, local_ranks)) * std::max(1, busy_threads) <=
         static_cast<int64_t>(cores);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::shared_ptr<Communicator> join_process_group(const LaunchEnv& env, const ProcessGroupOptions& options) {
  if (!env.distributed()) return std::make_shared<LocalCommunicator>();
  if (options.timeout.count() <= 0) throw Error("train.distributed.timeout_s must be > 0");
  const Backend backend = resolve_backend(options.backend, options.cuda_device);
  RendezvousDeadline deadline(env, options.timeout, options.exit_at_deadline);
  deadline.stage(env.rank == 0 && !env.agent_store ? "waiting for every rank at the rendezvous store it hosts"
                                                   : "connecting to the rendezvous store");
  auto store = connect_store(env, options.timeout, deadline.start());
  c10::intrusive_ptr<C10dBackend> group;
  std::vector<PeerInfo> peers;
  std::string loop_policy;
  try {
    // The store's waits take what is left of the timeout; Gloo's mesh keeps the full timeout,
    // which also bounds every collective later, and the deadline bounds the whole.
    store->setTimeout(deadline.remaining());
    deadline.stage("connecting Gloo's mesh to the other ranks");
    group = make_group(backend, c10::make_intrusive<c10d::PrefixStore>("default_pg", store), env,
                       options.timeout, options.gloo_loop_batch, &loop_policy);
    deadline.stage("exchanging the ranks' hosts");
    store->setTimeout(deadline.remaining());
    peers = exchange_peers(*store, env);
    store->setTimeout(options.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(not_formed(env, options.timeout, deadline.start(), "connecting to the other ranks") + " (" +
                reason_of(e) + ")");
  }
  // NCCL reduces CUDA tensors only: the trainer's own CPU tensors (log means,
  // validation sums) go through the rank's device.
  c10::optional<torch::Device> staging;
  if (backend == Backend::kNccl)
    staging = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.cuda_index));
  const bool active_wait =
      resolve_active_wait(options.wait, backend, env.local_world_size, options.busy_threads, usable_cores());
  return std::make_shared<C10dCommunicator>(std::move(group), to_string(backend), env.rank, env.world_size,
                                            options.timeout, std::move(peers), staging, active_wait,
                                            options.gather_sum_bytes, loop_policy);
}

}  // namespace rt::dist

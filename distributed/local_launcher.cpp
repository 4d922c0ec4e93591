#include "distributed/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/launch_env.h"
#include "util/error.h"
#include "util/signals.h"
#include "util/torch_compat.h"

namespace rt::dist {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the reader went away: drop the output, keep supervising
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// One child's output stream, re-emitted line by line with a prefix.
struct Stream {
  int fd = -1;  // read end; -1 once closed
  int to = 2;
  std::string prefix;
  std::string pending;  // an incomplete last line

  void emit(const std::string& line) {
    const std::string out = prefix + line + "\n";
    write_all(to, out.data(), out.size());
  }
  // Reads what is available; false at end of file.
  bool pump() {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      if (!pending.empty()) emit(pending);
      pending.clear();
      ::close(fd);
      fd = -1;
      return false;
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(pending.substr(start, nl - start));
    }
    pending.erase(0, start);
    return true;
  }
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

// argv[0] as execve needs it: a path, searched in PATH when it has no '/'.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    const size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  throw Error("--nproc_per_node: cannot find the program '" + name + "' in PATH");
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

void signal_running(std::vector<Child>& children, int sig) {
  for (auto& c : children) {
    if (c.running) ::kill(c.pid, sig);
  }
}

// Starts rank `rank`. Everything the child needs is prepared before fork(): between fork and
// execve only async-signal-safe calls are made (the parent has threads: the store's server).
Child start_child(int rank, const std::string& program, const std::vector<std::string>& argv,
                  std::vector<std::string> env, const LocalLaunchOptions& o) {
  Child c;
  c.rank = rank;
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (rank > 0 && (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
    throw Error("--nproc_per_node: cannot create pipes for rank " + std::to_string(rank) + ": " +
                std::strerror(errno));
  }
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int out = rank > 0 ? out_pipe[1] : o.out_fd;
  const int err = rank > 0 ? err_pipe[1] : o.err_fd;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error("--nproc_per_node: cannot start rank " + std::to_string(rank) + ": " + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the launcher died before prctl
    restore_exec_signal_mask();
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execve(program.c_str(), args.data(), envp.data());
    const char msg[] = "--nproc_per_node: cannot execute the program\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  c.pid = pid;
  c.running = true;
  if (rank > 0) {
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    c.out = Stream{out_pipe[0], o.out_fd, prefix, {}};
    c.err = Stream{err_pipe[0], o.err_fd, prefix, {}};
  }
  return c;
}

std::vector<std::string> child_environment(int rank, int nproc, int port) {
  EnvMap env = process_environment();
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(nproc);
  env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(port);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["TORCHELASTIC_RESTART_COUNT"] = "0";
  if (nproc > 1 && env.find("OMP_NUM_THREADS") == env.end()) env["OMP_NUM_THREADS"] = "1";
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

int run_local_ranks(const LocalLaunchOptions& o) {
  if (o.nproc < 1) throw Error("--nproc_per_node must be >= 1, got " + std::to_string(o.nproc));
  if (o.argv.empty()) throw Error("--nproc_per_node: no program to run");
  const std::string program = resolve_program(o.argv[0]);

  // The rendezvous store, as torchrun's agent hosts it; port 0 lets the kernel pick a free one.
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;
  store_options.isServer = true;
  store_options.waitWorkers = false;
#if RT_TCPSTORE_HAS_LIBUV
  store_options.useLibUV = false;
#endif
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  } catch (const std::exception& e) {
    throw Error(std::string("--nproc_per_node: cannot host the rendezvous store on 127.0.0.1: ") + e.what());
  }
  const int port = store->getPort();

  install_stop_signal_handlers();
  std::vector<Child> children;
  try {
    for (int r = 0; r < o.nproc; ++r) {
      children.push_back(start_child(r, program, o.argv, child_environment(r, o.nproc, port), o));
    }
  } catch (...) {
    signal_running(children, SIGKILL);
    for (auto& c : children) ::waitpid(c.pid, nullptr, 0);
    throw;
  }

  int first_failure = 0;
  int forwarded = 0;
  bool killed = false;
  std::optional<Clock::time_point> deadline;     // SIGKILL for whoever still runs then
  std::optional<Clock::time_point> drain_until;  // output of exited children: read a little more
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    for (auto& c : children) {
      for (Stream* s : {&c.out, &c.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    size_t running = 0;
    for (auto& c : children) running += c.running ? 1 : 0;
    if (running == 0 && (fds.empty() || (drain_until && Clock::now() > *drain_until))) break;
    if (::poll(fds.data(), fds.size(), 100) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents != 0) streams[i]->pump();
      }
    }
    // SIGUSR1 (a checkpoint now) goes to every rank: they agree on it within a step.
    if (take_checkpoint_request()) signal_running(children, SIGUSR1);
    if (stop_signal() != 0 && forwarded == 0) {
      forwarded = stop_signal();
      signal_running(children, forwarded);
      if (!deadline) deadline = Clock::now() + o.grace;
    }
    for (auto& c : children) {
      int status = 0;
      if (!c.running || ::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      const int code = exit_code(status);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        // After a forwarded stop signal the others are already stopping (their handlers may
        // still be running): a second signal could cut them short.
        if (forwarded == 0) signal_running(children, SIGTERM);
        if (!deadline) deadline = Clock::now() + o.grace;
      }
    }
    if (deadline && !killed && Clock::now() > *deadline) {
      signal_running(children, SIGKILL);
      killed = true;
    }
    running = 0;
    for (auto& c : children) running += c.running ? 1 : 0;
    if (running == 0 && !drain_until) drain_until = Clock::now() + std::chrono::seconds(1);
  }
  for (auto& c : children) {
    for (Stream* s : {&c.out, &c.err}) {
      if (s->fd >= 0) ::close(s->fd);
    }
  }
  if (first_failure != 0) return first_failure;
  return forwarded != 0 ? 128 + forwarded : 0;
}

int take_nproc_per_node(std::vector<std::string>& args) {
  int n = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    size_t erase = 0;
    for (const std::string flag : {"--nproc_per_node", "--nproc-per-node"}) {
      if (args[i] == flag) {
        if (i + 1 >= args.size()) throw Error(flag + " needs a value: the number of ranks to start");
        value = args[i + 1];
        erase = 2;
      } else if (args[i].rfind(flag + "=", 0) == 0) {
        value = args[i].substr(flag.size() + 1);
        erase = 1;
      }
    }
    if (erase == 0) continue;
    const auto v = parse_whole_number(value, 1, 1024);
    if (!v)
      throw Error("--nproc_per_node " + value + ": expected the number of ranks, an integer in 1..1024");
    n = static_cast<int>(*v);
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
               args.begin() + static_cast<std::ptrdiff_t>(i + erase));
    --i;
  }
  return n;
}

std::string current_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot read /proc/self/exe: " + std::string(std::strerror(errno)));
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace rt::dist

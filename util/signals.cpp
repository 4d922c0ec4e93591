#include "util/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace rt {
namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_tell{false};
std::atomic<bool> g_checkpoint{false};
std::atomic<long> g_received{0};

// write(2) only: the one way to print from a signal handler.
void say(const char* text) {
  if (!g_tell.load(std::memory_order_relaxed)) return;
  const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)n;
}

// What a signal does, wherever it is taken (the signal thread, or a handler on a thread that
// does not block it). Async-signal-safe.
void act_on_signal(int sig) {
  if (sig == SIGUSR1) {
    g_checkpoint.store(true);
    say("\nSIGUSR1: writing a checkpoint after this step\n");
    return;
  }
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    say(sig == SIGINT    ? "\nstopping after this step… (Ctrl-C again to stop now)\n"
        : sig == SIGHUP  ? "\nSIGHUP: stopping after this step…\n"
        : sig == SIGQUIT ? "\nSIGQUIT: stopping after this step…\n"
                         : "\nSIGTERM: stopping after this step…\n");
    return;
  }
  // A second Ctrl-C is the user's: stop now, by the default action of SIGINT (exit 130 as the
  // shell sees it). Files written so far are whole (every write is atomic). A SIGTERM after the
  // first signal is a launcher's (torchrun closes its ranks with SIGTERM after a Ctrl-C that
  // reached them too): the stop is already under way, so it is not cut short.
  if (sig == SIGINT) {
    say("\nsecond Ctrl-C: stopping now\n");
    std::signal(SIGINT, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, SIGINT);
    // Pending until this handler returns when run as one; at once on the signal thread.
    ::raise(SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  }
}

// Counted once done (a second Ctrl-C ends the process before).
void take_signal(int sig) {
  act_on_signal(sig);
  g_received.fetch_add(1);
}

extern "C" void on_signal(int sig) { take_signal(sig); }

// SIGHUP's disposition and the signal mask as exec left them, read before any library's
// initialiser runs: Debian 13's LibTorch 2.6 installs a SIGHUP handler while it loads, so by
// main() `nohup train …`'s SIG_IGN is gone. An executable's DT_PREINIT_ARRAY runs before the
// initialisers of the shared objects it needs (this object is only ever linked into
// executables: rt_util is static).
bool g_sighup_ignored_at_exec = false;
sigset_t g_exec_mask;  // zero-initialised: the empty set, where no preinit recorded it

extern "C" void rt_record_exec_signal_dispositions(int, char**, char**) {
  struct sigaction old {};
  g_sighup_ignored_at_exec = sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
  pthread_sigmask(SIG_BLOCK, nullptr, &g_exec_mask);
}

__attribute__((section(".preinit_array"), used)) void (*const rt_preinit_signal_dispositions)(
    int, char**, char**) = &rt_record_exec_signal_dispositions;

// The signals the process takes on its signal thread: the stop signals (without an ignored
// SIGHUP) and SIGUSR1.
sigset_t taken_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1}) {
    struct sigaction now {};
    if (sig == SIGHUP && sigaction(SIGHUP, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
  }
  return set;
}

// The set install_stop_signal_handlers() blocked, which its signal thread waits on.
sigset_t g_taken;

extern "C" void* signal_thread_main(void*) {
  for (;;) {
    int sig = 0;
    if (sigwait(&g_taken, &sig) == 0) take_signal(sig);
  }
  return nullptr;
}

// The process whose signal thread runs (a forked child has none until it installs again).
std::atomic<pid_t> g_signal_thread_of{0};

}  // namespace

void install_stop_signal_handlers() {
  // Messages only where a person reads them: a terminal on stderr (not a rank's pipe or log).
  g_tell.store(::isatty(STDERR_FILENO) == 1);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    // `nohup train …` ignores SIGHUP on purpose: it stays ignored, even where a library's
    // initialiser has put a handler in its place since exec.
    struct sigaction old {};
    if (sig == SIGHUP &&
        (g_sighup_ignored_at_exec || (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN))) {
      std::signal(SIGHUP, SIG_IGN);
      continue;
    }
    sigaction(sig, &sa, nullptr);
  }
  struct sigaction usr = sa;
  usr.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &usr, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // The signals are taken on a thread of their own, never by a handler on the stack of code
  // that was computing: oneDNN's sgemm (Debian's libdnnl 2.6) keeps data below its stack
  // pointer that a handler's frame overwrites, and a signal arriving there corrupted the heap. Blocked in
  // this thread, and so in every thread it starts (a thread inherits its creator's mask): call this before
  // any other thread exists.
  const sigset_t set = taken_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A signal already pending (one that arrived before, held by a mask the parent left blocked:
  // a blocked mask is inherited across exec, or raised in this thread) is taken now.
  const timespec now{0, 0};
  for (int sig; (sig = sigtimedwait(&set, nullptr, &now)) > 0;) take_signal(sig);
  const pid_t self = ::getpid();
  if (g_signal_thread_of.exchange(self) != self) {
    g_taken = set;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    if (pthread_create(&thread, &attr, signal_thread_main, nullptr) == 0) {
      pthread_setname_np(thread, "rt-signals");
    } else {
      // No thread: the handlers take the signals where they land, as before.
      g_signal_thread_of.store(0);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    }
    pthread_attr_destroy(&attr);
  }
}

void restore_exec_signal_mask() { pthread_sigmask(SIG_SETMASK, &g_exec_mask, nullptr); }

long signals_received() { return g_received.load(); }

bool take_checkpoint_request() { return g_checkpoint.exchange(false); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

void set_stop_messages(bool on) { g_tell.store(on); }
bool stop_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
void clear_stop_request() {
  g_signal.store(0);
  g_checkpoint.store(false);
}

void throw_if_stop_requested(const std::string& during) {
  const int sig = stop_signal();
  if (sig == 0) return;
  throw StopRequested(std::string("stopped by ") + signal_name(sig) + " " + during, sig);
}

}  // namespace rt

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

// write(2) only: the one way to print from a signal handler.
void say(const char* text) {
  if (!g_tell.load(std::memory_order_relaxed)) return;
  const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)n;
}

extern "C" void on_checkpoint_signal(int) {
  g_checkpoint.store(true);
  say("\nSIGUSR1: writing a checkpoint after this step\n");
}

extern "C" void on_stop_signal(int sig) {
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
    ::raise(SIGINT);
  }
}

// SIGHUP's disposition as exec left it, read before any library's initialiser runs: Debian 13's
// LibTorch 2.6 installs a SIGHUP handler while it loads, so by main() `nohup train …`'s
// SIG_IGN is gone. An executable's DT_PREINIT_ARRAY runs before the initialisers of the shared
// objects it needs (this object is only ever linked into executables: rt_util is static).
bool g_sighup_ignored_at_exec = false;

extern "C" void rt_record_exec_signal_dispositions(int, char**, char**) {
  struct sigaction old {};
  g_sighup_ignored_at_exec = sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
}

__attribute__((section(".preinit_array"), used)) void (*const rt_preinit_signal_dispositions)(
    int, char**, char**) = &rt_record_exec_signal_dispositions;

}  // namespace

void install_stop_signal_handlers() {
  // Messages only where a person reads them: a terminal on stderr (not a rank's pipe or log).
  g_tell.store(::isatty(STDERR_FILENO) == 1);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
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
  struct sigaction usr {};
  usr.sa_handler = on_checkpoint_signal;
  sigemptyset(&usr.sa_mask);
  usr.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &usr, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A signal that arrived before the handlers were installed, held pending by a mask the
  // parent left blocked, is delivered now, to the handler.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1}) sigaddset(&handled, sig);
  pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
}

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

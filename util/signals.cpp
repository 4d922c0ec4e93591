#include "util/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace rt {
namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_tell{false};

// write(2) only: the one way to print from a signal handler.
void say(const char* text) {
  if (!g_tell.load(std::memory_order_relaxed)) return;
  const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)n;
}

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    say(sig == SIGINT ? "\nstopping after this step… (Ctrl-C again to stop now)\n"
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

}  // namespace

void install_stop_signal_handlers() {
  // Messages only where a person reads them: a terminal on stderr (not a rank's pipe or log).
  g_tell.store(::isatty(STDERR_FILENO) == 1);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void set_stop_messages(bool on) { g_tell.store(on); }
bool stop_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
void clear_stop_request() { g_signal.store(0); }

void throw_if_stop_requested(const std::string& during) {
  const int sig = stop_signal();
  if (sig == 0) return;
  throw StopRequested(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal") +
                          " " + during,
                      sig);
}

}  // namespace rt

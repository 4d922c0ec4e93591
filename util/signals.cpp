#include "util/signals.h"

#include <atomic>
#include <csignal>

namespace rt {
namespace {

std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) {
    std::signal(sig, SIG_DFL);  // Second signal: let the default action happen next time.
  }
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
void clear_stop_request() { g_signal.store(0); }

}  // namespace rt

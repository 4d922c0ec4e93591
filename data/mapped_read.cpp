#include "data/mapped_read.h"

#include <csetjmp>
#include <csignal>
#include <mutex>

namespace rt {
namespace {

thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous {};

extern "C" void on_sigbus(int, siginfo_t*, void*) {
  if (t_guard != nullptr) siglongjmp(*t_guard, 1);
  // Not a guarded read: the earlier disposition back, and return; the faulting access runs
  // again and meets it (by default the process ends by SIGBUS, as it would have).
  sigaction(SIGBUS, &g_previous, nullptr);
}

}  // namespace

void install_mapped_read_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

bool run_guarded_impl(void (*fn)(void*), void* arg) {
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_guard;
  if (sigsetjmp(jump, 1) != 0) {  // 1: the signal mask is restored too (SIGBUS unblocked)
    t_guard = outer;
    return false;
  }
  t_guard = &jump;
  fn(arg);
  t_guard = outer;
  return true;
}

}  // namespace rt

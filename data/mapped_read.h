// Reads of a memory-mapped file that survive the file changing under them. A page of a mapping
// that the file no longer holds (truncated, or rewritten and cut back, by another process)
// raises SIGBUS on access, which kills the process with no message. Inside run_guarded the
// SIGBUS jumps back, and run_guarded returns false: the caller reports it as an error naming the
// file. LMDB maps its data.mdb (data/lmdb_store.h).
//
// Only C code (LMDB's calls, memcpy) may run inside a guard: the jump skips whatever is on the
// stack between the fault and the guard, so nothing there may need a destructor. A SIGBUS
// outside every guard gets the disposition the process had before (by default it ends the
// process). Guards nest, and each thread has its own.
#pragma once

#include <type_traits>
#include <utility>

namespace rt {

// Installs the SIGBUS handler, once per process (later calls do nothing).
void install_mapped_read_guard();

// Runs fn(arg); false when it faulted with SIGBUS before finishing. REQUIRES:
// install_mapped_read_guard() was called.
bool run_guarded_impl(void (*fn)(void*), void* arg);

template <class F>
bool run_guarded(F&& f) {
  using Fn = std::remove_reference_t<F>;
  return run_guarded_impl([](void* p) { (*static_cast<Fn*>(p))(); }, &f);
}

}  // namespace rt

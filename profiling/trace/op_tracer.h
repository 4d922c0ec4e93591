// CPU operator tracer on ATen's RecordFunction observers (Debian's LibTorch has no
// Kineto). While a window is open, one global RecordFunction callback records every ATen
// operator and autograd node on every thread (autograd worker threads included) into
// per-thread buffers (thread_buffers.h); no lock is taken on the hot path. Outside a window the
// callback is not installed at all, so tracing costs nothing when off.
//
// Per op: name, start/end (steady clock ns), OS thread id and RecordFunction's small thread
// id, sequence number and forward thread id (linking backward nodes to their forward op),
// RecordFunction handle, nesting; with record_shapes the input dims and types; with
// with_stack the native stack at entry (symbolised when the window is collected).
//
// Threads: like torch.profiler, operators of every thread are recorded, each thread on its own
// row (thread_name from /proc: the trainer names its loader workers "rt-loader"). ProfilerStep
// spans exist only on the thread that calls step_begin/step_end (the training thread, which on
// CPU also runs backward); loader workers' operators lie outside steps by nature.
//
// Threading: start(), clear(), stop(), step_begin/step_end are called from the training
// thread at step boundaries. REQUIRES for clear()/stop(): no operator is running on another
// thread at that moment (true between training steps: backward is synchronous).
// Only one OpTracer can be active at a time in a process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "profiling/annotation.h"
#include "profiling/trace/timeline.h"

namespace rt::prof {

struct OpTracerOptions {
  bool record_shapes = false;   // Input Dims / Input type per op (needs the op's inputs)
  bool profile_memory = false;  // accept record_memory() events
  bool with_stack = false;      // native stack per op
  bool with_modules = false;    // ModuleScope spans
  int max_stack_depth = 64;
};

class OpTracer {
 public:
  explicit OpTracer(OpTracerOptions options = {});
  ~OpTracer();  // stops (and discards) an active window
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;

  // Opens a window: installs the global callback. Throws rt::Error when another OpTracer is
  // active; no-op when this one already is.
  void start();
  // Drops everything collected so far (warm-up → record); spans still open stay open but
  // are no longer recorded.
  void clear();
  // Closes the window: removes the callback and returns what was collected (spans still
  // open end at the stop time), symbolised when with_stack. Not finalized (see
  // finalize_timeline). Returns an empty timeline when not active.
  Timeline stop();
  bool active() const;
  const OpTracerOptions& options() const { return options_; }

  // "ProfilerStep#N" user_annotation span on the calling thread (no-op when not active).
  void step_begin(int64_t step);
  void step_end();

  // A "[memory]" event (Kineto cpu_instant_event), attributed to the innermost op open on the
  // calling thread. Thread-safe; no-op unless active and profile_memory. bytes < 0 = free.
  // device_type: 0 CPU, 1 CUDA (c10::DeviceType values). category: the freed block's memory
  // category name (a string literal, profiling/memory.h) or null when unknown.
  void record_memory(void* ptr, int64_t bytes, int64_t total_allocated, int64_t total_reserved,
                     int device_type, int device_index, const char* category = nullptr);

  // The tracer whose window is open, or nullptr.
  static OpTracer* current();

  // For a GPU source: called on the op's thread with the op's RecordFunction handle at op
  // entry (push) and exit (pop) while a window is open. nullptr clears.
  using CorrelationHook = void (*)(uint64_t record_function_id);
  static void set_correlation_hooks(CorrelationHook push, CorrelationHook pop);

  // How many times the RecordFunction start callback ran on the calling thread (tests: zero
  // growth when no window is open).
  static uint64_t callbacks_on_this_thread();

 private:
  OpTracerOptions options_;
  uint64_t callback_handle_ = 0;
  bool active_ = false;
  int64_t start_ns_ = 0;
  int64_t first_step_ = -1;
  int64_t last_step_ = -1;
};

}  // namespace rt::prof

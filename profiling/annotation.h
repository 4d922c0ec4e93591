// The spans code opens for the profiler, without the profiler: what models and the training
// loop include to mark a region. A span is recorded only while a detailed-profiling window is
// open (profiling/trace/op_tracer.h implements these); otherwise it costs one atomic load.
//
//   prof::ScopedAnnotation a("forward");   // a user_annotation span for this scope
//   prof::ModuleScope span(module_path()); // a module span, recorded only with with_modules
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace rt::prof {

// A user_annotation span on the calling thread for the scope's lifetime (trainer phases:
// "forward", "backward", "optimizer_step", …).
class ScopedAnnotation {
 public:
  explicit ScopedAnnotation(std::string_view name) : ScopedAnnotation(name, false) {}
  ~ScopedAnnotation();
  ScopedAnnotation(const ScopedAnnotation&) = delete;
  ScopedAnnotation& operator=(const ScopedAnnotation&) = delete;

 protected:
  ScopedAnnotation(std::string_view name, bool module_scope);

 private:
  void* buffer_ = nullptr;
  uint64_t generation_ = 0;
};

namespace detail {
extern std::atomic<bool> g_recording;     // set while a tracer window is open
extern std::atomic<bool> g_module_spans;  // set while a tracer with with_modules is open
}  // namespace detail

// True while a detailed-profiling window is open (one relaxed atomic load): lets a caller
// skip building an annotation altogether.
inline bool annotations_recording() { return detail::g_recording.load(std::memory_order_relaxed); }

// True while a window is open whose tracer has with_modules: lets a module skip building span
// names (one relaxed atomic load).
inline bool module_spans_enabled() { return detail::g_module_spans.load(std::memory_order_relaxed); }

// The span name under which TensorBoard's PyTorch-profiler plugin counts data loading (its
// Overview's "DataLoader" share): torch's DataLoader iterator records
// `enumerate(DataLoader)#<iterator class>.__next__`, and the plugin matches exactly that
// (torch_tb_profiler/profiler/event_parser.py). The training loop's batch fetch carries it.
inline constexpr const char* kDataLoaderNextSpan = "enumerate(DataLoader)#Loader.__next__";

// A module span named by its module path ("encoder.encoder.net.3"), written as a
// "python_function" event with torch's module args (TensorBoard's plugin builds its Module
// view from those), recorded only when the active tracer has with_modules; otherwise one
// atomic load. Use in a module's forward(); the name is copied only when recorded.
class ModuleScope : public ScopedAnnotation {
 public:
  explicit ModuleScope(std::string_view module_path)
      : ScopedAnnotation(module_spans_enabled() ? module_path : std::string_view(), true) {}
};

}  // namespace rt::prof

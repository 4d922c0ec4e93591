#include "profiling/trace/op_tracer.h"

#include <ATen/record_function.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "profiling/stacks/native_stack.h"
#include "profiling/trace/recorded_span.h"
#include "profiling/trace/thread_buffers.h"
#include "util/clock.h"
#include "util/error.h"

namespace rt::prof {

namespace detail {
std::atomic<bool> g_recording{false};
std::atomic<bool> g_module_spans{false};
}  // namespace detail

namespace {

using detail::existing_thread_buffer;
using detail::FixedType;
using detail::RawEvent;
using detail::this_thread_buffer;
using detail::ThreadBuffer;

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The key of ProfilerStep spans (ops and annotations use their own addresses).
const char kStepKey = 0;

// What the callbacks share with the tracer whose window is open (the per-thread storage is
// thread_buffers.h's).
struct GlobalState {
  std::atomic<OpTracer*> active{nullptr};
  std::atomic<OpTracer::CorrelationHook> push_hook{nullptr};
  std::atomic<OpTracer::CorrelationHook> pop_hook{nullptr};
  // record_span(): finished spans of the open window and the names of their rows (never
  // forgotten, so a row keeps its tid for the life of the process).
  std::mutex span_mu;
  std::vector<Activity> spans;
  std::vector<std::string> span_rows;
};

GlobalState& state() {
  static GlobalState* s = new GlobalState();  // never destroyed: threads may outlive statics
  return *s;
}

// Moves the window's record_span() spans, and their rows, into t.
void append_spans(Timeline& t) {
  GlobalState& g = state();
  std::vector<Activity> spans;
  std::vector<std::string> rows;
  {
    std::lock_guard<std::mutex> lock(g.span_mu);
    spans.swap(g.spans);
    rows = g.span_rows;
  }
  std::vector<bool> row_seen(rows.size(), false);
  for (const auto& a : spans) row_seen[static_cast<size_t>(a.tid - kSpanRowTid)] = true;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!row_seen[r]) continue;
    const auto sort_index = static_cast<int64_t>(t.threads.size());
    t.threads.push_back({getpid(), kSpanRowTid + static_cast<int64_t>(r), rows[r], sort_index});
  }
  t.activities.insert(t.activities.end(), std::make_move_iterator(spans.begin()),
                      std::make_move_iterator(spans.end()));
}

thread_local uint64_t t_callbacks = 0;

// The "Input type" torch.profiler writes for a non-tensor input.
uint32_t non_tensor_type(ThreadBuffer* b, const c10::IValue& v) {
  if (v.isScalar()) return b->fixed_type(FixedType::kScalar);
  if (v.isTensorList()) return b->fixed_type(FixedType::kTensorList);
  if (v.isList()) return b->fixed_type(FixedType::kGenericList);
  if (v.isString()) return b->fixed_type(FixedType::kString);
  if (v.isNone()) return b->fixed_type(FixedType::kNone);
  return b->names.intern(std::string_view(v.tagKind()));
}

void record_inputs(ThreadBuffer* b, const at::RecordFunction& fn, RawEvent& e) {
  const auto inputs = fn.inputs();
  auto& out = b->shapes;
  e.shapes_begin = static_cast<uint32_t>(out.size());
  out.push_back(static_cast<int64_t>(inputs.size()));
  for (const c10::IValue& v : inputs) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined()) {
        const auto st = static_cast<int>(t.scalar_type());
        uint32_t& type = b->dtype_names[st];
        if (type == 0)
          type = b->names.intern(std::string_view(t.dtype().name().data(), t.dtype().name().size())) + 1;
        const auto sizes = t.sizes();
        out.push_back(type - 1);
        out.push_back(static_cast<int64_t>(sizes.size()));
        out.insert(out.end(), sizes.begin(), sizes.end());
        continue;
      }
      out.push_back(b->fixed_type(FixedType::kNone));  // an undefined tensor
      out.push_back(0);
      continue;
    }
    out.push_back(non_tensor_type(b, v));
    out.push_back(0);
  }
  e.shapes_end = static_cast<uint32_t>(out.size());
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  ++t_callbacks;
  OpTracer* tracer = state().active.load(std::memory_order_acquire);
  if (tracer == nullptr) return nullptr;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index = b->open_span(&fn, ActivityKind::kCpuOp, b->names.intern(fn.name()));
  RawEvent& e = b->events[index];
  e.record_function_id = static_cast<int64_t>(fn.handle());
  e.sequence_nr = fn.seqNr();
  e.fwd_thread_id = static_cast<int64_t>(fn.forwardThreadId());
  e.rf_thread_id = static_cast<int64_t>(fn.threadId());
  const OpTracerOptions& opt = tracer->options();
  if (opt.record_shapes && fn.needsInputs()) record_inputs(b, fn, e);
  if (opt.with_stack) {
    b->frames.resize(static_cast<size_t>(opt.max_stack_depth));
    const int n = capture_native_stack(b->frames.data(), opt.max_stack_depth);
    e.stack_begin = static_cast<uint32_t>(b->stack.size());
    b->stack.insert(b->stack.end(), b->frames.begin(), b->frames.begin() + std::max(n, 0));
    e.stack_end = static_cast<uint32_t>(b->stack.size());
  }
  if (auto push = state().push_hook.load(std::memory_order_relaxed)) push(fn.handle());
  e.start_ns = steady_ns();  // last, so our own bookkeeping is not charged to the op
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const int64_t now = steady_ns();
  ThreadBuffer* b = existing_thread_buffer();
  if (b == nullptr) return;  // the window closed while this op ran
  if (auto pop = state().pop_hook.load(std::memory_order_relaxed)) pop(fn.handle());
  b->close_span(&fn, now);
}

}  // namespace

OpTracer::OpTracer(OpTracerOptions options) : options_(options) {
  if (options_.max_stack_depth < 1) options_.max_stack_depth = 1;
}

OpTracer::~OpTracer() {
  if (active_) stop();
}

OpTracer* OpTracer::current() { return state().active.load(std::memory_order_acquire); }

uint64_t OpTracer::callbacks_on_this_thread() { return t_callbacks; }

void OpTracer::set_correlation_hooks(CorrelationHook push, CorrelationHook pop) {
  state().push_hook.store(push);
  state().pop_hook.store(pop);
}

bool OpTracer::active() const { return active_; }

void OpTracer::start() {
  if (active_) return;
  OpTracer* expected = nullptr;
  if (!state().active.compare_exchange_strong(expected, this)) {
    throw Error("cannot start operator tracing: another OpTracer is already active in this process");
  }
  detail::begin_window_buffers();
  {
    std::lock_guard<std::mutex> lock(state().span_mu);
    state().spans.clear();
  }
  first_step_ = last_step_ = -1;
  start_ns_ = steady_ns();
  active_ = true;
  // Scopes: operators, autograd nodes, user scopes and TorchScript functions — what
  // torch.profiler shows; dtype-tag and build-feature scopes are internal noise.
  auto cb = at::RecordFunctionCallback(&on_op_start, &on_op_end)
                .needsInputs(options_.record_shapes)
                .needsIds(true)
                .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                         at::RecordScope::USER_SCOPE, at::RecordScope::TORCHSCRIPT_FUNCTION});
  callback_handle_ = at::addGlobalCallback(cb);
  detail::g_module_spans.store(options_.with_modules, std::memory_order_relaxed);
  detail::g_recording.store(true, std::memory_order_relaxed);
}

void OpTracer::clear() {
  if (!active_) return;
  detail::clear_window_buffers();
  {
    std::lock_guard<std::mutex> lock(state().span_mu);
    state().spans.clear();
  }
  first_step_ = last_step_ = -1;
  start_ns_ = steady_ns();
}

Timeline OpTracer::stop() {
  Timeline t;
  if (!active_) return t;
  at::removeCallback(callback_handle_);
  detail::g_module_spans.store(false, std::memory_order_relaxed);
  detail::g_recording.store(false, std::memory_order_relaxed);
  state().active.store(nullptr, std::memory_order_release);
  detail::BufferList buffers = detail::end_window_buffers();
  active_ = false;
  const int64_t now = steady_ns();
  t.start_ns = start_ns_;
  t.end_ns = now;
  t.unix_minus_steady_ns = unix_ns() - steady_ns();
  t.first_step = first_step_;
  t.last_step = last_step_;
  detail::append_to_timeline(buffers, now, options_.with_stack, t);
  detail::recycle_buffers(std::move(buffers));
  append_spans(t);
  t.metadata["record_shapes"] = options_.record_shapes ? 1 : 0;
  t.metadata["profile_memory"] = options_.profile_memory ? 1 : 0;
  t.metadata["with_stack"] = options_.with_stack ? 1 : 0;
  t.metadata["with_modules"] = options_.with_modules ? 1 : 0;
  return t;
}

void record_span(std::string_view row, Activity span) {
  GlobalState& g = state();
  if (g.active.load(std::memory_order_acquire) == nullptr) return;
  std::lock_guard<std::mutex> lock(g.span_mu);
  if (g.active.load(std::memory_order_acquire) == nullptr) return;  // stop() ran meanwhile
  auto it = std::find(g.span_rows.begin(), g.span_rows.end(), row);
  if (it == g.span_rows.end()) it = g.span_rows.insert(g.span_rows.end(), std::string(row));
  span.pid = getpid();
  span.tid = kSpanRowTid + (it - g.span_rows.begin());
  span.record_function_id = span.linked_record_function_id = span.external_id = -1;
  span.parent = -1;
  g.spans.push_back(std::move(span));
}

void OpTracer::step_begin(int64_t step) {
  if (!active_) return;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index =
      b->open_span(&kStepKey, ActivityKind::kUserAnnotation,
                   b->names.intern(std::string_view("ProfilerStep#" + std::to_string(step))));
  b->events[index].start_ns = steady_ns();
  if (first_step_ < 0) first_step_ = step;
  last_step_ = step;
}

void OpTracer::step_end() {
  if (!active_) return;
  const int64_t now = steady_ns();
  if (ThreadBuffer* b = existing_thread_buffer()) b->close_span(&kStepKey, now);
}

void OpTracer::record_memory(void* ptr, int64_t bytes, int64_t total_allocated, int64_t total_reserved,
                             int device_type, int device_index, const char* category) {
  // Called from allocator hooks on any thread: read the shared flag, not active_.
  if (!options_.profile_memory || state().active.load(std::memory_order_acquire) != this) return;
  ThreadBuffer* b = this_thread_buffer();
  MemoryEvent& m = b->memory.emplace_back();
  m.time_ns = steady_ns();
  m.pid = b->pid;
  m.tid = b->os_tid;
  m.addr = reinterpret_cast<uintptr_t>(ptr);
  m.bytes = bytes;
  m.total_allocated = total_allocated;
  m.total_reserved = total_reserved;
  m.device_type = device_type;
  m.device_id = device_index;
  m.category = category;
  m.owner = b->innermost_recorded_span();
}

ScopedAnnotation::ScopedAnnotation(std::string_view name, bool module_scope) {
  if (module_scope && !module_spans_enabled()) return;
  OpTracer* tracer = state().active.load(std::memory_order_acquire);
  if (tracer == nullptr) return;
  if (module_scope && !tracer->options().with_modules) return;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index =
      b->open_span(this, module_scope ? ActivityKind::kPythonFunction : ActivityKind::kUserAnnotation,
                   b->names.intern(name));
  b->events[index].start_ns = steady_ns();
  buffer_ = b;
  generation_ = b->generation;
}

ScopedAnnotation::~ScopedAnnotation() {
  if (buffer_ == nullptr) return;
  const int64_t now = steady_ns();
  ThreadBuffer* b = existing_thread_buffer();
  if (b == buffer_ && b->generation == generation_) b->close_span(this, now);
}

}  // namespace rt::prof

#include "profiling/trace/op_tracer.h"

#include <ATen/record_function.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>

#include "data/util/error.h"
#include "profiling/stacks/native_stack.h"

namespace rt::prof {

namespace detail {
std::atomic<bool> g_module_spans{false};
}  // namespace detail

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr uint32_t kDropped = UINT32_MAX;
// Keys of open spans: the RecordFunction's address for ops, the ScopedAnnotation's address
// for annotations, this one for ProfilerStep spans.
const char kStepKey = 0;

struct OpenSpan {
  const void* key;
  uint32_t index;
};

struct ThreadBuffer {
  uint64_t generation = 0;
  int64_t pid = 0;
  int64_t os_tid = 0;
  std::string thread_name;
  std::vector<Activity> events;
  std::vector<MemoryEvent> memory;
  std::vector<OpenSpan> open;
  std::vector<void*> frames;  // scratch for stack capture
};

struct GlobalState {
  std::atomic<OpTracer*> active{nullptr};
  std::atomic<uint64_t> generation{1};
  std::atomic<OpTracer::CorrelationHook> push_hook{nullptr};
  std::atomic<OpTracer::CorrelationHook> pop_hook{nullptr};
  std::mutex mu;  // guards buffers (registration is once per thread per window)
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
};

GlobalState& state() {
  static GlobalState* s = new GlobalState();  // never destroyed: threads may outlive statics
  return *s;
}

thread_local ThreadBuffer* t_buffer = nullptr;
thread_local uint64_t t_generation = 0;
thread_local uint64_t t_callbacks = 0;

std::string read_thread_name(int64_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The calling thread's buffer for the open window, registering one on first use.
ThreadBuffer* this_thread_buffer() {
  GlobalState& g = state();
  const uint64_t gen = g.generation.load(std::memory_order_acquire);
  if (t_generation == gen && t_buffer != nullptr) return t_buffer;
  auto buf = std::make_unique<ThreadBuffer>();
  buf->generation = gen;
  buf->pid = getpid();
  buf->os_tid = static_cast<int64_t>(syscall(SYS_gettid));
  buf->thread_name = read_thread_name(buf->os_tid);
  buf->events.reserve(4096);
  ThreadBuffer* raw = buf.get();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffers.push_back(std::move(buf));
  }
  t_buffer = raw;
  t_generation = gen;
  return raw;
}

// The calling thread's buffer only if it belongs to the open window.
ThreadBuffer* existing_thread_buffer() {
  return t_generation == state().generation.load(std::memory_order_acquire) ? t_buffer : nullptr;
}

uint32_t open_span(ThreadBuffer* b, const void* key, ActivityKind kind, std::string_view name) {
  Activity& a = b->events.emplace_back();
  a.kind = kind;
  a.name.assign(name.data(), name.size());
  a.pid = b->pid;
  a.tid = b->os_tid;
  const auto index = static_cast<uint32_t>(b->events.size() - 1);
  b->open.push_back({key, index});
  return index;
}

// Closes the span opened with `key`; spans opened after it and still open (mis-nested scopes)
// end at the same time.
void close_span(ThreadBuffer* b, const void* key, int64_t now) {
  for (size_t i = b->open.size(); i-- > 0;) {
    if (b->open[i].key != key) continue;
    for (size_t j = i; j < b->open.size(); ++j) {
      if (b->open[j].index != kDropped) b->events[b->open[j].index].end_ns = now;
    }
    b->open.resize(i);
    return;
  }
}

void fill_inputs(const at::RecordFunction& fn, Activity& a) {
  const auto inputs = fn.inputs();
  a.input_dims.reserve(inputs.size());
  a.input_types.reserve(inputs.size());
  for (const c10::IValue& v : inputs) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined()) {
        a.input_dims.emplace_back(t.sizes().begin(), t.sizes().end());
        a.input_types.emplace_back(t.dtype().name());
      } else {
        a.input_dims.emplace_back();
        a.input_types.emplace_back("");
      }
    } else {
      a.input_dims.emplace_back();
      if (v.isScalar()) {
        a.input_types.emplace_back("Scalar");
      } else if (v.isTensorList()) {
        a.input_types.emplace_back("TensorList");
      } else if (v.isList()) {
        a.input_types.emplace_back("GenericList");
      } else if (v.isString()) {
        a.input_types.emplace_back("String");
      } else if (v.isNone()) {
        a.input_types.emplace_back("");
      } else {
        a.input_types.emplace_back(v.tagKind());
      }
    }
  }
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  ++t_callbacks;
  OpTracer* tracer = state().active.load(std::memory_order_acquire);
  if (tracer == nullptr) return nullptr;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index = open_span(b, &fn, ActivityKind::kCpuOp, fn.name());
  Activity& a = b->events[index];
  a.record_function_id = static_cast<int64_t>(fn.handle());
  a.sequence_nr = fn.seqNr();
  a.fwd_thread_id = static_cast<int64_t>(fn.forwardThreadId());
  a.rf_thread_id = static_cast<int64_t>(fn.threadId());
  const OpTracerOptions& opt = tracer->options();
  if (opt.record_shapes && fn.needsInputs()) fill_inputs(fn, a);
  if (opt.with_stack) {
    b->frames.resize(static_cast<size_t>(opt.max_stack_depth));
    const int n = capture_native_stack(b->frames.data(), opt.max_stack_depth);
    a.raw_stack.assign(b->frames.begin(), b->frames.begin() + std::max(n, 0));
  }
  if (auto push = state().push_hook.load(std::memory_order_relaxed)) push(fn.handle());
  a.start_ns = steady_ns();  // last, so our own bookkeeping is not charged to the op
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const int64_t now = steady_ns();
  ThreadBuffer* b = existing_thread_buffer();
  if (b == nullptr) return;  // the window closed while this op ran
  if (auto pop = state().pop_hook.load(std::memory_order_relaxed)) pop(fn.handle());
  close_span(b, &fn, now);
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
  GlobalState& g = state();
  OpTracer* expected = nullptr;
  if (!g.active.compare_exchange_strong(expected, this)) {
    throw Error("cannot start operator tracing: another OpTracer is already active in this process");
  }
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffers.clear();
  }
  g.generation.fetch_add(1, std::memory_order_acq_rel);
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
}

void OpTracer::clear() {
  if (!active_) return;
  GlobalState& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& b : g.buffers) {
    b->events.clear();
    b->memory.clear();
    for (auto& o : b->open) o.index = kDropped;
  }
  first_step_ = last_step_ = -1;
  start_ns_ = steady_ns();
}

Timeline OpTracer::stop() {
  Timeline t;
  if (!active_) return t;
  at::removeCallback(callback_handle_);
  detail::g_module_spans.store(false, std::memory_order_relaxed);
  GlobalState& g = state();
  g.active.store(nullptr, std::memory_order_release);
  g.generation.fetch_add(1, std::memory_order_acq_rel);
  active_ = false;
  const int64_t now = steady_ns();
  t.start_ns = start_ns_;
  t.end_ns = now;
  t.unix_minus_steady_ns = unix_ns() - steady_ns();
  t.first_step = first_step_;
  t.last_step = last_step_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    buffers.swap(g.buffers);
  }
  std::unique_ptr<Symbolizer> symbolizer;
  if (options_.with_stack) symbolizer = std::make_unique<Symbolizer>();
  int64_t sort_index = 0;
  for (auto& b : buffers) {
    for (auto& o : b->open) {
      if (o.index != kDropped) b->events[o.index].end_ns = now;
    }
    if (b->events.empty() && b->memory.empty()) continue;
    t.threads.push_back({b->pid, b->os_tid, b->thread_name, sort_index++});
    const size_t offset = t.activities.size();
    for (auto& m : b->memory) {
      if (m.owner >= 0) m.owner += static_cast<int64_t>(offset);
      t.memory.push_back(m);
    }
    for (auto& a : b->events) {
      if (symbolizer && !a.raw_stack.empty()) a.call_stack = symbolizer->symbolize_stack(a.raw_stack);
      t.activities.push_back(std::move(a));
    }
  }
  t.metadata["record_shapes"] = options_.record_shapes ? 1 : 0;
  t.metadata["profile_memory"] = options_.profile_memory ? 1 : 0;
  t.metadata["with_stack"] = options_.with_stack ? 1 : 0;
  t.metadata["with_modules"] = options_.with_modules ? 1 : 0;
  return t;
}

void OpTracer::step_begin(int64_t step) {
  if (!active_) return;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index = open_span(b, &kStepKey, ActivityKind::kUserAnnotation,
                                   "ProfilerStep#" + std::to_string(step));
  b->events[index].start_ns = steady_ns();
  if (first_step_ < 0) first_step_ = step;
  last_step_ = step;
}

void OpTracer::step_end() {
  if (!active_) return;
  const int64_t now = steady_ns();
  if (ThreadBuffer* b = existing_thread_buffer()) close_span(b, &kStepKey, now);
}

void OpTracer::record_memory(void* ptr, int64_t bytes, int64_t total_allocated, int64_t total_reserved,
                             int device_type, int device_index) {
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
  for (size_t i = b->open.size(); i-- > 0;) {
    if (b->open[i].index != kDropped) {
      m.owner = b->open[i].index;
      break;
    }
  }
}

ScopedAnnotation::ScopedAnnotation(std::string_view name, bool module_scope) {
  if (module_scope && !module_spans_enabled()) return;
  OpTracer* tracer = state().active.load(std::memory_order_acquire);
  if (tracer == nullptr) return;
  if (module_scope && !tracer->options().with_modules) return;
  ThreadBuffer* b = this_thread_buffer();
  const uint32_t index = open_span(b, this, ActivityKind::kUserAnnotation, name);
  b->events[index].start_ns = steady_ns();
  buffer_ = b;
  generation_ = b->generation;
}

ScopedAnnotation::~ScopedAnnotation() {
  if (buffer_ == nullptr) return;
  const int64_t now = steady_ns();
  ThreadBuffer* b = existing_thread_buffer();
  if (b == buffer_ && b->generation == generation_) close_span(b, this, now);
}

}  // namespace rt::prof

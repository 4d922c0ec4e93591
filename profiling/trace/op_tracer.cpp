#include "profiling/trace/op_tracer.h"

#include <ATen/record_function.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "util/error.h"
#include "profiling/stacks/native_stack.h"

namespace rt::prof {

namespace detail {
std::atomic<bool> g_recording{false};
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

// What the hot path records per event: fixed size, no allocation. Names are interned per
// thread; shapes and stacks go to per-thread arenas. stop() turns these into Activities.
struct RawEvent {
  int64_t start_ns;
  int64_t end_ns;
  int64_t record_function_id;
  int64_t sequence_nr;
  int64_t fwd_thread_id;
  int64_t rf_thread_id;
  uint32_t name;          // index into ThreadBuffer::names
  uint32_t shapes_begin;  // [shapes_begin, shapes_end) in ThreadBuffer::shapes
  uint32_t shapes_end;
  uint32_t stack_begin;   // [stack_begin, stack_end) in ThreadBuffer::stack
  uint32_t stack_end;
  ActivityKind kind;
};

// Append-only storage in fixed chunks: growing never moves or copies recorded events.
class EventChunks {
 public:
  static constexpr size_t kShift = 13;  // 8192 events (640 KiB) per chunk
  static constexpr size_t kSize = size_t{1} << kShift;
  RawEvent& push() {
    if ((size_ & (kSize - 1)) == 0 && (size_ >> kShift) == chunks_.size()) {
      chunks_.emplace_back(new RawEvent[kSize]);
    }
    const size_t i = size_++;
    return chunks_[i >> kShift][i & (kSize - 1)];
  }
  RawEvent& operator[](size_t i) { return chunks_[i >> kShift][i & (kSize - 1)]; }
  size_t size() const { return size_; }
  void clear() { size_ = 0; }  // keeps the chunks for reuse
  // Forgets the records and frees all but `keep` chunks.
  void reset(size_t keep) {
    size_ = 0;
    if (chunks_.size() > keep) chunks_.resize(keep);
  }

 private:
  std::vector<std::unique_ptr<RawEvent[]>> chunks_;
  size_t size_ = 0;
};

// Names interned per thread. Operator names are static strings, so the name pointer is
// looked up first; a pointer seen with another content (a name owned by a RecordFunction,
// e.g. an autograd node's) falls back to the content lookup.
class NameTable {
 public:
  uint32_t intern(const char* name) {
    auto it = by_ptr_.find(name);
    if (it != by_ptr_.end() && std::strcmp(storage_[it->second].c_str(), name) == 0) return it->second;
    const uint32_t id = intern(std::string_view(name));
    by_ptr_[name] = id;
    return id;
  }
  uint32_t intern(std::string_view name) {
    auto it = by_content_.find(name);
    if (it != by_content_.end()) return it->second;
    const auto id = static_cast<uint32_t>(storage_.size());
    storage_.emplace_back(name);
    by_content_.emplace(storage_.back(), id);  // views into the deque's stable strings
    return id;
  }
  const std::string& operator[](uint32_t id) const { return storage_[id]; }

 private:
  std::deque<std::string> storage_;
  std::unordered_map<std::string_view, uint32_t> by_content_;
  std::unordered_map<const char*, uint32_t> by_ptr_;
};

enum class FixedType { kNone, kScalar, kTensorList, kGenericList, kString };

struct ThreadBuffer {
  uint64_t generation = 0;
  int64_t pid = 0;
  int64_t os_tid = 0;
  std::string thread_name;
  EventChunks events;
  NameTable names;
  // record_shapes, per event: input count, then per input: type name id, ndim, dims...
  std::vector<int64_t> shapes;
  std::vector<void*> stack;  // with_stack: raw return addresses of every event, leaf first
  std::vector<MemoryEvent> memory;
  std::vector<OpenSpan> open;
  std::vector<void*> frames;  // scratch for stack capture
  uint32_t dtype_names[static_cast<int>(c10::ScalarType::NumOptions)] = {};  // interned id + 1
  uint32_t fixed_types[5] = {};                                               // interned id + 1, by FixedType
};

struct GlobalState {
  std::atomic<OpTracer*> active{nullptr};
  std::atomic<uint64_t> generation{1};
  std::atomic<OpTracer::CorrelationHook> push_hook{nullptr};
  std::atomic<OpTracer::CorrelationHook> pop_hook{nullptr};
  std::mutex mu;  // guards buffers (registration is once per thread per window)
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  // Buffers of collected windows, emptied, kept for their threads' next window: a window then
  // starts with its chunks, arenas and interned names in place (short windows, e.g. every
  // other step, would otherwise pay for them each time).
  std::vector<std::unique_ptr<ThreadBuffer>> spare;
  // record_span(): finished spans of the open window and the names of their rows (never
  // forgotten, so a row keeps its tid for the life of the process).
  std::vector<Activity> spans;
  std::vector<std::string> span_rows;
};

// What a recycled buffer keeps (larger ones are trimmed): 4 chunks (2.5 MiB) of records,
// 1 Mi shape entries, 256 Ki stack frames.
constexpr size_t kKeepChunks = 4;
constexpr size_t kKeepShapes = size_t{1} << 20;
constexpr size_t kKeepFrames = size_t{1} << 18;

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
  const auto tid = static_cast<int64_t>(syscall(SYS_gettid));
  std::unique_ptr<ThreadBuffer> buf;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto it = g.spare.begin(); it != g.spare.end(); ++it) {
      if ((*it)->os_tid == tid && (*it)->pid == getpid()) {
        buf = std::move(*it);
        g.spare.erase(it);
        break;
      }
    }
  }
  if (!buf) {
    buf = std::make_unique<ThreadBuffer>();
    buf->os_tid = tid;
    buf->open.reserve(64);
  }
  buf->generation = gen;
  buf->pid = getpid();
  buf->thread_name = read_thread_name(tid);  // also refreshes a reused tid's name
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

uint32_t open_span(ThreadBuffer* b, const void* key, ActivityKind kind, uint32_t name) {
  const auto index = static_cast<uint32_t>(b->events.size());
  RawEvent& e = b->events.push();
  e.start_ns = e.end_ns = 0;
  e.record_function_id = e.sequence_nr = e.fwd_thread_id = e.rf_thread_id = -1;
  e.name = name;
  e.shapes_begin = e.shapes_end = 0;
  e.stack_begin = e.stack_end = 0;
  e.kind = kind;
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

// Type names of non-tensor inputs (what torch.profiler writes in "Input type"); the fixed ones
// are interned once per buffer.
uint32_t fixed_type(ThreadBuffer* b, FixedType t) {
  static constexpr std::string_view kNames[] = {"", "Scalar", "TensorList", "GenericList", "String"};
  uint32_t& id = b->fixed_types[static_cast<int>(t)];
  if (id == 0) id = b->names.intern(kNames[static_cast<int>(t)]) + 1;
  return id - 1;
}

uint32_t non_tensor_type(ThreadBuffer* b, const c10::IValue& v) {
  if (v.isScalar()) return fixed_type(b, FixedType::kScalar);
  if (v.isTensorList()) return fixed_type(b, FixedType::kTensorList);
  if (v.isList()) return fixed_type(b, FixedType::kGenericList);
  if (v.isString()) return fixed_type(b, FixedType::kString);
  if (v.isNone()) return fixed_type(b, FixedType::kNone);
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
        if (type == 0) type = b->names.intern(std::string_view(t.dtype().name().data(), t.dtype().name().size())) + 1;
        const auto sizes = t.sizes();
        out.push_back(type - 1);
        out.push_back(static_cast<int64_t>(sizes.size()));
        out.insert(out.end(), sizes.begin(), sizes.end());
        continue;
      }
      out.push_back(fixed_type(b, FixedType::kNone));  // an undefined tensor
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
  const uint32_t index = open_span(b, &fn, ActivityKind::kCpuOp, b->names.intern(fn.name()));
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
  close_span(b, &fn, now);
}

// The Activity of a recorded event (off the hot path: when the window is collected).
Activity to_activity(ThreadBuffer& b, const RawEvent& e) {
  Activity a;
  a.kind = e.kind;
  a.name = b.names[e.name];
  a.start_ns = e.start_ns;
  a.end_ns = e.end_ns;
  a.pid = b.pid;
  a.tid = b.os_tid;
  a.record_function_id = e.record_function_id;
  a.sequence_nr = e.sequence_nr;
  a.fwd_thread_id = e.fwd_thread_id;
  a.rf_thread_id = e.rf_thread_id;
  if (e.shapes_end > e.shapes_begin) {
    const int64_t* q = b.shapes.data() + e.shapes_begin;
    const int64_t n = *q++;
    a.input_dims.reserve(static_cast<size_t>(n));
    a.input_types.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      a.input_types.push_back(b.names[static_cast<uint32_t>(*q++)]);
      const int64_t ndim = *q++;
      a.input_dims.emplace_back(q, q + ndim);
      q += ndim;
    }
  }
  if (e.stack_end > e.stack_begin) {
    a.raw_stack.assign(b.stack.begin() + e.stack_begin, b.stack.begin() + e.stack_end);
  }
  return a;
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
    g.spans.clear();
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
  detail::g_recording.store(true, std::memory_order_relaxed);
}

void OpTracer::clear() {
  if (!active_) return;
  GlobalState& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& b : g.buffers) {
    b->events.clear();
    b->shapes.clear();
    b->stack.clear();
    b->memory.clear();
    for (auto& o : b->open) o.index = kDropped;
  }
  g.spans.clear();
  first_step_ = last_step_ = -1;
  start_ns_ = steady_ns();
}

Timeline OpTracer::stop() {
  Timeline t;
  if (!active_) return t;
  at::removeCallback(callback_handle_);
  detail::g_module_spans.store(false, std::memory_order_relaxed);
  detail::g_recording.store(false, std::memory_order_relaxed);
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
  std::vector<Activity> spans;
  std::vector<std::string> span_rows;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    buffers.swap(g.buffers);
    spans.swap(g.spans);
    span_rows = g.span_rows;
  }
  std::unique_ptr<Symbolizer> symbolizer;
  if (options_.with_stack) symbolizer = std::make_unique<Symbolizer>();
  int64_t sort_index = 0;
  for (auto& b : buffers) {
    for (auto& o : b->open) {
      if (o.index != kDropped) b->events[o.index].end_ns = now;
    }
    if (b->events.size() == 0 && b->memory.empty()) continue;
    t.threads.push_back({b->pid, b->os_tid, b->thread_name, sort_index++});
    const size_t offset = t.activities.size();
    for (auto& m : b->memory) {
      if (m.owner >= 0) m.owner += static_cast<int64_t>(offset);
      t.memory.push_back(m);
    }
    t.activities.reserve(t.activities.size() + b->events.size());
    for (size_t i = 0; i < b->events.size(); ++i) {
      Activity a = to_activity(*b, b->events[i]);
      if (symbolizer && !a.raw_stack.empty()) a.call_stack = symbolizer->symbolize_stack(a.raw_stack);
      t.activities.push_back(std::move(a));
    }
  }
  std::vector<bool> row_seen(span_rows.size(), false);
  for (auto& a : spans) row_seen[static_cast<size_t>(a.tid - kSpanRowTid)] = true;
  for (size_t r = 0; r < span_rows.size(); ++r) {
    if (row_seen[r]) t.threads.push_back({getpid(), kSpanRowTid + static_cast<int64_t>(r), span_rows[r], sort_index++});
  }
  t.activities.insert(t.activities.end(), std::make_move_iterator(spans.begin()), std::make_move_iterator(spans.end()));
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto& b : buffers) {
      b->events.reset(kKeepChunks);
      b->shapes.clear();
      if (b->shapes.capacity() > kKeepShapes) b->shapes.shrink_to_fit();
      b->stack.clear();
      if (b->stack.capacity() > kKeepFrames) b->stack.shrink_to_fit();
      b->memory.clear();
      b->memory.shrink_to_fit();
      b->open.clear();
      g.spare.push_back(std::move(b));
    }
    // Threads come and go (loader workers per validation): keep the most recent few.
    constexpr size_t kMaxSpare = 16;
    if (g.spare.size() > kMaxSpare) g.spare.erase(g.spare.begin(), g.spare.end() - kMaxSpare);
  }
  t.metadata["record_shapes"] = options_.record_shapes ? 1 : 0;
  t.metadata["profile_memory"] = options_.profile_memory ? 1 : 0;
  t.metadata["with_stack"] = options_.with_stack ? 1 : 0;
  t.metadata["with_modules"] = options_.with_modules ? 1 : 0;
  return t;
}

void OpTracer::record_span(std::string_view row, Activity span) {
  GlobalState& g = state();
  if (g.active.load(std::memory_order_acquire) == nullptr) return;
  std::lock_guard<std::mutex> lock(g.mu);
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
  const uint32_t index = open_span(b, &kStepKey, ActivityKind::kUserAnnotation,
                                   b->names.intern(std::string_view("ProfilerStep#" + std::to_string(step))));
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
  const uint32_t index = open_span(b, this, ActivityKind::kUserAnnotation, b->names.intern(name));
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

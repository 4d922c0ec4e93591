// The op tracer's per-thread storage (internal to profiling/trace: models include
// profiling/annotation.h, the trainer op_tracer.h). Each thread that records in a window gets a
// ThreadBuffer of its own, so the hot path takes no lock: fixed-size events in chunks that never
// move, names interned per thread, input shapes and stack frames in per-thread arenas. A global
// registry lists the window's buffers; collected ones are emptied and kept for their thread's
// next window.
//
// Windows are told apart by a generation number: a thread's cached buffer belongs to the open
// window only when its generation is the current one. The hot-path pieces (buffer lookup, span
// open/close, interning) are inline here, as they were when they lived in op_tracer.cpp.
//
// Threading: the window functions at the end are called from the training thread at step
// boundaries; REQUIRES for clear_window_buffers()/end_window_buffers(): no span is opened or
// closed on another thread at that moment (the op tracer's own contract).
#pragma once

#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiling/trace/timeline.h"

namespace rt::prof::detail {

// An open span whose event was dropped (clear_window_buffers) still closes, unrecorded.
inline constexpr uint32_t kDroppedSpan = UINT32_MAX;

// Keys of open spans: the RecordFunction's address for ops, the ScopedAnnotation's address for
// annotations, a static of the tracer's for ProfilerStep spans.
struct OpenSpan {
  const void* key;
  uint32_t index;  // into ThreadBuffer::events, or kDroppedSpan
};

// What the hot path records per event: fixed size, no allocation. Names are interned per
// thread; shapes and stacks go to per-thread arenas. Collection turns these into Activities.
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
  uint32_t stack_begin;  // [stack_begin, stack_end) in ThreadBuffer::stack
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
  const RawEvent& operator[](size_t i) const { return chunks_[i >> kShift][i & (kSize - 1)]; }
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

// Type names of non-tensor inputs (what torch.profiler writes in "Input type").
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
  // Interned name id + 1 (0: not yet interned) of each dtype, and of each FixedType.
  uint32_t dtype_names[static_cast<int>(c10::ScalarType::NumOptions)] = {};
  uint32_t fixed_types[5] = {};

  // Records a new event (times 0, ids -1) and opens its span under `key`; returns its index.
  uint32_t open_span(const void* key, ActivityKind kind, uint32_t name) {
    const auto index = static_cast<uint32_t>(events.size());
    RawEvent& e = events.push();
    e.start_ns = e.end_ns = 0;
    e.record_function_id = e.sequence_nr = e.fwd_thread_id = e.rf_thread_id = -1;
    e.name = name;
    e.shapes_begin = e.shapes_end = 0;
    e.stack_begin = e.stack_end = 0;
    e.kind = kind;
    open.push_back({key, index});
    return index;
  }

  // Closes the span opened with `key`; spans opened after it and still open (mis-nested
  // scopes) end at the same time.
  void close_span(const void* key, int64_t now) {
    for (size_t i = open.size(); i-- > 0;) {
      if (open[i].key != key) continue;
      for (size_t j = i; j < open.size(); ++j) {
        if (open[j].index != kDroppedSpan) events[open[j].index].end_ns = now;
      }
      open.resize(i);
      return;
    }
  }

  // The index of the innermost open span that is recorded, or -1.
  int64_t innermost_recorded_span() const {
    for (size_t i = open.size(); i-- > 0;) {
      if (open[i].index != kDroppedSpan) return open[i].index;
    }
    return -1;
  }

  // A fixed type name, interned once per buffer.
  uint32_t fixed_type(FixedType t) {
    static constexpr std::string_view kNames[] = {"", "Scalar", "TensorList", "GenericList", "String"};
    uint32_t& id = fixed_types[static_cast<int>(t)];
    if (id == 0) id = names.intern(kNames[static_cast<int>(t)]) + 1;
    return id - 1;
  }
};

// The open window's generation, and the calling thread's buffer with the generation it was
// registered for (inline variables: one each per process, read without a call).
inline std::atomic<uint64_t> g_buffer_generation{1};
inline thread_local ThreadBuffer* t_buffer = nullptr;
inline thread_local uint64_t t_buffer_generation = 0;

// Slow path of this_thread_buffer(): takes the thread's spare buffer (or a new one), names it
// from /proc and registers it for generation `gen`.
ThreadBuffer* register_this_thread(uint64_t gen);

// The calling thread's buffer for the open window, registering one on first use.
inline ThreadBuffer* this_thread_buffer() {
  const uint64_t gen = g_buffer_generation.load(std::memory_order_acquire);
  if (t_buffer_generation == gen && t_buffer != nullptr) return t_buffer;
  return register_this_thread(gen);
}

// The calling thread's buffer only if it belongs to the open window.
inline ThreadBuffer* existing_thread_buffer() {
  return t_buffer_generation == g_buffer_generation.load(std::memory_order_acquire) ? t_buffer : nullptr;
}

using BufferList = std::vector<std::unique_ptr<ThreadBuffer>>;

// A window begins: buffers registered from now on belong to it.
void begin_window_buffers();
// Warm-up ends: every buffer drops its records; spans still open stay open, unrecorded.
void clear_window_buffers();
// The window ends: threads stop recording into its buffers, which are handed over.
BufferList end_window_buffers();
// Appends the buffers' events (with_stack: symbolised), memory events and threads to `t`;
// spans still open end at `now`. Threads that recorded nothing are left out.
void append_to_timeline(BufferList& buffers, int64_t now, bool symbolize, Timeline& t);
// Empties the buffers (trimmed to a bounded size) and keeps the most recent few for their
// threads' next window: chunks, arenas and interned names then are in place (short windows,
// e.g. every other step, would otherwise pay for them each time).
void recycle_buffers(BufferList buffers);

}  // namespace rt::prof::detail

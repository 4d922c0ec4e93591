#include "profiling/trace/thread_buffers.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <mutex>

#include "profiling/stacks/native_stack.h"

namespace rt::prof::detail {

namespace {

struct Registry {
  std::mutex mu;       // guards both lists (registration is once per thread per window)
  BufferList buffers;  // the open window's
  BufferList spare;    // emptied buffers of collected windows, by thread
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may outlive statics
  return *r;
}

// What a recycled buffer keeps (larger ones are trimmed): 4 chunks (2.5 MiB) of records,
// 1 Mi shape entries, 256 Ki stack frames; and how many spare buffers are kept.
constexpr size_t kKeepChunks = 4;
constexpr size_t kKeepShapes = size_t{1} << 20;
constexpr size_t kKeepFrames = size_t{1} << 18;
constexpr size_t kMaxSpare = 16;

std::string read_thread_name(int64_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The Activity of a recorded event (off the hot path: when the window is collected).
Activity to_activity(const ThreadBuffer& b, const RawEvent& e) {
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

ThreadBuffer* register_this_thread(uint64_t gen) {
  Registry& r = registry();
  const auto tid = static_cast<int64_t>(syscall(SYS_gettid));
  std::unique_ptr<ThreadBuffer> buf;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto it = r.spare.begin(); it != r.spare.end(); ++it) {
      if ((*it)->os_tid == tid && (*it)->pid == getpid()) {
        buf = std::move(*it);
        r.spare.erase(it);
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
    std::lock_guard<std::mutex> lock(r.mu);
    r.buffers.push_back(std::move(buf));
  }
  t_buffer = raw;
  t_buffer_generation = gen;
  return raw;
}

void begin_window_buffers() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.buffers.clear();
  }
  g_buffer_generation.fetch_add(1, std::memory_order_acq_rel);
}

void clear_window_buffers() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : r.buffers) {
    b->events.clear();
    b->shapes.clear();
    b->stack.clear();
    b->memory.clear();
    for (auto& o : b->open) o.index = kDroppedSpan;
  }
}

BufferList end_window_buffers() {
  g_buffer_generation.fetch_add(1, std::memory_order_acq_rel);
  Registry& r = registry();
  BufferList buffers;
  std::lock_guard<std::mutex> lock(r.mu);
  buffers.swap(r.buffers);
  return buffers;
}

void append_to_timeline(BufferList& buffers, int64_t now, bool symbolize, Timeline& t) {
  std::unique_ptr<Symbolizer> symbolizer;
  if (symbolize) symbolizer = std::make_unique<Symbolizer>();
  int64_t sort_index = 0;
  for (auto& b : buffers) {
    for (auto& o : b->open) {
      if (o.index != kDroppedSpan) b->events[o.index].end_ns = now;
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
  if (symbolizer) t.unresolved_frames = symbolizer->unresolved();
}

void recycle_buffers(BufferList buffers) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : buffers) {
    b->events.reset(kKeepChunks);
    b->shapes.clear();
    if (b->shapes.capacity() > kKeepShapes) b->shapes.shrink_to_fit();
    b->stack.clear();
    if (b->stack.capacity() > kKeepFrames) b->stack.shrink_to_fit();
    b->memory.clear();
    b->memory.shrink_to_fit();
    b->open.clear();
    r.spare.push_back(std::move(b));
  }
  // Threads come and go (loader workers per validation): keep the most recent few.
  if (r.spare.size() > kMaxSpare) r.spare.erase(r.spare.begin(), r.spare.end() - kMaxSpare);
}

}  // namespace rt::prof::detail

// The one timeline every trace source fills and every trace writer reads (as in libkineto:
// sources → one timeline → writers). Times are steady-clock nanoseconds (CPU clock); GPU
// sources convert their timestamps to it before adding events.
//
// The event kinds and their Kineto category names are data, in one table (kinds below and
// category_name()), guarded by a static_assert in timeline.cpp.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "util/json.h"

namespace rt::prof {

enum class ActivityKind : uint8_t {
  kCpuOp,              // an ATen operator or autograd node ("cpu_op")
  kUserAnnotation,     // ProfilerStep#N, trainer phases ("user_annotation")
  kGpuUserAnnotation,  // a user annotation's extent on a GPU stream ("gpu_user_annotation")
  kKernel,             // "kernel"
  kGpuMemcpy,          // "gpu_memcpy"
  kGpuMemset,          // "gpu_memset"
  kCudaRuntime,        // "cuda_runtime"
  kCudaDriver,         // "cuda_driver"
  // Module spans (with_modules): "python_function", the category of torch's module events,
  // which TensorBoard's plugin reads for its Module view (torch_tb_profiler trace.py).
  kPythonFunction,
  kCount
};

// Kineto's category string for a kind (libkineto ActivityType names).
const char* category_name(ActivityKind kind);
bool is_cpu_kind(ActivityKind kind);  // cpu_op, user_annotation, python_function, cuda_runtime/driver

struct Activity {
  ActivityKind kind = ActivityKind::kCpuOp;
  std::string name;
  int64_t start_ns = 0;  // steady clock
  int64_t end_ns = 0;
  int64_t pid = 0;  // CPU: process id; GPU: device index
  int64_t tid = 0;  // CPU: OS thread id; GPU: stream id

  // Linking. record_function_id is ATen's RecordFunction handle (unique per op invocation);
  // GPU activities name the op that launched them in linked_record_function_id (from CUPTI's
  // external correlation). finalize_timeline() turns both into dense "External id"s.
  int64_t record_function_id = -1;
  int64_t linked_record_function_id = -1;
  int64_t external_id = -1;
  int64_t correlation = -1;    // CUPTI correlation id (runtime call ↔ GPU activity)
  int64_t sequence_nr = -1;    // autograd sequence number (forward op ↔ its backward node)
  int64_t fwd_thread_id = -1;  // backward nodes: RecordFunction thread id of the forward op
  int64_t rf_thread_id = -1;   // RecordFunction's small per-thread id of the recording thread
  int64_t parent = -1;         // index of the enclosing activity on the same thread, or -1

  std::vector<std::vector<int64_t>> input_dims;  // record_shapes
  std::vector<std::string> input_types;
  std::vector<void*> raw_stack;         // with_stack: return addresses, leaf first
  std::vector<std::string> call_stack;  // symbolised raw_stack, leaf first

  Json args;  // extra args written as-is (GPU activities); null = none (no allocation per op)
};

// A "[memory]" instant event (Kineto cpu_instant_event): one allocation (bytes > 0) or free
// (bytes < 0) with the allocator's totals after it.
struct MemoryEvent {
  int64_t time_ns = 0;
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t addr = 0;
  int64_t bytes = 0;
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;
  int device_type = 0;  // 0 CPU, 1 CUDA (c10::DeviceType)
  int device_id = -1;
  int64_t owner = -1;  // index of the innermost activity open on the thread, or -1
  // What the block held (a memory category name, static storage), known when it is freed;
  // the writer gives an allocation its free's category. Null: unknown.
  const char* category = nullptr;
};

// An ac2g flow: from a runtime call (activities[from]) to the GPU activity it launched.
struct Flow {
  int64_t id = 0;  // the CUPTI correlation id
  size_t from = 0;
  size_t to = 0;
};

struct ThreadInfo {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string name;
  int64_t sort_index = 0;
};

struct Timeline {
  int64_t start_ns = 0;  // window start, steady clock
  int64_t end_ns = 0;
  int64_t unix_minus_steady_ns = 0;  // add to a steady time to get Unix epoch ns
  int64_t first_step = -1;           // first and last recorded ProfilerStep numbers
  int64_t last_step = -1;
  std::vector<Activity> activities;
  std::vector<MemoryEvent> memory;
  std::vector<Flow> flows;
  std::vector<ThreadInfo> threads;         // CPU threads seen
  Json device_properties = Json::array();  // Kineto deviceProperties entries
  Json metadata = Json::object();          // free top-level metadata (record_shapes, …)
  int64_t dropped_records = 0;             // GPU records lost by the source
  // with_stack: frame names no symbol resolved ("<module>+0x<offset>", "0x<addr>"),
  // listed by the collapsed-stacks writer.
  std::set<std::string> unresolved_frames;
};

// Puts the timeline in the shape writers rely on, idempotently:
//  - activities sorted by (pid, tid, start, longer first);
//  - nesting made exact per thread: a child ends no later than its parent, siblings do not
//    overlap (ends clamped; clock granularity is the only cause);
//  - parent indices recomputed from the nesting; memory owners and flows remapped;
//  - External ids: dense ids (1…) for CPU activities in start order; GPU activities and
//    runtime calls take the id of the op named by linked_record_function_id.
void finalize_timeline(Timeline& timeline);

}  // namespace rt::prof

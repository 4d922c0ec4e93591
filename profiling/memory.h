// Memory measurement (SPEC §7 "Memory"): exact CPU allocator bytes through c10's memory
// reporting hook, process RSS / peak RSS, system RAM use, and CUDA caching-allocator stats.
//
// How the CPU numbers are obtained. c10's DefaultCPUAllocator reports every allocation and free
// to `c10::reportMemoryUsageToProfiler` when `c10::memoryProfilingEnabled()` is true, i.e. when
// the calling thread's c10::ThreadLocalDebugInfo holds a MemoryReportingInfoBase under
// DebugInfoKind::PROFILER_STATE whose memoryProfilingEnabled() returns true. That debug info is
// thread-local, but at::ThreadLocalState carries it into autograd's engine threads and
// at::launch tasks, so backward's allocations are seen too. MemoryTrackingScope installs a
// MemoryReporter on the current thread (the trainer thread); several threads may install the
// same reporter (its counters are atomic).
//
// Exactness and its limits: bytes_in_use is the sum of the sizes c10 reports (the requested
// nbytes, which is what the CPU allocator's own accounting uses), counting only memory
// allocated while some thread had tracking installed. c10 reports a free only when the
// freeing thread is tracked and the block was allocated while tracking was on, so a tensor
// allocated under tracking but freed on an untracked thread stays counted; tensors allocated
// before tracking began are invisible (and c10 logs a warning once per 1000 such frees).
// The PROFILER_STATE slot is also used by torch's own autograd profiler: if one is active on
// the thread it shadows this reporter (ThreadLocalDebugInfo::get returns the innermost).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "data/util/torch_compat.h"

namespace rt::prof {

// One allocation (bytes > 0) or free (bytes < 0) as c10 reports it; totals as c10 reports
// them (CPU: all tracked live bytes process-wide, reserved 0; CUDA: the caching allocator's).
// Called on the allocating thread, possibly concurrently; must not allocate tensors.
using AllocationListener = std::function<void(void* ptr, int64_t bytes, int64_t total_allocated,
                                              int64_t total_reserved, c10::Device device)>;

class MemoryReporter final : public c10::MemoryReportingInfoBase {
 public:
  MemoryReporter() = default;

  void reportMemoryUsage(void* ptr, int64_t alloc_size, compat::memory_total_t total_allocated,
                         compat::memory_total_t total_reserved, c10::Device device) override;
  bool memoryProfilingEnabled() const override { return true; }

  // Live CPU bytes allocated under tracking, and their maximum since construction/reset_peak().
  int64_t cpu_bytes_in_use() const { return cpu_in_use_.load(std::memory_order_relaxed); }
  int64_t cpu_peak_bytes_in_use() const { return cpu_peak_.load(std::memory_order_relaxed); }
  void reset_peak() { cpu_peak_.store(cpu_bytes_in_use(), std::memory_order_relaxed); }
  int64_t allocation_count() const { return allocations_.load(std::memory_order_relaxed); }
  int64_t free_count() const { return frees_.load(std::memory_order_relaxed); }

  // Forwards every event to `listener` (empty = none). Safe to change while allocations run;
  // a listener may still be called briefly after being replaced.
  void set_listener(AllocationListener listener);

 private:
  std::atomic<int64_t> cpu_in_use_{0};
  std::atomic<int64_t> cpu_peak_{0};
  std::atomic<int64_t> allocations_{0};
  std::atomic<int64_t> frees_{0};
  std::atomic<bool> has_listener_{false};
  std::shared_ptr<const AllocationListener> listener_;  // std::atomic_load/store.
};

// The process-wide reporter the trainer uses (created on first call).
std::shared_ptr<MemoryReporter> default_memory_reporter();

// Installs `reporter` (default: default_memory_reporter()) as the current thread's
// PROFILER_STATE debug info for the scope's lifetime. Must be destroyed on the thread that
// created it, in LIFO order with other debug-info guards.
class MemoryTrackingScope {
 public:
  MemoryTrackingScope();
  explicit MemoryTrackingScope(std::shared_ptr<MemoryReporter> reporter);
  MemoryTrackingScope(const MemoryTrackingScope&) = delete;
  MemoryTrackingScope& operator=(const MemoryTrackingScope&) = delete;
  MemoryReporter& reporter() const { return *reporter_; }

 private:
  std::shared_ptr<MemoryReporter> reporter_;
  c10::DebugInfoGuard guard_;
};

// /proc/self/status VmRSS / VmHWM in bytes; zeros where unavailable.
struct ProcessMemory {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
};
ProcessMemory read_process_memory();

// /proc/meminfo: used = MemTotal − MemAvailable (as psutil.virtual_memory().percent).
struct SystemMemory {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
  double used_percent = 0.0;
};
SystemMemory read_system_memory();

// CUDA caching allocator statistics of one device (aggregate pools).
struct CudaMemory {
  bool available = false;  // false when LibTorch has no CUDA or no device was asked for
  int device = 0;
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
// REQUIRES: `device` is a valid CUDA device when LibTorch has CUDA. Without CUDA support
// compiled in, returns {available = false}.
CudaMemory read_cuda_memory(int device);
// Resets the caching allocator's peak counters of `device` (no-op without CUDA).
void reset_cuda_peak(int device);
// Whether this build reads CUDA allocator statistics.
bool cuda_memory_stats_compiled();

// One memory_profile.json sample.
struct MemorySample {
  bool cpu_tracked = false;  // cpu_* below come from a MemoryReporter
  int64_t cpu_bytes_in_use = 0;
  int64_t cpu_peak_bytes_in_use = 0;
  ProcessMemory process;
  SystemMemory system;
  CudaMemory cuda;
  double timestamp = 0.0;  // Unix seconds
};

// Reads everything at once. `reporter` may be null (no CPU allocator numbers); `cuda_device`
// < 0 skips CUDA.
MemorySample sample_memory(const MemoryReporter* reporter, int cuda_device = -1);

double unix_time_seconds();

}  // namespace rt::prof

// Memory measurement (profiling.memory): exact CPU allocator bytes, process RSS / peak RSS,
// system RAM use, and CUDA caching-allocator stats.
//
// How the CPU numbers are obtained. The first MemoryTrackingScope replaces LibTorch's CPU
// allocator by a counting one (c10::SetAllocator; it stays installed for the rest of the
// process, counting only while a scope is alive): it allocates as c10's default does
// (c10::alloc_cpu, 64-byte aligned) with a 64-byte header in front of each block holding the
// block's size and the reporter that counted it; the block's deleter subtracts that size from
// the same reporter. Counting is two relaxed atomic additions per allocation
// and free, on every thread (trainer, autograd engine, at::parallel_for and loader workers),
// with no lock and no table — c10's own hook (c10::memoryProfilingEnabled → reportMemoryUsage)
// takes a mutex and a hash-map insert/erase per allocation, a cost on every allocation of every
// step that this design does not have (its overhead is a benchmark: BENCHMARKS.md, "Timing +
// memory profiling overhead").
//
// Exactness and its limits: bytes_in_use is the sum of the requested nbytes of live blocks
// allocated while tracking was installed (what c10's accounting reports too); blocks
// allocated before are invisible, and blocks allocated under tracking are subtracted when
// freed even after the scope ended. If another library installed a CPU allocator with a
// higher c10 priority, the counting allocator cannot take over and c10's hook is used
// instead (memoryProfilingEnabled() = true; thread-local: the trainer installs a scope on its
// loader workers too). CUDA memory always comes through c10's hook (the caching allocator
// reports to the thread's PROFILER_STATE debug info, which the scope installs); torch's own
// autograd profiler, if active on a thread, shadows that slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/torch_compat.h"

namespace rt::prof {

// What a block of memory holds (memory_profile.json "categories"). A block is kOther
// (activations and temporaries) until the trainer tags it (MemoryReporter::tag_storage).
enum class MemoryCategory : uint8_t { kOther = 0, kParameters, kBuffers, kGradients, kOptimizerState };
constexpr int kMemoryCategoryCount = 5;
// "activations_and_temporaries", "parameters", "buffers", "gradients", "optimizer_state".
const char* memory_category_name(MemoryCategory category);

// Live bytes by category (indexed by MemoryCategory); [kOther] = what is not tagged.
struct CategoryBytes {
  int64_t bytes[kMemoryCategoryCount] = {};
  int64_t& operator[](MemoryCategory c) { return bytes[static_cast<int>(c)]; }
  int64_t operator[](MemoryCategory c) const { return bytes[static_cast<int>(c)]; }
};

// The largest bytes_in_use since the last take_interval_peak(), and what it was made of.
struct PeakComposition {
  int64_t bytes_in_use = 0;
  CategoryBytes categories;
};

// One allocation (bytes > 0) or free (bytes < 0); totals after it (CPU: the reporter's live
// bytes, reserved 0; CUDA: the caching allocator's, as c10 reports them).
// `category`: a CPU free's block tag (kOther when untagged); kOther for allocations (tagged
// later, if ever) and for CUDA blocks (not tagged).
// Called on the allocating thread, possibly concurrently; must not allocate tensors.
using AllocationListener =
    std::function<void(void* ptr, int64_t bytes, int64_t total_allocated, int64_t total_reserved,
                       c10::Device device, MemoryCategory category)>;

class MemoryReporter final : public c10::MemoryReportingInfoBase {
 public:
  MemoryReporter() = default;

  // c10's hook: CUDA events, and CPU events while the counting allocator is not in place.
  void reportMemoryUsage(void* ptr, int64_t alloc_size, compat::memory_total_t total_allocated,
                         compat::memory_total_t total_reserved, c10::Device device) override;
  // Whether c10's CPU allocator must report through the hook (see the top of this file).
  bool memoryProfilingEnabled() const override;
  // One CPU allocation (bytes > 0) or free (bytes < 0) from the counting allocator.
  // `category`: the freed block's tag.
  void record_cpu(void* ptr, int64_t bytes, MemoryCategory category = MemoryCategory::kOther);

  // Live CPU bytes allocated under tracking, and their maximum since construction/reset_peak().
  int64_t cpu_bytes_in_use() const { return cpu_in_use_.load(std::memory_order_relaxed); }
  int64_t cpu_peak_bytes_in_use() const { return cpu_peak_.load(std::memory_order_relaxed); }
  void reset_peak() { cpu_peak_.store(cpu_bytes_in_use(), std::memory_order_relaxed); }

  // Tags the block behind `storage` as `category` when this reporter counted it (the counting
  // allocator made it while this reporter counted); returns whether it did. The block's bytes
  // move from its previous category to `category` and leave it when the block is freed. The
  // caller holds `storage`, so the block cannot be freed meanwhile.
  bool tag_storage(const c10::Storage& storage, MemoryCategory category);
  // Live bytes of the blocks this reporter counted, by tag ([kOther]: untagged).
  CategoryBytes cpu_bytes_by_category() const;
  // The peak of cpu_bytes_in_use since the previous call (or construction) with the tagged
  // bytes at that moment, then starts a new interval at the current bytes in use. Under
  // concurrent allocation the composition is read while other threads may move it by a block.
  PeakComposition take_interval_peak();
  int64_t allocation_count() const { return allocations_.load(std::memory_order_relaxed); }
  int64_t free_count() const { return frees_.load(std::memory_order_relaxed); }

  // Forwards every event to `listener` (empty = none). Safe to change while allocations run;
  // a listener may still be called briefly after being replaced.
  void set_listener(AllocationListener listener);

 private:
  int64_t add_cpu_bytes(int64_t bytes);  // returns the live bytes after it, keeps the peak
  void count_and_notify(void* ptr, int64_t bytes, int64_t total_allocated, int64_t total_reserved,
                        c10::Device device, MemoryCategory category = MemoryCategory::kOther);

  std::atomic<int64_t> cpu_in_use_{0};
  std::atomic<int64_t> cpu_peak_{0};
  std::atomic<int64_t> tagged_[kMemoryCategoryCount] = {};  // [kOther] unused
  std::atomic<int64_t> interval_peak_{0};
  std::atomic<int64_t> interval_peak_tagged_[kMemoryCategoryCount] = {};
  std::atomic<int64_t> allocations_{0};
  std::atomic<int64_t> frees_{0};
  std::atomic<bool> has_listener_{false};
  std::shared_ptr<const AllocationListener> listener_;  // std::atomic_load/store.
};

// The process-wide reporter the trainer uses (created on first call).
std::shared_ptr<MemoryReporter> default_memory_reporter();

// For the scope's lifetime: counts every CPU allocation of the process into `reporter`
// (default: default_memory_reporter()) through the counting allocator (scopes nest and may
// live on several threads; the most recent reporter counts new blocks; after the last scope
// ends, new blocks are not counted), and installs `reporter` as the current thread's PROFILER_STATE
// debug info (CUDA events; the CPU fallback). Must be destroyed on the thread that created it,
// in LIFO order with other debug-info guards. Reporters used by a scope are kept alive until
// exit (blocks they counted may be freed later).
//
// REQUIRES: no other code swaps the CPU allocator while scopes are alive.
class MemoryTrackingScope {
 public:
  MemoryTrackingScope();
  explicit MemoryTrackingScope(std::shared_ptr<MemoryReporter> reporter);
  MemoryTrackingScope(const MemoryTrackingScope&) = delete;
  MemoryTrackingScope& operator=(const MemoryTrackingScope&) = delete;
  ~MemoryTrackingScope();
  MemoryReporter& reporter() const { return *reporter_; }

 private:
  std::shared_ptr<MemoryReporter> reporter_;
  MemoryReporter* previous_ = nullptr;  // the reporter counting before this scope
  c10::DebugInfoGuard guard_;
};

// Whether the counting CPU allocator counts now (a scope is alive and the allocator could take
// its place; false: c10's hook counts CPU memory, or nothing is tracked).
bool counting_cpu_allocator_installed();

// /proc/self/status VmRSS / VmHWM in bytes, and VmRSS split into RssAnon (heap, tensors,
// stacks: what a leak grows) and RssFile (file-backed pages: shared libraries and memory-mapped
// files such as an LMDB dataset, which grow as records are first read, up to the file's size);
// zeros where unavailable (RssAnon/RssFile need Linux ≥ 4.5).
struct ProcessMemory {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
  int64_t rss_anon_bytes = 0;
  int64_t rss_file_bytes = 0;
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
// The device's memory as the driver reports it (cudaMemGetInfo): free to any process, and total.
// Zeros without CUDA support compiled in.
struct CudaDeviceMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
CudaDeviceMemory read_cuda_device_memory(int device);
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

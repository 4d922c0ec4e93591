#include "profiling/memory.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#if defined(RT_TORCH_HAS_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace rt::prof {

void MemoryReporter::reportMemoryUsage(void* ptr, int64_t alloc_size,
                                       compat::memory_total_t total_allocated,
                                       compat::memory_total_t total_reserved, c10::Device device) {
  if (device.is_cpu()) {
    const int64_t now = cpu_in_use_.fetch_add(alloc_size, std::memory_order_relaxed) + alloc_size;
    int64_t peak = cpu_peak_.load(std::memory_order_relaxed);
    while (now > peak && !cpu_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  (alloc_size >= 0 ? allocations_ : frees_).fetch_add(1, std::memory_order_relaxed);
  if (has_listener_.load(std::memory_order_acquire)) {
    auto listener = std::atomic_load(&listener_);
    if (listener) {
      (*listener)(ptr, alloc_size, static_cast<int64_t>(total_allocated),
                  static_cast<int64_t>(total_reserved), device);
    }
  }
}

void MemoryReporter::set_listener(AllocationListener listener) {
  if (listener) {
    std::atomic_store(&listener_, std::make_shared<const AllocationListener>(std::move(listener)));
    has_listener_.store(true, std::memory_order_release);
  } else {
    has_listener_.store(false, std::memory_order_release);
    std::atomic_store(&listener_, std::shared_ptr<const AllocationListener>());
  }
}

std::shared_ptr<MemoryReporter> default_memory_reporter() {
  static const std::shared_ptr<MemoryReporter> reporter = std::make_shared<MemoryReporter>();
  return reporter;
}

MemoryTrackingScope::MemoryTrackingScope() : MemoryTrackingScope(default_memory_reporter()) {}

MemoryTrackingScope::MemoryTrackingScope(std::shared_ptr<MemoryReporter> reporter)
    : reporter_(std::move(reporter)), guard_(c10::DebugInfoKind::PROFILER_STATE, reporter_) {}

namespace {

// Value of a "Key:   123 kB" line of a /proc file, in bytes; -1 when absent.
int64_t proc_kb_field(const std::string& text, const std::string& key) {
  size_t line = 0;
  while (line < text.size()) {
    if (text.compare(line, key.size(), key) == 0 && text.size() > line + key.size() &&
        text[line + key.size()] == ':') {
      long long kb = 0;
      if (std::sscanf(text.c_str() + line + key.size() + 1, "%lld", &kb) != 1) return -1;
      return static_cast<int64_t>(kb) * 1024;
    }
    const size_t next = text.find('\n', line);
    if (next == std::string::npos) break;
    line = next + 1;
  }
  return -1;
}

std::string read_small_file(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

ProcessMemory read_process_memory() {
  const std::string status = read_small_file("/proc/self/status");
  ProcessMemory m;
  m.rss_bytes = std::max<int64_t>(0, proc_kb_field(status, "VmRSS"));
  m.peak_rss_bytes = std::max<int64_t>(m.rss_bytes, proc_kb_field(status, "VmHWM"));
  return m;
}

SystemMemory read_system_memory() {
  const std::string info = read_small_file("/proc/meminfo");
  SystemMemory m;
  m.total_bytes = std::max<int64_t>(0, proc_kb_field(info, "MemTotal"));
  int64_t available = proc_kb_field(info, "MemAvailable");
  if (available < 0) {  // Kernels before 3.14 lack MemAvailable.
    available = std::max<int64_t>(0, proc_kb_field(info, "MemFree")) +
                std::max<int64_t>(0, proc_kb_field(info, "Buffers")) +
                std::max<int64_t>(0, proc_kb_field(info, "Cached"));
  }
  m.available_bytes = available;
  if (m.total_bytes > 0) {
    m.used_percent = 100.0 * static_cast<double>(m.total_bytes - m.available_bytes) /
                     static_cast<double>(m.total_bytes);
  }
  return m;
}

bool cuda_memory_stats_compiled() {
#if defined(RT_TORCH_HAS_CUDA)
  return true;
#else
  return false;
#endif
}

CudaMemory read_cuda_memory(int device) {
  CudaMemory m;
  m.device = device;
#if defined(RT_TORCH_HAS_CUDA)
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  // Index 0 is StatType::AGGREGATE (all pools) in every LibTorch version; the enum itself moved
  // from c10::cuda::CUDACachingAllocator to c10::CachingDeviceAllocator in 2.5.
  m.available = true;
  m.allocated_bytes = stats.allocated_bytes[0].current;
  m.peak_allocated_bytes = stats.allocated_bytes[0].peak;
  m.reserved_bytes = stats.reserved_bytes[0].current;
  m.peak_reserved_bytes = stats.reserved_bytes[0].peak;
#endif
  return m;
}

void reset_cuda_peak(int device) {
#if defined(RT_TORCH_HAS_CUDA)
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
#else
  (void)device;
#endif
}

double unix_time_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

MemorySample sample_memory(const MemoryReporter* reporter, int cuda_device) {
  MemorySample s;
  if (reporter != nullptr) {
    s.cpu_tracked = true;
    s.cpu_bytes_in_use = reporter->cpu_bytes_in_use();
    s.cpu_peak_bytes_in_use = reporter->cpu_peak_bytes_in_use();
  }
  s.process = read_process_memory();
  s.system = read_system_memory();
  if (cuda_device >= 0) s.cuda = read_cuda_memory(cuda_device);
  s.timestamp = unix_time_seconds();
  return s;
}

}  // namespace rt::prof

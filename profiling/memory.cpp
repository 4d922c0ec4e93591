#include "profiling/memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#if defined(RT_TORCH_HAS_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace rt::prof {

namespace {

// The counting CPU allocator (see memory.h). The header keeps c10's 64-byte data alignment.
constexpr size_t kHeaderBytes = 64;
constexpr uint64_t kBlockMagic = 0x72742d636f756e74ULL;  // "rt-count"
struct BlockHeader {
  uint64_t magic;
  int64_t bytes;
  MemoryReporter* reporter;       // null when no scope counted the block; kept alive (kept_alive)
  std::atomic<uint8_t> category;  // MemoryCategory, set by MemoryReporter::tag_storage
};
static_assert(sizeof(BlockHeader) <= kHeaderBytes, "block header must fit its 64 bytes");

std::atomic<MemoryReporter*> g_counting_reporter{nullptr};
std::atomic<bool> g_counting_active{false};
std::atomic<c10::Allocator*> g_previous_allocator{nullptr};

// Deleter of the blocks this allocator made (DataPtr deleter).
void counting_delete(void* data) {
  char* raw = static_cast<char*>(data) - kHeaderBytes;
  auto* h = reinterpret_cast<BlockHeader*>(raw);
  if (h->reporter != nullptr) {
    h->reporter->record_cpu(data, -h->bytes,
                            static_cast<MemoryCategory>(h->category.load(std::memory_order_relaxed)));
  }
  h->~BlockHeader();
  c10::free_cpu(raw);
}

BlockHeader* counted_block_header(const c10::Storage& storage) {
  const c10::DataPtr& p = storage.data_ptr();
  if (p.get() == nullptr || p.get_deleter() != &counting_delete) return nullptr;
  auto* h = reinterpret_cast<BlockHeader*>(static_cast<char*>(p.get()) - kHeaderBytes);
  return h->magic == kBlockMagic ? h : nullptr;
}

// raw_deleter(): callers such as oneDNN's engine allocator (ideep) free through whatever CPU
// allocator is current, so a block c10's allocator made before the swap can arrive here; the
// header's magic tells the two apart, and foreign blocks go to the allocator that made them.
void counting_raw_delete(void* data) {
  if (data == nullptr) return;
  const auto* h = reinterpret_cast<const BlockHeader*>(static_cast<char*>(data) - kHeaderBytes);
  if (h->magic == kBlockMagic) return counting_delete(data);
  c10::Allocator* previous = g_previous_allocator.load(std::memory_order_acquire);
  if (previous != nullptr && previous->raw_deleter() != nullptr) return previous->raw_deleter()(data);
  c10::free_cpu(data);
}

class CountingCpuAllocator final : public compat::CpuAllocator {
 public:
  c10::DeleterFnPtr raw_deleter() const override { return &counting_raw_delete; }

 protected:
  c10::DataPtr allocate_block(size_t nbytes) const override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &counting_delete, cpu};  // as c10's: no block
    char* raw = static_cast<char*>(c10::alloc_cpu(nbytes + kHeaderBytes));
    MemoryReporter* r = g_counting_reporter.load(std::memory_order_acquire);
    auto* h = new (raw) BlockHeader;
    h->magic = kBlockMagic;
    h->bytes = static_cast<int64_t>(nbytes);
    h->reporter = r;
    h->category.store(static_cast<uint8_t>(MemoryCategory::kOther), std::memory_order_relaxed);
    void* data = raw + kHeaderBytes;
    if (r != nullptr) r->record_cpu(data, static_cast<int64_t>(nbytes));
    // data == context, so raw_allocate/raw_deallocate work through raw_deleter().
    return {data, data, &counting_delete, cpu};
  }
};

CountingCpuAllocator& counting_allocator() {
  static CountingCpuAllocator* a = new CountingCpuAllocator();  // never destroyed: blocks outlive statics
  return *a;
}

struct InstallState {
  std::mutex mu;
  int scopes = 0;
  bool installed = false;
  std::vector<std::shared_ptr<MemoryReporter>> kept_alive;
};
InstallState& install_state() {
  static InstallState* s = new InstallState();
  return *s;
}

}  // namespace

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kOther:
      return "activations_and_temporaries";
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kBuffers:
      return "buffers";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizerState:
      return "optimizer_state";
  }
  return "?";
}

int64_t MemoryReporter::add_cpu_bytes(int64_t bytes) {
  const int64_t now = cpu_in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = cpu_peak_.load(std::memory_order_relaxed);
  while (now > peak && !cpu_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  int64_t interval = interval_peak_.load(std::memory_order_relaxed);
  while (now > interval) {
    if (interval_peak_.compare_exchange_weak(interval, now, std::memory_order_relaxed)) {
      for (int c = 1; c < kMemoryCategoryCount; ++c) {
        interval_peak_tagged_[c].store(tagged_[c].load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
      break;
    }
  }
  return now;
}

bool MemoryReporter::tag_storage(const c10::Storage& storage, MemoryCategory category) {
  BlockHeader* h = counted_block_header(storage);
  if (h == nullptr || h->reporter != this) return false;
  const auto previous = static_cast<MemoryCategory>(
      h->category.exchange(static_cast<uint8_t>(category), std::memory_order_relaxed));
  if (previous == category) return true;
  if (previous != MemoryCategory::kOther) {
    tagged_[static_cast<int>(previous)].fetch_sub(h->bytes, std::memory_order_relaxed);
  }
  if (category != MemoryCategory::kOther) {
    tagged_[static_cast<int>(category)].fetch_add(h->bytes, std::memory_order_relaxed);
  }
  return true;
}

CategoryBytes MemoryReporter::cpu_bytes_by_category() const {
  CategoryBytes out;
  int64_t tagged = 0;
  for (int c = 1; c < kMemoryCategoryCount; ++c) {
    out.bytes[c] = tagged_[c].load(std::memory_order_relaxed);
    tagged += out.bytes[c];
  }
  out[MemoryCategory::kOther] = std::max<int64_t>(0, cpu_bytes_in_use() - tagged);
  return out;
}

PeakComposition MemoryReporter::take_interval_peak() {
  PeakComposition p;
  p.bytes_in_use = interval_peak_.exchange(cpu_bytes_in_use(), std::memory_order_relaxed);
  int64_t tagged = 0;
  for (int c = 1; c < kMemoryCategoryCount; ++c) {
    p.categories.bytes[c] = interval_peak_tagged_[c].exchange(tagged_[c].load(std::memory_order_relaxed),
                                                              std::memory_order_relaxed);
    tagged += p.categories.bytes[c];
  }
  p.categories[MemoryCategory::kOther] = std::max<int64_t>(0, p.bytes_in_use - tagged);
  return p;
}

void MemoryReporter::count_and_notify(void* ptr, int64_t bytes, int64_t total_allocated,
                                      int64_t total_reserved, c10::Device device, MemoryCategory category) {
  (bytes >= 0 ? allocations_ : frees_).fetch_add(1, std::memory_order_relaxed);
  if (has_listener_.load(std::memory_order_acquire)) {
    auto listener = std::atomic_load(&listener_);
    if (listener) (*listener)(ptr, bytes, total_allocated, total_reserved, device, category);
  }
}

void MemoryReporter::record_cpu(void* ptr, int64_t bytes, MemoryCategory category) {
  if (category != MemoryCategory::kOther)
    tagged_[static_cast<int>(category)].fetch_add(bytes, std::memory_order_relaxed);
  count_and_notify(ptr, bytes, add_cpu_bytes(bytes), 0, c10::Device(c10::DeviceType::CPU), category);
}

bool MemoryReporter::memoryProfilingEnabled() const {
#if defined(RT_TORCH_HAS_CUDA)
  return true;  // the CUDA caching allocator may only report when this is true
#else
  return !counting_cpu_allocator_installed();
#endif
}

void MemoryReporter::reportMemoryUsage(void* ptr, int64_t alloc_size, compat::memory_total_t total_allocated,
                                       compat::memory_total_t total_reserved, c10::Device device) {
  if (device.is_cpu()) {
    if (counting_cpu_allocator_installed()) return;  // counted by the counting allocator
    add_cpu_bytes(alloc_size);
  }
  count_and_notify(ptr, alloc_size, static_cast<int64_t>(total_allocated),
                   static_cast<int64_t>(total_reserved), device);
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

bool counting_cpu_allocator_installed() { return g_counting_active.load(std::memory_order_acquire); }

MemoryTrackingScope::MemoryTrackingScope() : MemoryTrackingScope(default_memory_reporter()) {}

MemoryTrackingScope::MemoryTrackingScope(std::shared_ptr<MemoryReporter> reporter)
    : reporter_(std::move(reporter)), guard_(c10::DebugInfoKind::PROFILER_STATE, reporter_) {
  InstallState& st = install_state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (std::find(st.kept_alive.begin(), st.kept_alive.end(), reporter_) == st.kept_alive.end()) {
    st.kept_alive.push_back(reporter_);
  }
  previous_ = g_counting_reporter.exchange(reporter_.get(), std::memory_order_acq_rel);
  if (st.scopes++ == 0) {
    if (!st.installed) {
      // Installed once and left in place: blocks it made may be freed through the current
      // allocator's raw_deleter() long after (oneDNN does), which must stay ours.
      g_previous_allocator.store(c10::GetAllocator(c10::DeviceType::CPU), std::memory_order_release);
      c10::SetAllocator(c10::DeviceType::CPU, &counting_allocator());
      st.installed = true;
    }
    // A higher-priority allocator keeps its place: fall back to c10's hook.
    g_counting_active.store(c10::GetAllocator(c10::DeviceType::CPU) == &counting_allocator(),
                            std::memory_order_release);
  }
}

MemoryTrackingScope::~MemoryTrackingScope() {
  InstallState& st = install_state();
  std::lock_guard<std::mutex> lock(st.mu);
  g_counting_reporter.store(previous_, std::memory_order_release);
  if (--st.scopes == 0) {
    g_counting_active.store(false, std::memory_order_release);
    g_counting_reporter.store(nullptr, std::memory_order_release);
  }
}

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
  m.rss_anon_bytes = std::max<int64_t>(0, proc_kb_field(status, "RssAnon"));
  m.rss_file_bytes = std::max<int64_t>(0, proc_kb_field(status, "RssFile"));
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
    m.used_percent =
        100.0 * static_cast<double>(m.total_bytes - m.available_bytes) / static_cast<double>(m.total_bytes);
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

CudaDeviceMemory read_cuda_device_memory(int device) {
  CudaDeviceMemory m;
#if defined(RT_TORCH_HAS_CUDA)
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    m.free_bytes = static_cast<int64_t>(free_bytes);
    m.total_bytes = static_cast<int64_t>(total_bytes);
  }
#else
  (void)device;
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

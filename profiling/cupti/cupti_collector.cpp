#include "profiling/cupti/cupti_collector.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <vector>

#include "profiling/cupti/cupti_convert.h"
#include "profiling/trace/op_tracer.h"
#include "util/clock.h"

namespace rt::prof {

namespace {

constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned activity buffers

const char* cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : "unknown CUPTI error";
}

void push_correlation(uint64_t id) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}
void pop_correlation(uint64_t) {
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

std::string api_name(bool driver, uint32_t cbid) {
  const char* name = nullptr;
  cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
  if (name == nullptr) return {};
  std::string s = name;
  // "cudaLaunchKernel_v7000" → "cudaLaunchKernel", as Kineto shows it.
  const size_t v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      s.find_first_not_of("0123456789", v + 2) == std::string::npos)
    s.resize(v);
  return s;
}

}  // namespace

struct CuptiCollector::State {
  CuptiCollectorOptions options;
  std::vector<GpuDeviceInfo> devices;
  std::mutex mu;  // guards the pool and the filled list (CUPTI calls back on its own thread)
  std::vector<uint8_t*> free_buffers;
  std::vector<std::pair<uint8_t*, size_t>> filled;
  size_t allocated_bytes = 0;
  int64_t dropped = 0;
  ClockSync clock;
  bool running = false;

  uint8_t* take_buffer() {
    std::lock_guard<std::mutex> lock(mu);
    if (!free_buffers.empty()) {
      uint8_t* b = free_buffers.back();
      free_buffers.pop_back();
      return b;
    }
    if (allocated_bytes + options.buffer_bytes > options.max_total_bytes) return nullptr;
    allocated_bytes += options.buffer_bytes;
    return static_cast<uint8_t*>(std::aligned_alloc(kAlign, options.buffer_bytes));
  }
  void give_back(uint8_t* b) {
    std::lock_guard<std::mutex> lock(mu);
    free_buffers.push_back(b);
  }
  ~State() {
    for (auto* b : free_buffers) std::free(b);
    for (auto& f : filled) std::free(f.first);
  }
};

namespace {

std::atomic<CuptiCollector::State*> g_state{nullptr};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_num_records) {
  CuptiCollector::State* s = g_state.load();
  *max_num_records = 0;
  *buffer = s != nullptr ? s->take_buffer() : nullptr;
  *size = *buffer != nullptr ? s->options.buffer_bytes : 0;  // size 0: CUPTI drops and counts
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid_size) {
  CuptiCollector::State* s = g_state.load();
  if (s == nullptr) {
    std::free(buffer);
    return;
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->dropped += static_cast<int64_t>(dropped);
  }
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mu);
  s->filled.emplace_back(buffer, valid_size);
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                     CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

}  // namespace

std::unique_ptr<CuptiCollector> CuptiCollector::create(CuptiCollectorOptions options) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::cerr << "profiling: no CUDA device (" << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices")
              << "); GPU tracing off, CPU operators are still traced\n";
    return nullptr;
  }
  if (g_state.load() != nullptr) {
    std::cerr << "profiling: a CUPTI collector already exists; GPU tracing stays with it\n";
    return nullptr;
  }
  auto state = std::make_unique<State>();
  state->options = options;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuDeviceInfo d;
    d.id = i;
    d.name = p.name;
    d.total_global_mem = static_cast<int64_t>(p.totalGlobalMem);
    d.compute_major = p.major;
    d.compute_minor = p.minor;
    d.max_threads_per_block = p.maxThreadsPerBlock;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
    d.regs_per_block = p.regsPerBlock;
    d.regs_per_sm = p.regsPerMultiprocessor;
    d.warp_size = p.warpSize;
    d.shared_mem_per_block = static_cast<int64_t>(p.sharedMemPerBlock);
    d.shared_mem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
    d.shared_mem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
    d.num_sms = p.multiProcessorCount;
    state->devices.push_back(d);
  }
  for (size_t i = 0; i < options.preallocated_buffers; ++i) {
    if (uint8_t* b = state->take_buffer()) state->free_buffers.push_back(b);
  }
  const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    std::cerr << "profiling: CUPTI unavailable (" << cupti_error(r) << "); GPU tracing off\n";
    return nullptr;
  }
  g_state.store(state.get());
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(state)));
}

CuptiCollector::CuptiCollector(std::unique_ptr<State> state) : state_(std::move(state)) {}

CuptiCollector::~CuptiCollector() {
  if (state_->running) {
    Timeline discarded;
    stop_into(discarded);
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_state.store(nullptr);
}

void CuptiCollector::start() {
  if (state_->running) return;
  for (CUpti_ActivityKind k : kKinds) cuptiActivityEnable(k);
  if (state_->options.driver_api) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  uint64_t gpu_now = 0;
  cuptiGetTimestamp(&gpu_now);
  state_->clock = ClockSync{static_cast<int64_t>(gpu_now), steady_ns()};
  OpTracer::set_correlation_hooks(&push_correlation, &pop_correlation);
  state_->running = true;
}

void CuptiCollector::clear() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<std::pair<uint8_t*, size_t>> filled;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    filled.swap(state_->filled);
    state_->dropped = 0;
  }
  for (auto& f : filled) state_->give_back(f.first);
}

void CuptiCollector::stop_into(Timeline& timeline) {
  if (!state_->running) return;
  OpTracer::set_correlation_hooks(nullptr, nullptr);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  if (state_->options.driver_api) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
  state_->running = false;
  std::vector<std::pair<uint8_t*, size_t>> filled;
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    filled.swap(state_->filled);
    dropped = state_->dropped;
    state_->dropped = 0;
  }
  CuptiConverter conv(state_->clock, state_->devices, &api_name, getpid());
  for (auto& [buffer, size] : filled) {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, size, &record) == CUPTI_SUCCESS) conv.add_record(record);
    state_->give_back(buffer);
  }
  conv.append_to(timeline);
  timeline.dropped_records += dropped;
  if (dropped > 0) {
    std::cerr << "profiling: CUPTI dropped " << dropped << " GPU activity records (buffer cap "
              << (state_->options.max_total_bytes >> 20) << " MiB reached)\n";
  }
}

}  // namespace rt::prof

#include "profiling/cupti/cupti_convert.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

namespace rt::prof {

Json device_properties_json(const GpuDeviceInfo& d) {
  // Key names and order as in libkineto's CudaDeviceProperties.cpp.
  Json j = Json::object();
  j["id"] = d.id;
  j["name"] = d.name;
  j["totalGlobalMem"] = d.total_global_mem;
  j["computeMajor"] = d.compute_major;
  j["computeMinor"] = d.compute_minor;
  j["maxThreadsPerBlock"] = d.max_threads_per_block;
  j["maxThreadsPerMultiprocessor"] = d.max_threads_per_sm;
  j["regsPerBlock"] = d.regs_per_block;
  j["regsPerMultiprocessor"] = d.regs_per_sm;
  j["warpSize"] = d.warp_size;
  j["sharedMemPerBlock"] = d.shared_mem_per_block;
  j["sharedMemPerMultiprocessor"] = d.shared_mem_per_sm;
  j["numSms"] = d.num_sms;
  j["sharedMemPerBlockOptin"] = d.shared_mem_per_block_optin;
  return j;
}

double estimated_occupancy_percent(const GpuDeviceInfo& d, int64_t grid_blocks, int64_t threads_per_block,
                                   int registers_per_thread, int64_t shared_memory_per_block) {
  if (grid_blocks <= 0 || threads_per_block <= 0 || d.warp_size <= 0 || d.num_sms <= 0) return 0.0;
  const int64_t warps_per_block = (threads_per_block + d.warp_size - 1) / d.warp_size;
  const int64_t max_warps_per_sm = d.max_threads_per_sm / d.warp_size;
  if (max_warps_per_sm <= 0) return 0.0;
  int64_t blocks = std::min<int64_t>(d.max_blocks_per_sm, max_warps_per_sm / warps_per_block);
  if (registers_per_thread > 0) {
    blocks = std::min<int64_t>(
        blocks, d.regs_per_sm / (int64_t{registers_per_thread} * d.warp_size * warps_per_block));
  }
  if (shared_memory_per_block > 0)
    blocks = std::min<int64_t>(blocks, d.shared_mem_per_sm / shared_memory_per_block);
  const double theoretical_warps = static_cast<double>(std::max<int64_t>(blocks, 0) * warps_per_block);
  const double launched_warps = static_cast<double>(grid_blocks) / d.num_sms * warps_per_block;
  return 100.0 * std::min(theoretical_warps, launched_warps) / static_cast<double>(max_warps_per_sm);
}

const char* memcpy_kind_name(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

const char* memory_kind_name(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

CuptiConverter::CuptiConverter(ClockSync clock, std::vector<GpuDeviceInfo> devices, ApiNamer api_name,
                               int64_t pid)
    : clock_(clock), devices_(std::move(devices)), api_name_(std::move(api_name)), pid_(pid) {}

const GpuDeviceInfo* CuptiConverter::device(uint32_t id) const {
  for (const auto& d : devices_) {
    if (d.id == static_cast<int>(id)) return &d;
  }
  return nullptr;
}

void CuptiConverter::add_record(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      add_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      add_memcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      add_memset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), false);
      break;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), true);
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      add_external_correlation(*reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record));
      break;
    default:
      ++ignored_;
  }
}

// CUPTI gives kernels their mangled names; Kineto writes them demangled (libkineto's
// Demangle.cpp: abi::__cxa_demangle, the mangled name kept when it is not a C++ name), and so do
// HTA's kernel tables and the TensorBoard plugin's kernel view that read the trace.
std::string demangle_kernel_name(const char* name) {
  if (name == nullptr) return "kernel";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

void CuptiConverter::add_kernel(const CUpti_ActivityKernel10& r) {
  Activity& a = activities_.emplace_back();
  a.kind = ActivityKind::kKernel;
  a.name = demangle_kernel_name(r.name);
  a.start_ns = clock_.to_steady(r.start);
  a.end_ns = clock_.to_steady(r.end);
  a.pid = r.deviceId;
  a.tid = r.streamId;
  a.correlation = r.correlationId;
  const int64_t grid = int64_t{r.gridX} * r.gridY * r.gridZ;
  const int64_t threads = int64_t{r.blockX} * r.blockY * r.blockZ;
  const int64_t shared = int64_t{r.staticSharedMemory} + r.dynamicSharedMemory;
  Json args = Json::object();
  args["queued"] = r.queued;
  args["device"] = r.deviceId;
  args["context"] = r.contextId;
  args["stream"] = r.streamId;
  args["correlation"] = r.correlationId;
  args["registers per thread"] = r.registersPerThread;
  args["shared memory"] = shared;
  if (const GpuDeviceInfo* d = device(r.deviceId)) {
    const double blocks_per_sm = static_cast<double>(grid) / std::max(d->num_sms, 1);
    args["blocks per SM"] = blocks_per_sm;
    args["warps per SM"] = blocks_per_sm * ((threads + d->warp_size - 1) / d->warp_size);
    args["est. achieved occupancy %"] = static_cast<int64_t>(
        estimated_occupancy_percent(*d, grid, threads, r.registersPerThread, shared) + 0.5);
  }
  args["grid"] = {r.gridX, r.gridY, r.gridZ};
  args["block"] = {r.blockX, r.blockY, r.blockZ};
  a.args = std::move(args);
}

namespace {

// Memcpy and memset records carry the same placement and size fields: one stream row per
// (device, stream), Kineto's kernel-like args, and the achieved bandwidth.
template <class Record, class Clock>
void fill_transfer(Activity& a, const Record& r, const Clock& clock) {
  a.start_ns = clock.to_steady(r.start);
  a.end_ns = clock.to_steady(r.end);
  a.pid = r.deviceId;
  a.tid = r.streamId;
  a.correlation = r.correlationId;
  const double seconds = (r.end > r.start ? r.end - r.start : 1) * 1e-9;
  a.args = {
      {"device", r.deviceId}, {"context", r.contextId},
      {"stream", r.streamId}, {"correlation", r.correlationId},
      {"bytes", r.bytes},     {"memory bandwidth (GB/s)", static_cast<double>(r.bytes) / seconds / 1e9}};
}

}  // namespace

void CuptiConverter::add_memcpy(const CUpti_ActivityMemcpy6& r) {
  Activity& a = activities_.emplace_back();
  a.kind = ActivityKind::kGpuMemcpy;
  a.name = std::string("Memcpy ") + memcpy_kind_name(r.copyKind) + " (" + memory_kind_name(r.srcKind) +
           " -> " + memory_kind_name(r.dstKind) + ")";
  fill_transfer(a, r, clock_);
}

void CuptiConverter::add_memset(const CUpti_ActivityMemset4& r) {
  Activity& a = activities_.emplace_back();
  a.kind = ActivityKind::kGpuMemset;
  a.name = std::string("Memset (") + memory_kind_name(static_cast<uint8_t>(r.memoryKind)) + ")";
  fill_transfer(a, r, clock_);
}

void CuptiConverter::add_api(const CUpti_ActivityAPI& r, bool driver) {
  Activity& a = activities_.emplace_back();
  a.kind = driver ? ActivityKind::kCudaDriver : ActivityKind::kCudaRuntime;
  a.name = api_name_ ? api_name_(driver, r.cbid) : std::string();
  if (a.name.empty()) a.name = (driver ? "cuda_driver_" : "cuda_runtime_") + std::to_string(r.cbid);
  a.start_ns = clock_.to_steady(r.start);
  a.end_ns = clock_.to_steady(r.end);
  a.pid = pid_;
  a.tid = r.threadId;
  a.correlation = r.correlationId;
  a.args = {{"cbid", r.cbid}, {"correlation", r.correlationId}};
}

void CuptiConverter::add_external_correlation(const CUpti_ActivityExternalCorrelation& r) {
  if (r.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
    correlation_to_rf_[r.correlationId] = r.externalId;
}

void CuptiConverter::append_to(Timeline& t) {
  const size_t offset = t.activities.size();
  std::unordered_map<int64_t, size_t> launch_by_correlation;  // runtime/driver call per correlation
  for (size_t i = 0; i < activities_.size(); ++i) {
    Activity& a = activities_[i];
    auto it = correlation_to_rf_.find(static_cast<uint32_t>(a.correlation));
    if (it != correlation_to_rf_.end()) a.linked_record_function_id = static_cast<int64_t>(it->second);
    if (a.kind == ActivityKind::kCudaRuntime || a.kind == ActivityKind::kCudaDriver) {
      // The runtime call wins over the driver call it makes (Kineto draws flows from runtime).
      auto [pos, inserted] = launch_by_correlation.emplace(a.correlation, offset + i);
      if (!inserted && a.kind == ActivityKind::kCudaRuntime) pos->second = offset + i;
    }
  }
  for (size_t i = 0; i < activities_.size(); ++i) {
    const Activity& a = activities_[i];
    if (is_cpu_kind(a.kind)) continue;
    auto it = launch_by_correlation.find(a.correlation);
    if (it != launch_by_correlation.end()) t.flows.push_back({a.correlation, it->second, offset + i});
  }
  for (auto& a : activities_) t.activities.push_back(std::move(a));
  activities_.clear();
  correlation_to_rf_.clear();
  for (const auto& d : devices_) {
    bool present = false;
    for (const auto& e : t.device_properties) present |= (e.value("id", -1) == d.id);
    if (!present) t.device_properties.push_back(device_properties_json(d));
  }
}

}  // namespace rt::prof

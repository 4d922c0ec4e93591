// CUPTI activity records → timeline activities (as libkineto's CuptiActivityProfiler
// uses it"). Pure conversion, no CUPTI calls: it compiles wherever the CUPTI headers exist
// (RT_HAS_CUPTI_HEADERS) and is tested with synthetic records on machines without a GPU.
//
// Record versions are CUDA 13's (cupti_activity.h): CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivityAPI,
// CUpti_ActivityExternalCorrelation. GPU timestamps are converted to the CPU steady clock with
// a ClockSync sampled at window start. Linking: EXTERNAL_CORRELATION records map a CUPTI
// correlation id to the RecordFunction handle the op pushed (CUSTOM0); runtime calls and the
// GPU work they launched share the correlation id, which becomes an ac2g flow.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiling/trace/timeline.h"

namespace rt::prof {

// The cudaDeviceProp fields Kineto writes into deviceProperties and the occupancy estimate uses.
struct GpuDeviceInfo {
  int id = 0;
  std::string name;
  int64_t total_global_mem = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int regs_per_block = 65536;
  int regs_per_sm = 65536;
  int warp_size = 32;
  int64_t shared_mem_per_block = 49152;
  int64_t shared_mem_per_sm = 233472;
  int64_t shared_mem_per_block_optin = 232448;
  int num_sms = 1;
};

// Kineto's deviceProperties entry for one device.
Json device_properties_json(const GpuDeviceInfo& device);

// Estimated achieved occupancy in percent: the smaller of the launch's warps per SM and the
// theoretical limit from threads, registers, shared memory and blocks per SM, over the SM's
// maximum warps. 0 when the launch is empty.
double estimated_occupancy_percent(const GpuDeviceInfo& device, int64_t grid_blocks,
                                   int64_t threads_per_block, int registers_per_thread,
                                   int64_t shared_memory_per_block);

// GPU timestamp (cuptiGetTimestamp domain) ↔ steady clock, sampled together.
struct ClockSync {
  int64_t gpu_ns = 0;
  int64_t steady_ns = 0;
  int64_t to_steady(uint64_t gpu_time) const { return steady_ns + (static_cast<int64_t>(gpu_time) - gpu_ns); }
};

// A kernel's name as Kineto writes it: demangled when it is a C++ name, else as given ("kernel"
// when CUPTI gives none).
std::string demangle_kernel_name(const char* name);

class CuptiConverter {
 public:
  // `api_name` names a runtime (driver = false) or driver API callback id, e.g. via
  // cuptiGetCallbackName; `pid` is the process id written on runtime/driver calls.
  using ApiNamer = std::function<std::string(bool driver, uint32_t cbid)>;
  CuptiConverter(ClockSync clock, std::vector<GpuDeviceInfo> devices, ApiNamer api_name, int64_t pid);

  // Dispatches on record->kind; kinds not listed above are counted in ignored_records().
  void add_record(const CUpti_Activity* record);
  void add_kernel(const CUpti_ActivityKernel10& r);
  void add_memcpy(const CUpti_ActivityMemcpy6& r);
  void add_memset(const CUpti_ActivityMemset4& r);
  void add_api(const CUpti_ActivityAPI& r, bool driver);
  void add_external_correlation(const CUpti_ActivityExternalCorrelation& r);

  // Moves the converted activities into `timeline` with linked_record_function_id resolved
  // from the external correlations, one ac2g flow per (runtime call, GPU activity) pair, and
  // the devices' properties. The converter is empty afterwards.
  void append_to(Timeline& timeline);

  size_t ignored_records() const { return ignored_; }
  size_t size() const { return activities_.size(); }

 private:
  const GpuDeviceInfo* device(uint32_t id) const;

  ClockSync clock_;
  std::vector<GpuDeviceInfo> devices_;
  ApiNamer api_name_;
  int64_t pid_;
  std::vector<Activity> activities_;
  std::unordered_map<uint32_t, uint64_t> correlation_to_rf_;
  size_t ignored_ = 0;
};

// "HtoD", "DtoH", … and "Pageable", "Pinned", "Device", … as Kineto names them.
const char* memcpy_kind_name(uint8_t copy_kind);
const char* memory_kind_name(uint8_t memory_kind);

}  // namespace rt::prof

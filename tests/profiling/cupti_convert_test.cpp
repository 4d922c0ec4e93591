// CUPTI record conversion, fed with synthetic CUDA 13 records (no GPU needed).
#ifdef RT_HAS_CUPTI_HEADERS
#include "profiling/cupti/cupti_convert.h"

#include <gtest/gtest.h>

#include <cstring>

#include "profiling/trace/chrome_trace.h"

namespace rt::prof {
namespace {

GpuDeviceInfo h100() {
  GpuDeviceInfo d;
  d.id = 0;
  d.name = "NVIDIA H100";
  d.num_sms = 132;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.regs_per_sm = 65536;
  d.shared_mem_per_sm = 233472;
  return d;
}

TEST(CuptiConvertTest, OccupancyEstimate) {
  const GpuDeviceInfo d = h100();
  // 132 blocks of 256 threads: 1 block per SM = 8 of 64 warps = 12.5%.
  EXPECT_NEAR(estimated_occupancy_percent(d, 132, 256, 32, 0), 12.5, 1e-9);
  // Plenty of blocks, 32 regs/thread: limited by threads (8 blocks × 8 warps = 64) → 100%.
  EXPECT_NEAR(estimated_occupancy_percent(d, 100000, 256, 32, 0), 100.0, 1e-9);
  // 128 regs/thread: 65536 / (128·256) = 2 blocks → 16 warps → 25%.
  EXPECT_NEAR(estimated_occupancy_percent(d, 100000, 256, 128, 0), 25.0, 1e-9);
  // 100 KB shared memory per block: 2 blocks fit → 25%.
  EXPECT_NEAR(estimated_occupancy_percent(d, 100000, 256, 32, 100 * 1024), 25.0, 1e-9);
  EXPECT_EQ(estimated_occupancy_percent(d, 0, 256, 32, 0), 0.0);
}

// Kernel names as Kineto writes them (on the H200: cutlass and ATen kernels arrived mangled).
TEST(CuptiConvertTest, KernelNamesAreDemangledAsKinetoWritesThem) {
  EXPECT_EQ(
      demangle_kernel_name(
          "_Z23implicit_convolve_sgemmIffLi1024ELi5ELi5ELi3ELi3ELi3ELi1ELb0ELb0ELb1EEviiiPKT_iPT0_S2_"
          "18kernel_conv_paramsyiffiPKS3_S7_bbii"),
      "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, "
      "float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, "
      "int, "
      "float const*, float const*, bool, bool, int, int)");
  EXPECT_EQ(demangle_kernel_name("volta_sgemm_128x64_nn"), "volta_sgemm_128x64_nn");  // not a C++ name
  EXPECT_EQ(demangle_kernel_name(nullptr), "kernel");
}

TEST(CuptiConvertTest, RecordsBecomeLinkedActivitiesAndFlows) {
  const ClockSync clock{1'000'000, 50'000};  // GPU 1,000,000 ns == steady 50,000 ns
  CuptiConverter conv(
      clock, {h100()},
      [](bool driver, uint32_t cbid) {
        return driver ? std::string("cuLaunchKernel")
                      : (cbid == 211 ? "cudaLaunchKernel" : "cudaMemcpyAsync");
      },
      4242);

  CUpti_ActivityAPI api;
  std::memset(&api, 0, sizeof api);
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = 211;
  api.start = 1'000'100;
  api.end = 1'000'300;
  api.threadId = 77;
  api.correlationId = 9;
  conv.add_record(reinterpret_cast<const CUpti_Activity*>(&api));

  CUpti_ActivityExternalCorrelation ext;
  std::memset(&ext, 0, sizeof ext);
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  ext.externalId = 555;  // the op's RecordFunction handle
  ext.correlationId = 9;
  conv.add_record(reinterpret_cast<const CUpti_Activity*>(&ext));

  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "volta_sgemm_128x64_nn";
  k.start = 1'000'400;
  k.end = 1'002'400;
  k.deviceId = 0;
  k.streamId = 7;
  k.correlationId = 9;
  k.gridX = 132;
  k.gridY = 1;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 1024;
  conv.add_record(reinterpret_cast<const CUpti_Activity*>(&k));

  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1'000'000;
  m.start = 1'003'000;
  m.end = 1'004'000;
  m.streamId = 7;
  m.correlationId = 10;
  conv.add_record(reinterpret_cast<const CUpti_Activity*>(&m));

  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  s.bytes = 64;
  s.start = 1'005'000;
  s.end = 1'005'010;
  s.streamId = 8;
  s.correlationId = 11;
  conv.add_record(reinterpret_cast<const CUpti_Activity*>(&s));

  CUpti_Activity overhead;
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  conv.add_record(&overhead);
  EXPECT_EQ(conv.ignored_records(), 1u);

  // The op that launched the kernel, on the runtime call's thread.
  Timeline t;
  t.start_ns = 0;
  t.end_ns = 60'000;
  Activity op;
  op.kind = ActivityKind::kCpuOp;
  op.name = "aten::mm";
  op.start_ns = 50'050;
  op.end_ns = 50'350;
  op.pid = 4242;
  op.tid = 77;
  op.record_function_id = 555;
  t.activities.push_back(op);
  t.threads.push_back({4242, 77, "main", 0});
  conv.append_to(t);
  EXPECT_EQ(conv.size(), 0u);
  finalize_timeline(t);

  const Activity* kernel = nullptr;
  const Activity* runtime = nullptr;
  const Activity* cpu = nullptr;
  const Activity* memcpy_act = nullptr;
  const Activity* memset_act = nullptr;
  for (const auto& a : t.activities) {
    if (a.kind == ActivityKind::kKernel) kernel = &a;
    if (a.kind == ActivityKind::kCudaRuntime) runtime = &a;
    if (a.kind == ActivityKind::kCpuOp) cpu = &a;
    if (a.kind == ActivityKind::kGpuMemcpy) memcpy_act = &a;
    if (a.kind == ActivityKind::kGpuMemset) memset_act = &a;
  }
  ASSERT_TRUE(kernel && runtime && cpu && memcpy_act && memset_act);
  EXPECT_EQ(kernel->start_ns, 50'400);  // converted to the CPU clock
  EXPECT_EQ(kernel->end_ns, 52'400);
  EXPECT_EQ(kernel->pid, 0);
  EXPECT_EQ(kernel->tid, 7);
  EXPECT_EQ(kernel->external_id, cpu->external_id);  // correlation → op External id
  EXPECT_EQ(runtime->external_id, cpu->external_id);
  EXPECT_EQ(runtime->name, "cudaLaunchKernel");
  EXPECT_EQ(runtime->tid, 77);
  EXPECT_EQ(runtime->parent, cpu - t.activities.data());  // nested in the op on its thread
  EXPECT_EQ(kernel->args["registers per thread"], 32);
  EXPECT_EQ(kernel->args["shared memory"], 2048);
  EXPECT_EQ(kernel->args["grid"], Json::array({132, 1, 1}));
  EXPECT_EQ(kernel->args["block"], Json::array({256, 1, 1}));
  EXPECT_DOUBLE_EQ(kernel->args["blocks per SM"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(kernel->args["warps per SM"].get<double>(), 8.0);
  EXPECT_EQ(kernel->args["est. achieved occupancy %"], 13);  // 12.5 rounded
  EXPECT_EQ(memcpy_act->name, "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(memcpy_act->external_id, -1);  // no external correlation for it
  EXPECT_EQ(memset_act->name, "Memset (Device)");
  // Both transfers: CPU clock, one row per stream, correlation, size and bandwidth.
  EXPECT_EQ(memcpy_act->start_ns, 53'000);
  EXPECT_EQ(memcpy_act->end_ns, 54'000);
  EXPECT_EQ(memcpy_act->tid, 7);
  EXPECT_EQ(memcpy_act->correlation, 10u);
  EXPECT_EQ(memcpy_act->args["bytes"], 1'000'000);
  EXPECT_DOUBLE_EQ(memcpy_act->args["memory bandwidth (GB/s)"].get<double>(), 1000.0);  // 1 MB in 1 µs
  EXPECT_EQ(memset_act->start_ns, 55'000);
  EXPECT_EQ(memset_act->end_ns, 55'010);
  EXPECT_EQ(memset_act->tid, 8);
  EXPECT_EQ(memset_act->correlation, 11u);
  EXPECT_EQ(memset_act->args["stream"], 8);
  EXPECT_EQ(memset_act->args["bytes"], 64);
  ASSERT_EQ(t.flows.size(), 1u);
  EXPECT_EQ(&t.activities[t.flows[0].from], runtime);
  EXPECT_EQ(&t.activities[t.flows[0].to], kernel);
  ASSERT_EQ(t.device_properties.size(), 1u);
  EXPECT_EQ(t.device_properties[0]["numSms"], 132);

  // The written trace carries the GPU categories, the flow pair and the kernel args.
  const Json j = Json::parse(chrome_trace_json(t, {}));
  std::map<std::string, int> cats;
  int flow_s = 0, flow_f = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.contains("cat")) cats[e["cat"]]++;
    if (e["ph"] == "s") ++flow_s;
    if (e["ph"] == "f") {
      ++flow_f;
      EXPECT_EQ(e["bp"], "e");
      EXPECT_EQ(e["id"], 9);
      EXPECT_EQ(e["pid"], 0);
      EXPECT_EQ(e["tid"], 7);
    }
    if (e.value("cat", "") == "kernel") {
      EXPECT_EQ(e["args"]["External id"], cpu->external_id);
      EXPECT_EQ(e["args"]["correlation"], 9);
      EXPECT_TRUE(e["args"].contains("est. achieved occupancy %"));
    }
  }
  EXPECT_EQ(cats["kernel"], 1);
  EXPECT_EQ(cats["gpu_memcpy"], 1);
  EXPECT_EQ(cats["gpu_memset"], 1);
  EXPECT_EQ(cats["cuda_runtime"], 1);
  EXPECT_EQ(flow_s, 1);
  EXPECT_EQ(flow_f, 1);
  EXPECT_EQ(j["deviceProperties"][0]["name"], "NVIDIA H100");
}

}  // namespace
}  // namespace rt::prof
#endif  // RT_HAS_CUPTI_HEADERS

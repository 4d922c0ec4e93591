#include "profiling/memory.h"

#include <ATen/Parallel.h>
#include <c10/core/impl/alloc_cpu.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace rt::prof {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

TEST(MemoryReporter, ScopeCountsThroughTheCountingAllocatorOnlyInside) {
  EXPECT_FALSE(counting_cpu_allocator_installed());
  EXPECT_FALSE(c10::memoryProfilingEnabled());
  {
    MemoryTrackingScope scope(std::make_shared<MemoryReporter>());
    EXPECT_TRUE(counting_cpu_allocator_installed());
    {
      MemoryTrackingScope nested(std::make_shared<MemoryReporter>());
      EXPECT_TRUE(counting_cpu_allocator_installed());
    }
    EXPECT_TRUE(counting_cpu_allocator_installed());  // the outer scope still counts
    // c10's own per-allocation hook (mutex + hash map) stays off on CPU-only builds (a CUDA
    // build keeps it on: the caching allocator reports only while it is).
    if (!cuda_memory_stats_compiled()) {
      EXPECT_FALSE(c10::memoryProfilingEnabled());
    }
  }
  EXPECT_FALSE(counting_cpu_allocator_installed());
}

TEST(MemoryReporter, CountsExactTensorBytesAndTheirRelease) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  const int64_t before = reporter->cpu_bytes_in_use();
  auto t = torch::empty({2 * kMiB}, torch::kFloat32);  // 8 MiB
  const auto nbytes = static_cast<int64_t>(t.storage().nbytes());
  ASSERT_EQ(nbytes, 8 * kMiB);
  EXPECT_EQ(reporter->cpu_bytes_in_use() - before, nbytes);
  EXPECT_GE(reporter->cpu_peak_bytes_in_use(), before + nbytes);
  t.reset();
  EXPECT_EQ(reporter->cpu_bytes_in_use(), before);
  EXPECT_GE(reporter->cpu_peak_bytes_in_use(), before + nbytes);
  EXPECT_GE(reporter->free_count(), 1);
}

TEST(MemoryReporter, PeakIsResettableToCurrentUse) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto keep = torch::ones({kMiB / 4}, torch::kFloat32);     // 1 MiB, stays alive
  { auto big = torch::ones({4 * kMiB}, torch::kFloat32); }  // 16 MiB, freed
  EXPECT_GE(reporter->cpu_peak_bytes_in_use(), 17 * kMiB);
  EXPECT_GE(reporter->cpu_bytes_in_use(), kMiB);
  EXPECT_LT(reporter->cpu_bytes_in_use(), 16 * kMiB);
  reporter->reset_peak();
  EXPECT_EQ(reporter->cpu_peak_bytes_in_use(), reporter->cpu_bytes_in_use());
}

TEST(MemoryReporter, ListenerSeesEveryAllocationAndFreeWithPointer) {
  auto reporter = std::make_shared<MemoryReporter>();
  std::mutex mu;
  std::vector<std::pair<void*, int64_t>> events;
  reporter->set_listener([&](void* ptr, int64_t bytes, int64_t, int64_t, c10::Device device, MemoryCategory) {
    EXPECT_TRUE(device.is_cpu());
    std::lock_guard<std::mutex> lock(mu);
    events.emplace_back(ptr, bytes);
  });
  void* data = nullptr;
  {
    MemoryTrackingScope scope(reporter);
    auto t = torch::empty({1000}, torch::kFloat64);
    data = t.data_ptr();
  }
  reporter->set_listener({});
  bool saw_alloc = false, saw_free = false;
  for (const auto& [ptr, bytes] : events) {
    if (ptr == data && bytes == 8000) saw_alloc = true;
    if (ptr == data && bytes == -8000) saw_free = true;
  }
  EXPECT_TRUE(saw_alloc);
  EXPECT_TRUE(saw_free);
}

TEST(MemoryReporter, AllocationsDuringAutogradBackwardAreCounted) {
  torch::manual_seed(0);
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto x = torch::randn({256, 256}, torch::requires_grad());
  auto w = torch::randn({256, 256}, torch::requires_grad());
  auto loss = torch::matmul(x, w).tanh().sum();

  std::mutex mu;
  std::set<void*> allocated_in_backward;
  reporter->set_listener([&](void* ptr, int64_t bytes, int64_t, int64_t, c10::Device, MemoryCategory) {
    if (bytes > 0) {
      std::lock_guard<std::mutex> lock(mu);
      allocated_in_backward.insert(ptr);
    }
  });
  const int64_t allocs_before = reporter->allocation_count();
  loss.backward();
  reporter->set_listener({});
  EXPECT_GT(reporter->allocation_count(), allocs_before);
  // The gradients themselves were allocated by the autograd engine during backward.
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(allocated_in_backward.count(x.grad().data_ptr()), 1u);
  EXPECT_EQ(allocated_in_backward.count(w.grad().data_ptr()), 1u);
}

TEST(MemoryReporter, CountsAllocationsOfEveryThreadWhileInstalled) {
  auto reporter = std::make_shared<MemoryReporter>();
  {
    MemoryTrackingScope scope(reporter);
    const int64_t before = reporter->allocation_count();
    std::promise<void> done;
    at::launch([&] {
      { auto t = torch::empty({1024}, torch::kFloat32); }  // freed before the waiter resumes
      done.set_value();
    });
    done.get_future().wait();
    EXPECT_GT(reporter->allocation_count(), before);  // at::launch task

    const int64_t mid = reporter->allocation_count();
    const int64_t bytes = reporter->cpu_bytes_in_use();
    torch::Tensor kept;
    std::thread([&] { kept = torch::empty({1024}, torch::kFloat32); }).join();
    EXPECT_EQ(reporter->allocation_count(), mid + 1);  // a plain std::thread (e.g. a loader worker)
    EXPECT_EQ(reporter->cpu_bytes_in_use(), bytes + 4096);
  }
  const int64_t after = reporter->allocation_count();
  std::thread([] { auto t = torch::empty({1024}, torch::kFloat32); }).join();
  auto t = torch::empty({1024}, torch::kFloat32);
  EXPECT_EQ(reporter->allocation_count(), after);  // nothing is counted once the scope ended
}

TEST(MemoryReporter, BlocksAreSubtractedFromTheReporterThatCountedThem) {
  auto outer = std::make_shared<MemoryReporter>();
  auto inner = std::make_shared<MemoryReporter>();
  torch::Tensor a, b;
  {
    MemoryTrackingScope outer_scope(outer);
    a = torch::empty({kMiB}, torch::kFloat32);  // 4 MiB, counted by outer
    {
      MemoryTrackingScope inner_scope(inner);
      b = torch::empty({kMiB / 2}, torch::kFloat32);  // 2 MiB, counted by inner
      EXPECT_EQ(inner->cpu_bytes_in_use(), 2 * kMiB);
      a.reset();  // freed while inner counts: still subtracted from outer
      EXPECT_EQ(inner->cpu_bytes_in_use(), 2 * kMiB);
    }
    EXPECT_EQ(outer->cpu_bytes_in_use(), 0);
  }
  b.reset();  // freed after both scopes ended: still subtracted from inner
  EXPECT_EQ(inner->cpu_bytes_in_use(), 0);
  EXPECT_EQ(inner->cpu_peak_bytes_in_use(), 2 * kMiB);
  EXPECT_EQ(outer->cpu_peak_bytes_in_use(), 4 * kMiB);
}

TEST(MemoryReporter, RawAllocateAndDeallocateWorkThroughTheCountingAllocator) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  c10::Allocator* alloc = c10::GetAllocator(c10::DeviceType::CPU);
  void* p = alloc->raw_allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);  // c10's alignment is kept
  std::memset(p, 1, 1000);
  EXPECT_EQ(reporter->cpu_bytes_in_use(), 1000);
  alloc->raw_deallocate(p);
  EXPECT_EQ(reporter->cpu_bytes_in_use(), 0);
  // A block made by plain c10::alloc_cpu (as c10's own allocator does) freed through the
  // current raw_deleter() — what oneDNN does with blocks from before the swap — goes back to
  // where it came from, uncounted.
  void* foreign = c10::alloc_cpu(4096);
  alloc->raw_deleter()(foreign);
  EXPECT_EQ(reporter->cpu_bytes_in_use(), 0);
  auto empty = torch::empty({0}, torch::kFloat32);  // zero bytes: no block, nothing counted
  EXPECT_EQ(reporter->cpu_bytes_in_use(), 0);
}

TEST(ProcessMemory, ReadsRssAndSystemMemoryFromProc) {
  const ProcessMemory p = read_process_memory();
  EXPECT_GT(p.rss_bytes, 0);
  EXPECT_GE(p.peak_rss_bytes, p.rss_bytes);
  // Touching 64 MiB raises RSS by about that much.
  std::vector<char> block(64 * kMiB, 1);
  const ProcessMemory q = read_process_memory();
  EXPECT_GT(q.rss_bytes, p.rss_bytes + 32 * kMiB);
  EXPECT_GE(q.peak_rss_bytes, q.rss_bytes);
  // Heap pages are anonymous: RssAnon rises with them, and the split adds up to VmRSS (± the
  // shared-memory part and the kB rounding of /proc).
  EXPECT_GT(q.rss_anon_bytes, p.rss_anon_bytes + 32 * kMiB);
  EXPECT_GT(q.rss_file_bytes, 0);  // at least the mapped executable and libraries
  EXPECT_LE(q.rss_anon_bytes + q.rss_file_bytes, q.rss_bytes + 4096);
  EXPECT_EQ(block[block.size() / 2], 1);

  const SystemMemory s = read_system_memory();
  EXPECT_GT(s.total_bytes, 0);
  EXPECT_GT(s.available_bytes, 0);
  EXPECT_LE(s.available_bytes, s.total_bytes);
  EXPECT_GT(s.used_percent, 0.0);
  EXPECT_LT(s.used_percent, 100.0);
}

TEST(ProcessMemory, SampleCombinesAllSources) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto t = torch::empty({kMiB}, torch::kUInt8);
  const MemorySample s = sample_memory(reporter.get());
  EXPECT_TRUE(s.cpu_tracked);
  EXPECT_GE(s.cpu_bytes_in_use, kMiB);
  EXPECT_GE(s.cpu_peak_bytes_in_use, s.cpu_bytes_in_use);
  EXPECT_GT(s.process.rss_bytes, 0);
  EXPECT_GT(s.system.total_bytes, 0);
  EXPECT_FALSE(s.cuda.available);  // no CUDA device asked for
  EXPECT_GT(s.timestamp, 1.6e9);
  const MemorySample untracked = sample_memory(nullptr);
  EXPECT_FALSE(untracked.cpu_tracked);
  if (cuda_memory_stats_compiled() && torch::cuda::is_available()) {
    auto g = torch::empty({kMiB}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
    const MemorySample c = sample_memory(nullptr, 0);
    EXPECT_TRUE(c.cuda.available);
    EXPECT_GE(c.cuda.allocated_bytes, kMiB);
    EXPECT_GE(c.cuda.reserved_bytes, c.cuda.allocated_bytes);
  }
}

// memory_profile.json's GPU fields are torch.cuda.memory_allocated() / memory_reserved() /
// max_memory_allocated(): the caching allocator's aggregate current and peak bytes.
TEST(CudaMemory, FieldsFollowTheCachingAllocatorExactly) {
  if (!cuda_memory_stats_compiled()) GTEST_SKIP() << "this LibTorch was built without CUDA";
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (none is usable here)";
  torch::cuda::synchronize();
  const CudaMemory before = read_cuda_memory(0);
  ASSERT_TRUE(before.available);
  {
    auto g = torch::empty({4 * kMiB}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
    const CudaMemory during = read_cuda_memory(0);
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 4 * kMiB);  // 512-byte rounding: exact
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  }
  const CudaMemory after = read_cuda_memory(0);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);  // freed to the cache, not the driver
  EXPECT_GE(after.reserved_bytes, 4 * kMiB);
  EXPECT_GE(after.peak_allocated_bytes, before.allocated_bytes + 4 * kMiB);
  reset_cuda_peak(0);
  EXPECT_EQ(read_cuda_memory(0).peak_allocated_bytes, after.allocated_bytes);
}

}  // namespace
}  // namespace rt::prof

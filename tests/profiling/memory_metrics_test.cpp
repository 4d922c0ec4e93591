#include "profiling/memory_metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "support/recording_sink.h"

namespace rt::prof {
namespace {

using rt::testing::RecordingSink;

MemorySample sample() {
  MemorySample s;
  s.cpu_tracked = true;
  s.cpu_bytes_in_use = 1000;
  s.cpu_peak_bytes_in_use = 2000;
  s.process.rss_bytes = 3000;
  s.system.used_percent = 37.5;
  s.cuda.available = true;
  s.cuda.allocated_bytes = 3LL << 29;  // 1.5 GiB
  s.cuda.reserved_bytes = 2LL << 30;
  return s;
}

CategoryBytes category_bytes(int64_t base) {
  CategoryBytes b;
  for (int c = 0; c < kMemoryCategoryCount; ++c) b.bytes[c] = base + c;
  return b;
}

TEST(MemoryMetrics, CpuRunWithCategoriesLogsTheSplitAndThePeakCompositionThenTheSample) {
  MemoryMeasurement m;
  m.sample = sample();
  m.split = CategorySplit{category_bytes(100), 7};
  m.interval_peak = PeakComposition{5000, category_bytes(200)};
  RecordingSink sink;
  log_memory_metrics(m, sink, 30);
  const std::vector<std::string> expected = {
      "memory/activations_and_temporaries_bytes",
      "memory/interval_peak/activations_and_temporaries_bytes",
      "memory/parameters_bytes",
      "memory/interval_peak/parameters_bytes",
      "memory/buffers_bytes",
      "memory/interval_peak/buffers_bytes",
      "memory/gradients_bytes",
      "memory/interval_peak/gradients_bytes",
      "memory/optimizer_state_bytes",
      "memory/interval_peak/optimizer_state_bytes",
      "memory/interval_peak/bytes_in_use",
      "memory/cpu_bytes_in_use",
      "memory/cpu_peak_bytes_in_use",
      "memory/rss_bytes",
      "memory/cpu_memory_percent",
  };
  EXPECT_EQ(sink.tags(), expected);
  for (const auto& r : sink.rows) EXPECT_EQ(r.step, 30) << r.tag;
  EXPECT_EQ(sink.value("memory/activations_and_temporaries_bytes"), 100.0);
  EXPECT_EQ(sink.value("memory/optimizer_state_bytes"), 104.0);
  EXPECT_EQ(sink.value("memory/interval_peak/parameters_bytes"), 201.0);
  EXPECT_EQ(sink.value("memory/interval_peak/bytes_in_use"), 5000.0);
  EXPECT_EQ(sink.value("memory/cpu_bytes_in_use"), 1000.0);
  EXPECT_EQ(sink.value("memory/cpu_peak_bytes_in_use"), 2000.0);
  EXPECT_EQ(sink.value("memory/rss_bytes"), 3000.0);
  EXPECT_EQ(sink.value("memory/cpu_memory_percent"), 37.5);
}

TEST(MemoryMetrics, CudaRunLogsGibAndNoPeakComposition) {
  MemoryMeasurement m;
  m.sample = sample();
  m.cuda_device = true;
  RecordingSink sink;
  log_memory_metrics(m, sink, 4);
  const std::vector<std::string> expected = {
      "memory/cpu_bytes_in_use",   "memory/cpu_peak_bytes_in_use",   "memory/rss_bytes",
      "memory/cpu_memory_percent", "memory/gpu_memory_allocated_gb", "memory/gpu_memory_reserved_gb",
  };
  EXPECT_EQ(sink.tags(), expected);
  EXPECT_EQ(sink.value("memory/gpu_memory_allocated_gb"), 1.5);
  EXPECT_EQ(sink.value("memory/gpu_memory_reserved_gb"), 2.0);

  m.split = CategorySplit{category_bytes(10), 0};
  RecordingSink with_split;
  log_memory_metrics(m, with_split, 4);
  ASSERT_EQ(with_split.rows.size(), 11u);
  EXPECT_EQ(with_split.rows[0].tag, "memory/activations_and_temporaries_bytes");
  EXPECT_EQ(with_split.rows[4].tag, "memory/optimizer_state_bytes");
  EXPECT_EQ(with_split.rows[5].tag, "memory/cpu_bytes_in_use");
  EXPECT_EQ(with_split.value("memory/gradients_bytes"), 13.0);
}

// The sink receives doubles; a TensorBoard adapter rounds them to float32 once, which gives
// what a direct conversion of the integer gave (bytes are exact in a double below 2^53).
TEST(MemoryMetrics, BytesRoundToFloatAsTheIntegerWould) {
  MemoryMeasurement m;
  m.sample.process.rss_bytes = (int64_t{1} << 40) + 12345;
  RecordingSink sink;
  log_memory_metrics(m, sink, 0);
  EXPECT_EQ(static_cast<float>(sink.value("memory/rss_bytes")),
            static_cast<float>(m.sample.process.rss_bytes));
}

}  // namespace
}  // namespace rt::prof

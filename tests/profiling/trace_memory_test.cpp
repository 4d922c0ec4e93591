// "[memory]" events of a traced window against the allocator: with profile_memory, the CPU
// events' Bytes sum to the MemoryReporter's bytes_in_use delta over the recorded window.
#include <gtest/gtest.h>

#include <sstream>

#include "profiling/memory.h"
#include "profiling/trace/trace_session.h"
#include "support/test_support.h"
#include "support/trace_checks.h"
#include "trace_test_model.h"
#include "util/atomic_file.h"
#include "util/json.h"

namespace rt::prof {
namespace {

TEST(TraceMemoryTest, MemoryEventsSumToTheAllocatorDelta) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  rt::testing::ScratchDir dir("trace_memory");
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope tracking(reporter);
  reporter->set_listener(
      [](void* ptr, int64_t bytes, int64_t total, int64_t reserved, c10::Device d, MemoryCategory category) {
        if (auto* t = OpTracer::current()) {
          t->record_memory(ptr, bytes, total, reserved, d.is_cuda() ? 1 : 0, 0,
                           bytes < 0 ? memory_category_name(category) : nullptr);
        }
      });

  testing::TinyNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto x = torch::randn({4, 2, 16}), y = torch::randn({4, 4});

  TraceSessionOptions o;
  o.schedule.wait = 0;
  o.schedule.warmup = 1;
  o.schedule.active = 2;
  o.schedule.repeat = 1;
  o.schedule.skip_first = 1;
  o.tracer.profile_memory = true;
  o.output_dir = dir.path();
  std::ostringstream table;
  o.table_out = &table;
  o.cpu_bytes_in_use = [reporter] { return reporter->cpu_bytes_in_use(); };
  int64_t before = -1, after = -1;
  std::vector<torch::Tensor> kept;  // grows live memory across the window
  {
    TraceSession session(o);
    for (int64_t step = 0; step < 5; ++step) {
      if (step == 2) before = reporter->cpu_bytes_in_use();  // recording starts at step 2
      session.step_begin(step);
      testing::train_step(net, opt, x, y);
      kept.push_back(torch::ones({100 + step}));
      if (step == 2) {  // a block tagged as optimizer state, allocated and freed in the window
        auto state = torch::ones({1000});
        reporter->tag_storage(state.storage(), MemoryCategory::kOptimizerState);
      }
      session.step_end();
      if (step == 3) after = reporter->cpu_bytes_in_use();  // and is saved after step 3
    }
    ASSERT_EQ(session.windows().size(), 1u);
  }
  reporter->set_listener(nullptr);

  const Json j = Json::parse(read_file(dir / "profile_step_2.json"));
  rt::testing::check_kineto_events(j, false);
  int64_t sum = 0;
  size_t allocs = 0, frees = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "[memory]" || e["args"]["Device Type"] != 0) continue;
    const int64_t b = e["args"]["Bytes"];
    sum += b;
    (b > 0 ? allocs : frees)++;
  }
  EXPECT_GT(allocs, 10u);
  EXPECT_GT(frees, 10u);
  // The tensors kept across steps make the delta non-zero.
  EXPECT_GT(after - before, 0);
  EXPECT_EQ(sum, after - before);
  // The free carries the block's tag and the allocation gets its free's; blocks still live at
  // the window's end (the kept tensors) have no category.
  std::vector<Json> state_events;
  size_t uncategorised_allocs = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "[memory]") continue;
    const Json& a = e["args"];
    if (!a.contains("Category")) {
      EXPECT_GT(a["Bytes"].get<int64_t>(), 0) << e.dump();  // every free knows its block's tag
      ++uncategorised_allocs;
    } else if (a["Category"] == "optimizer_state") {
      state_events.push_back(a);
    } else {
      EXPECT_EQ(a["Category"], "activations_and_temporaries") << e.dump();
    }
  }
  ASSERT_EQ(state_events.size(), 2u);
  EXPECT_EQ(state_events[0]["Bytes"], 4000);
  EXPECT_EQ(state_events[1]["Bytes"], -4000);
  EXPECT_EQ(state_events[0]["Addr"], state_events[1]["Addr"]);
  EXPECT_GE(uncategorised_allocs, 2u);  // at least the two kept tensors
  EXPECT_EQ(j["cpu_bytes_in_use_window_start"].get<int64_t>(), before);
  EXPECT_EQ(j["cpu_bytes_in_use_window_end"].get<int64_t>(), after);
}

}  // namespace
}  // namespace rt::prof

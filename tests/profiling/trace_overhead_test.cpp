// Every operator run while the tracer records is in its timeline, with each option (plain,
// record_shapes, with_stack). What tracing costs per operator is a benchmark's business
// (benchmarks/op_cost_bench.cpp; BENCHMARKS.md, "Detailed tracing overhead").
#include <gtest/gtest.h>

#include "profiling/trace/op_tracer.h"

namespace rt::prof {
namespace {

size_t traced_activities(const OpTracerOptions& o, int iters) {
  const auto a = torch::ones({4}), b = torch::ones({4});
  torch::Tensor out = torch::empty_like(a);
  OpTracer tracer(o);
  tracer.start();
  for (int i = 0; i < iters; ++i) at::add_out(out, a, b);
  const Timeline t = tracer.stop();
  return t.activities.size();
}

TEST(TraceOverheadTest, EveryTracedOpIsRecordedWithEachOption) {
  constexpr int kIters = 2000;
  OpTracerOptions shapes;
  shapes.record_shapes = true;
  OpTracerOptions stacks;
  stacks.with_stack = true;
  EXPECT_GE(traced_activities({}, kIters), static_cast<size_t>(kIters));
  EXPECT_GE(traced_activities(shapes, kIters), static_cast<size_t>(kIters));
  EXPECT_GE(traced_activities(stacks, kIters / 10), static_cast<size_t>(kIters / 10));
}

}  // namespace
}  // namespace rt::prof

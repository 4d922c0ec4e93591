// Per-op cost of tracing, measured with a quick loop and printed (not asserted: timing on a
// shared machine is noisy; the Google Benchmark version is separate).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "profiling/trace/op_tracer.h"

namespace rt::prof {
namespace {

double ns_per_op(int iters, const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor out = torch::empty_like(a);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) at::add_out(out, a, b);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}

double traced_ns_per_op(const OpTracerOptions& o, int iters, const torch::Tensor& a, const torch::Tensor& b) {
  OpTracer tracer(o);
  tracer.start();
  const double ns = ns_per_op(iters, a, b);
  const Timeline t = tracer.stop();
  EXPECT_GE(t.activities.size(), static_cast<size_t>(iters));
  return ns;
}

TEST(TraceOverheadTest, ReportsNanosecondsPerTracedOp) {
  torch::set_num_threads(1);
  const auto a = torch::ones({4}), b = torch::ones({4});
  constexpr int kIters = 20000;
  ns_per_op(kIters, a, b);  // warm up
  double base = 1e30, plain = 1e30, shapes = 1e30, stacks = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    base = std::min(base, ns_per_op(kIters, a, b));
    plain = std::min(plain, traced_ns_per_op({}, kIters, a, b));
    OpTracerOptions s;
    s.record_shapes = true;
    shapes = std::min(shapes, traced_ns_per_op(s, kIters, a, b));
    OpTracerOptions k;
    k.with_stack = true;
    stacks = std::min(stacks, traced_ns_per_op(k, kIters / 10, a, b));
  }
  std::printf(
      "[overhead] untraced %.0f ns/op; traced +%.0f ns/op; +record_shapes +%.0f ns/op; "
      "+with_stack +%.0f ns/op\n",
      base, plain - base, shapes - base, stacks - base);
  EXPECT_GT(plain, 0.0);
}

}  // namespace
}  // namespace rt::prof

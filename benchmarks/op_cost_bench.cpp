// Cost of operator tracing per ATen operator (overhead budget: <= 10% while tracing), with Google Benchmark:
// a small op (add of two 8-element tensors) untraced, traced, traced + record_shapes, traced +
// with_stack, and the cost of a module span off and on. Results: BENCHMARKS.md, "Detailed tracing
// overhead" (benchmarks/tracing_overhead.sh runs it); reading: docs/perf/tracing.md.
//
//   ./build/bin/op_cost_bench --benchmark_min_time=0.5
//
// The tracer's buffers are cleared every kClearEvery ops outside the timed region, so memory
// stays bounded; symbolising stacks happens when a window is saved and is not measured here.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "profiling/trace/op_tracer.h"

namespace {

using rt::prof::OpTracer;
using rt::prof::OpTracerOptions;

constexpr int64_t kClearEvery = 4096;

void run_ops(benchmark::State& state, OpTracer* tracer) {
  torch::set_num_threads(1);
  torch::NoGradGuard no_grad;
  auto a = torch::ones({8}), b = torch::ones({8});
  torch::Tensor c;
  if (tracer != nullptr) tracer->start();
  int64_t n = 0;
  for (auto _ : state) {
    c = torch::add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    if (tracer != nullptr && ++n % kClearEvery == 0) {
      state.PauseTiming();
      tracer->clear();
      state.ResumeTiming();
    }
  }
  if (tracer != nullptr) tracer->stop();
  state.SetItemsProcessed(state.iterations());
}

void BM_AddUntraced(benchmark::State& state) { run_ops(state, nullptr); }

void BM_AddTraced(benchmark::State& state) {
  OpTracer tracer;
  run_ops(state, &tracer);
}

void BM_AddTracedShapes(benchmark::State& state) {
  OpTracerOptions o;
  o.record_shapes = true;
  OpTracer tracer(o);
  run_ops(state, &tracer);
}

void BM_AddTracedStack(benchmark::State& state) {
  OpTracerOptions o;
  o.with_stack = true;
  OpTracer tracer(o);
  run_ops(state, &tracer);
}

// A module span while no window is open (the cost every forward pays when profiling is off).
void BM_ModuleScopeOff(benchmark::State& state) {
  for (auto _ : state) {
    rt::prof::ModuleScope span("encoder.encoder.net.3");
    benchmark::ClobberMemory();
  }
}

// A module span recorded (with_modules window open).
void BM_ModuleScopeOn(benchmark::State& state) {
  OpTracerOptions o;
  o.with_modules = true;
  OpTracer tracer(o);
  tracer.start();
  int64_t n = 0;
  for (auto _ : state) {
    { rt::prof::ModuleScope span("encoder.encoder.net.3"); }
    if (++n % kClearEvery == 0) {
      state.PauseTiming();
      tracer.clear();
      state.ResumeTiming();
    }
  }
  tracer.stop();
}

}  // namespace

BENCHMARK(BM_AddUntraced);
BENCHMARK(BM_AddTraced);
BENCHMARK(BM_AddTracedShapes);
BENCHMARK(BM_AddTracedStack);
BENCHMARK(BM_ModuleScopeOff);
BENCHMARK(BM_ModuleScopeOn);
BENCHMARK_MAIN();

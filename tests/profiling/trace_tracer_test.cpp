// The RecordFunction op tracer on a tiny model: nesting, step spans, forward↔backward
// linking, shapes, zero cost when off, memory events.
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/recorded_span.h"
#include "profiling/trace/trace_session.h"
#include "support/test_support.h"
#include "trace_test_model.h"

namespace rt::prof {
namespace {

using rt::prof::testing::TinyNet;
using rt::prof::testing::train_step;
using rt::prof::testing::two_window_schedule;

struct Fixture {
  TinyNet net;
  torch::optim::SGD opt;
  torch::Tensor x, y;
  Fixture() : net(), opt(net->parameters(), torch::optim::SGDOptions(0.01)) {
    torch::manual_seed(0);
    x = torch::randn({3, 2, 16});
    y = torch::randn({3, 4});
  }
};

Timeline trace_two_steps(const OpTracerOptions& options) {
  torch::set_num_threads(1);
  Fixture f;
  train_step(f.net, f.opt, f.x, f.y);  // warm caches outside the window
  OpTracer tracer(options);
  tracer.start();
  for (int step = 5; step < 7; ++step) {
    tracer.step_begin(step);
    train_step(f.net, f.opt, f.x, f.y);
    tracer.step_end();
  }
  Timeline t = tracer.stop();
  finalize_timeline(t);
  return t;
}

bool inside(const Activity& child, const Activity& parent) {
  return child.start_ns >= parent.start_ns && child.end_ns <= parent.end_ns;
}

TEST(TraceTracerTest, OpsNestInsideStepsAndParents) {
  const Timeline t = trace_two_steps({});
  EXPECT_EQ(t.first_step, 5);
  EXPECT_EQ(t.last_step, 6);
  std::map<int64_t, std::vector<const Activity*>> steps_by_tid;
  size_t ops = 0;
  for (const auto& a : t.activities) {
    if (a.kind == ActivityKind::kUserAnnotation && a.name.rfind("ProfilerStep#", 0) == 0)
      steps_by_tid[a.tid].push_back(&a);
  }
  ASSERT_EQ(steps_by_tid.size(), 1u);
  ASSERT_EQ(steps_by_tid.begin()->second.size(), 2u);
  EXPECT_EQ(steps_by_tid.begin()->second[0]->name, "ProfilerStep#5");
  for (size_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.kind != ActivityKind::kCpuOp) continue;
    ++ops;
    auto it = steps_by_tid.find(a.tid);
    if (it != steps_by_tid.end()) {
      bool in_step = false;
      for (const Activity* s : it->second) in_step |= inside(a, *s);
      EXPECT_TRUE(in_step) << a.name << " lies outside every ProfilerStep span";
    }
    if (a.parent >= 0) {
      const Activity& p = t.activities[a.parent];
      EXPECT_TRUE(inside(a, p)) << a.name << " not inside its parent " << p.name;
      EXPECT_EQ(p.tid, a.tid);
    }
  }
  EXPECT_GT(ops, 50u);
  // Siblings never partially overlap (TensorBoard drops such ops).
  for (size_t i = 1; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    for (size_t j = i; j-- > 0;) {
      const Activity& b = t.activities[j];
      if (b.tid != a.tid || b.pid != a.pid) break;
      if (b.parent == a.parent) {
        EXPECT_LE(b.end_ns, a.start_ns) << b.name << " overlaps its sibling " << a.name;
        break;
      }
    }
  }
  // Phase annotations and module scopes: modules only with with_modules.
  auto count = [&](const std::string& name) {
    size_t n = 0;
    for (const auto& a : t.activities) n += (a.name == name);
    return n;
  };
  EXPECT_EQ(count("forward"), 2u);
  EXPECT_EQ(count("optimizer_step"), 2u);
  EXPECT_EQ(count("conv"), 0u);
}

TEST(TraceTracerTest, BackwardOpsCarryTheForwardSequenceNumber) {
  const Timeline t = trace_two_steps({});
  std::map<int64_t, const Activity*> forward_addmm_by_seq;
  for (const auto& a : t.activities) {
    if (a.name == "aten::addmm" && a.sequence_nr >= 0) forward_addmm_by_seq[a.sequence_nr] = &a;
  }
  ASSERT_FALSE(forward_addmm_by_seq.empty());
  size_t linked = 0;
  for (const auto& a : t.activities) {
    if (a.name != "AddmmBackward0") continue;
    auto it = forward_addmm_by_seq.find(a.sequence_nr);
    ASSERT_NE(it, forward_addmm_by_seq.end())
        << "AddmmBackward0 seq " << a.sequence_nr << " has no forward aten::addmm";
    EXPECT_EQ(a.fwd_thread_id, it->second->rf_thread_id);
    EXPECT_GT(a.start_ns, it->second->end_ns);
    ++linked;
  }
  EXPECT_EQ(linked, 4u);  // two Linear layers × two steps
}

TEST(TraceTracerTest, ZeroCallbacksWhenNoWindowIsOpen) {
  torch::set_num_threads(1);
  Fixture f;
  const uint64_t before = OpTracer::callbacks_on_this_thread();
  train_step(f.net, f.opt, f.x, f.y);
  EXPECT_EQ(OpTracer::callbacks_on_this_thread(), before);
  EXPECT_FALSE(at::hasGlobalCallbacks());
  {
    OpTracer tracer;
    tracer.start();
    EXPECT_TRUE(at::hasGlobalCallbacks());
    train_step(f.net, f.opt, f.x, f.y);
    EXPECT_GT(OpTracer::callbacks_on_this_thread(), before + 50);
    tracer.stop();
  }
  EXPECT_FALSE(at::hasGlobalCallbacks());
  const uint64_t after = OpTracer::callbacks_on_this_thread();
  train_step(f.net, f.opt, f.x, f.y);
  EXPECT_EQ(OpTracer::callbacks_on_this_thread(), after);
}

TEST(TraceTracerTest, RecordShapesGivesInputDimsAndTypes) {
  OpTracerOptions o;
  o.record_shapes = true;
  o.with_modules = true;
  const Timeline t = trace_two_steps(o);
  bool found = false;
  for (const auto& a : t.activities) {
    if (a.name != "aten::addmm" || a.input_dims.size() < 3) continue;
    // fc1: bias [32], input [3, 64], weight.t() [64, 32]
    if (a.input_dims[0] == std::vector<int64_t>{32} && a.input_dims[1] == std::vector<int64_t>{3, 64}) {
      EXPECT_EQ(a.input_dims[2], (std::vector<int64_t>{64, 32}));
      EXPECT_EQ(a.input_types[0], "float");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  size_t conv_spans = 0;
  for (const auto& a : t.activities)
    conv_spans += (a.name == "conv" && a.kind == ActivityKind::kPythonFunction);  // a module span
  EXPECT_EQ(conv_spans, 2u);
}

TEST(TraceTracerTest, ConsecutiveWindowsOnOneThreadAreIndependent) {
  // The second window reuses the thread's recycled buffer: it must hold only its own events,
  // with the right names and shapes.
  torch::NoGradGuard no_grad;
  OpTracerOptions o;
  o.record_shapes = true;
  auto a = torch::ones({2, 3}), b = torch::ones({3, 4});
  Timeline first, second;
  {
    OpTracer tracer(o);
    tracer.start();
    for (int i = 0; i < 50; ++i) torch::mm(a, b);
    first = tracer.stop();
    tracer.start();
    torch::add(a, a);
    torch::mm(b.t(), a.t());
    second = tracer.stop();
  }
  auto count = [](const Timeline& t, const std::string& name) {
    size_t n = 0;
    for (const auto& x : t.activities) n += x.name == name;
    return n;
  };
  EXPECT_EQ(count(first, "aten::mm"), 50u);
  EXPECT_EQ(count(second, "aten::mm"), 1u);
  EXPECT_EQ(count(second, "aten::add"), 1u);
  for (const auto& x : second.activities) {
    if (x.name != "aten::mm") continue;
    ASSERT_EQ(x.input_dims.size(), 2u);
    EXPECT_EQ(x.input_dims[0], (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(x.input_dims[1], (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(x.input_types[0], "float");
    EXPECT_GE(x.end_ns, x.start_ns);
    EXPECT_GE(x.start_ns, second.start_ns);
  }
}

TEST(TraceTracerTest, MemoryEventsAreAttributedToTheOpenOp) {
  OpTracerOptions o;
  o.profile_memory = true;
  OpTracer tracer(o);
  tracer.record_memory(reinterpret_cast<void*>(0x10), 64, 64, 128, 0, -1);  // not active: ignored
  tracer.start();
  tracer.step_begin(0);
  {
    ScopedAnnotation a("alloc_phase");
    tracer.record_memory(reinterpret_cast<void*>(0x1000), 256, 256, 1024, 0, -1);
  }
  tracer.record_memory(reinterpret_cast<void*>(0x1000), -256, 0, 1024, 0, -1);
  tracer.step_end();
  Timeline t = tracer.stop();
  finalize_timeline(t);
  ASSERT_EQ(t.memory.size(), 2u);
  EXPECT_EQ(t.memory[0].bytes, 256);
  EXPECT_EQ(t.memory[0].addr, 0x1000u);
  EXPECT_EQ(t.memory[0].total_reserved, 1024);
  ASSERT_GE(t.memory[0].owner, 0);
  EXPECT_EQ(t.activities[t.memory[0].owner].name, "alloc_phase");
  ASSERT_GE(t.memory[1].owner, 0);
  EXPECT_EQ(t.activities[t.memory[1].owner].name, "ProfilerStep#0");
}

TEST(TraceTracerTest, ScheduleDrivesWindowsAndWritesFiles) {
  torch::set_num_threads(1);
  rt::testing::ScratchDir dir("trace_session");
  Fixture f;
  TraceSessionOptions o;
  o.schedule = two_window_schedule();
  o.output_dir = dir.path();
  o.tracer.record_shapes = true;
  std::ostringstream table;
  o.table_out = &table;
  TraceSession session(o);
  for (int step = 0; step < 10; ++step) {
    session.step_begin(step);
    train_step(f.net, f.opt, f.x, f.y);
    session.step_end();
  }
  session.finish();
  ASSERT_EQ(session.windows().size(), 2u);
  EXPECT_EQ(session.windows()[0].first_step, 2);
  EXPECT_EQ(session.windows()[0].last_step, 3);
  EXPECT_EQ(session.windows()[1].first_step, 6);
  EXPECT_TRUE(std::filesystem::exists(dir / "profile_step_2.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "profile_step_6.json"));
  const OutputResult* trace = session.windows()[1].output("chrome_trace");
  ASSERT_NE(trace, nullptr);
  ASSERT_FALSE(trace->files.empty());
  EXPECT_TRUE(std::filesystem::exists(trace->files[0]));
  EXPECT_NE(table.str().find("Self CPU time total: "), std::string::npos);
  EXPECT_NE(table.str().find("Input Shapes"), std::string::npos);
  EXPECT_FALSE(at::hasGlobalCallbacks());
}

TEST(TraceTracerTest, OpenWindowIsSavedAtExit) {
  torch::set_num_threads(1);
  rt::testing::ScratchDir dir("trace_exit");
  Fixture f;
  TraceSessionOptions o;
  o.schedule = ProfilerSchedule::for_profile_steps(100, 1, 0);
  o.output_dir = dir.path();
  std::ostringstream table;
  o.table_out = &table;
  {
    TraceSession session(o);
    for (int step = 0; step < 3; ++step) {
      session.step_begin(step);
      train_step(f.net, f.opt, f.x, f.y);
      session.step_end();
    }
  }  // destructor = finish(): the recording window (steps 1-2) is saved
  EXPECT_TRUE(std::filesystem::exists(dir / "profile_step_1.json"));
  EXPECT_FALSE(at::hasGlobalCallbacks());
}

TEST(TraceTracerTest, RecordedSpansGetTheirOwnRowWithArgs) {
  auto span = [](int64_t start, int64_t end) {
    Activity a;
    a.kind = ActivityKind::kUserAnnotation;
    a.name = "gloo:all_reduce";
    a.start_ns = start;
    a.end_ns = end;
    a.input_dims = {{16}};
    a.input_types = {"float"};
    a.args = {{"Collective name", "allreduce"}, {"Group size", 2}};
    return a;
  };
  record_span("gloo", span(1, 2));  // no window: dropped
  OpTracer tracer;
  tracer.start();
  record_span("gloo", span(10, 20));
  record_span("gloo", span(30, 40));
  Timeline t = tracer.stop();
  record_span("gloo", span(50, 60));  // after the window: dropped
  finalize_timeline(t);
  std::vector<const Activity*> spans;
  for (const auto& a : t.activities) {
    if (a.name == "gloo:all_reduce") spans.push_back(&a);
  }
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]->start_ns, 10);
  EXPECT_EQ(spans[1]->end_ns, 40);
  EXPECT_GE(spans[0]->tid, kSpanRowTid);
  EXPECT_EQ(spans[0]->tid, spans[1]->tid);
  bool named = false;
  for (const auto& th : t.threads) named |= th.tid == spans[0]->tid && th.name == "gloo";
  EXPECT_TRUE(named) << "the row is listed as a thread named after it";
  const Json trace = Json::parse(chrome_trace_json(t, ChromeTraceOptions{}));
  int written = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") != "gloo:all_reduce") continue;
    ++written;
    EXPECT_EQ(e["cat"], "user_annotation");
    EXPECT_EQ(e["args"]["Collective name"], "allreduce");
    EXPECT_EQ(e["args"]["Group size"], 2);
    EXPECT_EQ(e["args"]["Input Dims"], Json::parse("[[16]]"));
    EXPECT_EQ(e["args"]["Input type"], Json::parse("[\"float\"]"));
  }
  EXPECT_EQ(written, 2);
}

}  // namespace
}  // namespace rt::prof

// The written trace against Kineto's schema and what its consumers require
// (Holistic Trace Analysis, TensorBoard's profiler plugin).
#include <gtest/gtest.h>

#include <regex>

#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/op_tracer.h"
#include "support/test_support.h"
#include "support/trace_checks.h"
#include "trace_test_model.h"
#include "util/atomic_file.h"
#include "util/json.h"

namespace rt::prof {
namespace {

struct Written {
  rt::testing::ScratchDir dir{"trace_schema"};
  TraceFiles files;
  std::string text;
};

void write_traced_steps(Written& w, bool gzip = false) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  testing::TinyNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({2, 2, 16}), y = torch::randn({2, 4});
  OpTracerOptions o;
  o.record_shapes = true;
  o.profile_memory = true;
  OpTracer tracer(o);
  tracer.start();
  for (int step = 3; step < 5; ++step) {
    tracer.step_begin(step);
    testing::train_step(net, opt, x, y);
    tracer.record_memory(reinterpret_cast<void*>(0xabc0), 512, 4096, 8192, 0, -1);
    tracer.step_end();
  }
  Timeline t = tracer.stop();
  finalize_timeline(t);
  w.files = write_chrome_trace(t, w.dir.path(), gzip);
  w.text = read_file(w.files.step_copy);
}

TEST(TraceSchemaTest, TopLevelKeysInKinetoOrder) {
  Written w;
  write_traced_steps(w);
  rt::testing::check_kineto_top_level(w.text);
  // The profiler_traces copy is the same trace, under a name TensorBoard's plugin matches.
  EXPECT_EQ(read_file(w.files.trace), w.text);
  EXPECT_TRUE(std::regex_match(w.files.trace.filename().string(),
                               std::regex(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$)")));
  EXPECT_EQ(w.files.trace.parent_path().filename(), "profiler_traces");
  EXPECT_EQ(w.files.step_copy.filename(), "profile_step_3.json");
}

TEST(TraceSchemaTest, EventsHaveWhatConsumersRequire) {
  Written w;
  write_traced_steps(w);
  const Json j = Json::parse(w.text);
  const auto counts = rt::testing::check_kineto_events(j, /*expect_shapes=*/true);
  EXPECT_GT(counts.by_cat.count("cpu_op") ? counts.by_cat.at("cpu_op") : 0u, 50u);
  EXPECT_GE(counts.by_cat.count("user_annotation") ? counts.by_cat.at("user_annotation") : 0u, 2u);
  EXPECT_EQ(counts.memory, 2u);
  rt::testing::check_exact_nesting(j);
  EXPECT_EQ(rt::testing::check_ops_inside_steps(j), 1);
}

TEST(TraceSchemaTest, GzipCopyIsGzip) {
  if (!chrome_trace_gzip_available()) GTEST_SKIP() << "built without zlib";
  Written w;
  write_traced_steps(w, true);
  const std::string gz = read_file(w.files.trace);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), w.text.size());
  EXPECT_EQ(w.files.trace.extension(), ".gz");
}

}  // namespace
}  // namespace rt::prof

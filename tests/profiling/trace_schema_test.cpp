// The written trace against Kineto's schema and what its consumers require
// (REFERENCE-FACTS: HTA, TensorBoard's plugin).
#include <gtest/gtest.h>

#include <regex>

#include "data/util/atomic_file.h"
#include "data/util/json.h"
#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/op_tracer.h"
#include "support/test_support.h"
#include "trace_test_model.h"

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
  const std::vector<std::string> required = {"\"schemaVersion\"", "\"deviceProperties\"", "\"distributedInfo\"",
                                             "\"displayTimeUnit\"", "\"baseTimeNanoseconds\"", "\"traceEvents\"",
                                             "\"traceName\""};
  size_t pos = 0;
  for (const auto& key : required) {
    const size_t at = w.text.find(key, pos);
    ASSERT_NE(at, std::string::npos) << key << " missing or out of order";
    pos = at;
  }
  // Free metadata sits between distributedInfo and displayTimeUnit, i.e. before traceEvents
  // (HTA stops reading metadata at traceEvents).
  const size_t shapes = w.text.find("\"record_shapes\"");
  ASSERT_NE(shapes, std::string::npos);
  EXPECT_LT(shapes, w.text.find("\"displayTimeUnit\""));
  EXPECT_GT(shapes, w.text.find("\"distributedInfo\""));
  // HTA's rank regex needs whitespace after the colon.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(w.text, m, std::regex("\"rank\":\\s+(\\d+)")));
  EXPECT_EQ(m[1].str(), "0");

  const Json j = Json::parse(w.text);
  EXPECT_EQ(j["schemaVersion"], 1);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["distributedInfo"]["world_size"], 1);
  EXPECT_GT(j["baseTimeNanoseconds"].get<int64_t>(), int64_t{1'600'000'000} * 1'000'000'000);
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
  const Json& events = j["traceEvents"];
  ASSERT_TRUE(events.is_array());
  std::map<std::string, size_t> by_cat;
  std::set<std::string> metadata_names;
  size_t memory = 0;
  for (const auto& e : events) {
    ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    ASSERT_TRUE(e.contains("ph")) << e.dump();
    ASSERT_TRUE(e["pid"].is_number_integer()) << e.dump();
    ASSERT_TRUE(e["tid"].is_number_integer()) << e.dump();
    ASSERT_TRUE(e["ts"].is_number()) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "X") {
      ASSERT_TRUE(e["cat"].is_string()) << e.dump();
      ASSERT_TRUE(e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_GE(e["ts"].get<double>(), 0.0);
      by_cat[e["cat"]]++;
      if (e["cat"] == "cpu_op") {
        ASSERT_TRUE(e["args"]["External id"].is_number_integer()) << e.dump();
        ASSERT_TRUE(e["args"]["Record function id"].is_number_integer()) << e.dump();
        ASSERT_TRUE(e["args"].contains("Input Dims")) << e.dump();
        ASSERT_TRUE(e["args"].contains("Input type")) << e.dump();
      }
    } else if (ph == "M") {
      ASSERT_TRUE(e["args"].is_object()) << e.dump();
      metadata_names.insert(e["name"]);
    } else if (ph == "i" && e["name"] == "[memory]") {
      EXPECT_EQ(e["cat"], "cpu_instant_event");
      EXPECT_EQ(e["s"], "t");
      for (const char* k : {"Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"}) {
        EXPECT_TRUE(e["args"].contains(k)) << k;
      }
      ++memory;
    }
  }
  EXPECT_GT(by_cat["cpu_op"], 50u);
  EXPECT_GE(by_cat["user_annotation"], 2u);  // ProfilerStep#3, #4 and the phases
  EXPECT_EQ(memory, 2u);
  for (const char* name : {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}) {
    EXPECT_TRUE(metadata_names.count(name)) << name;
  }
  const Json& last = events.back();
  EXPECT_EQ(last["name"], "Record Window End");
  EXPECT_EQ(last["ph"], "i");
  EXPECT_EQ(last["s"], "g");
  // ts carries exactly 3 decimals.
  EXPECT_TRUE(std::regex_search(w.text, std::regex(R"("ts": \d+\.\d{3}, "dur": \d+\.\d{3})")));
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

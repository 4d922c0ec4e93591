// Detailed profiling through the real `train` binary on tiny_rave: schedule
// semantics end to end (which steps a window records, repeat, --profile_steps, a window still
// open at max_steps or on SIGINT), and the written trace itself — Kineto schema, exact nesting,
// operators inside ProfilerStep spans, backward nodes linked to their forward ops by sequence
// number, "[memory]" events summing to the allocator's delta, per-module spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "support/trace_checks.h"
#include "util/atomic_file.h"
#include "util/json.h"

namespace rt {
namespace {

namespace fs = std::filesystem;
using rt::testing::run_command;

class TraceE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::testing::ScratchDir("trace_e2e");
    const std::string audio = (dir_->path() / "audio").string();
    db_ = (dir_->path() / "db").string();
    auto r = run_command(rt::testing::bin_path("preprocess") + " --generate_demo " + audio +
                         " --demo_seconds 3 --seed 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(rt::testing::bin_path("preprocess") + " --input_path " + audio + " --output_path " + db_ +
                    " --num_signal 8192");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // A failure in SetUpTestSuite only skips the tests under ctest: each test fails instead.
  void SetUp() override {
    ASSERT_TRUE(fs::is_regular_file(fs::path(db_) / "data.mdb")) << "the suite's demo database was not made";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // The train command for a run named `name` (its run directory is runs/<name>).
  std::string train(const std::string& name, const std::string& extra) const {
    return rt::testing::bin_path("train") + " --config tiny_rave --db_path " + db_ + " --out_path " +
           (dir_->path() / "runs").string() + " --name " + name +
           " --train.threads 1 --train.val_every 1000 --train.save_every 1000 --train.log_every 1 " + extra;
  }
  // The run directory of `name` (the one directory under runs/ that starts with it).
  fs::path run_dir(const std::string& name) const {
    for (const auto& e : fs::directory_iterator(dir_->path() / "runs")) {
      const std::string f = e.path().filename().string();
      if (e.is_directory() && f.rfind(name, 0) == 0) return e.path();
    }
    return {};
  }

  static rt::testing::ScratchDir* dir_;
  static std::string db_;
};
rt::testing::ScratchDir* TraceE2eTest::dir_ = nullptr;
std::string TraceE2eTest::db_;

std::vector<std::string> profiler_steps(const Json& trace) {
  std::vector<std::string> steps;
  for (const auto& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (e.value("ph", "") == "X" && name.rfind("ProfilerStep#", 0) == 0) steps.push_back(name);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

size_t count_traces(const fs::path& run) {
  size_t n = 0;
  if (!fs::exists(run / "profiler_traces")) return 0;
  for (const auto& e : fs::directory_iterator(run / "profiler_traces")) {
    n += std::regex_match(e.path().filename().string(),
                          std::regex(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$)"));
  }
  return n;
}

// wait 1, warmup 1, active 2 → steps 2 and 3 exactly; the trace of the real run passes the
// schema checks, nests exactly, keeps every training-thread op inside its step, links backward
// nodes to forward ops, accounts memory exactly and has per-module spans.
TEST_F(TraceE2eTest, ScheduleRecordsExactlyStepsTwoAndThreeWithAValidTrace) {
  // data.workers 0: batches load on the training thread, so every allocation of the window
  // happens between the two bytes-in-use readings (no concurrent loader thread).
  const auto r = run_command(train("sched",
                                   "--max_steps 5 --data.workers 0 --enable_profiling --profiling.wait 1 "
                                   "--profiling.warmup 1 --profiling.active 2 --profiling.repeat 1 "
                                   "--profiling.skip_first 0 --profiling.record_shapes "
                                   "--profiling.profile_memory --profiling.with_modules"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir("sched");
  ASSERT_TRUE(fs::exists(run / "profile_step_2.json")) << r.output;
  EXPECT_EQ(count_traces(run), 1u);
  EXPECT_NE(r.output.find("--- Profiler window: steps 2-3"), std::string::npos) << r.output;
  const std::string text = read_file(run / "profile_step_2.json");
  const Json j = Json::parse(text);
  EXPECT_EQ(profiler_steps(j), (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"}));

  rt::testing::check_kineto_top_level(text);
  const auto counts = rt::testing::check_kineto_events(j, /*expect_shapes=*/true);
  EXPECT_GT(counts.by_cat.at("cpu_op"), 500u);
  rt::testing::check_exact_nesting(j);
  EXPECT_EQ(rt::testing::check_ops_inside_steps(j), 1);

  // Backward nodes carry the sequence number of the forward op that created them.
  std::set<int64_t> forward_seq;
  std::vector<int64_t> backward_seq;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") != "cpu_op" || !e["args"].contains("Sequence number")) continue;
    const std::string name = e["name"];
    const int64_t seq = e["args"]["Sequence number"];
    EXPECT_TRUE(e["args"].contains("Fwd thread id")) << e.dump();
    if (name.find("Backward") != std::string::npos) {
      backward_seq.push_back(seq);
    } else {
      forward_seq.insert(seq);
    }
  }
  ASSERT_GT(backward_seq.size(), 50u);
  size_t linked = 0;
  for (int64_t s : backward_seq) linked += forward_seq.count(s);
  EXPECT_EQ(linked, backward_seq.size()) << "backward nodes without a forward op of the same sequence number";

  // "[memory]": the CPU events of the window sum to the allocator's bytes-in-use delta.
  ASSERT_GT(counts.memory, 100u);
  int64_t sum = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") == "[memory]" && e["args"]["Device Type"] == 0)
      sum += e["args"]["Bytes"].get<int64_t>();
    // Without --enable_memory_profiling no block is tagged: no event claims a category.
    if (e.value("name", "") == "[memory]") {
      EXPECT_FALSE(e["args"].contains("Category")) << e.dump();
    }
  }
  EXPECT_EQ(sum, j["cpu_bytes_in_use_window_end"].get<int64_t>() -
                     j["cpu_bytes_in_use_window_start"].get<int64_t>());

  // with_modules: spans named by module path for RAVE's main blocks, written as torch's module
  // events (python_function with Python ids) for TensorBoard's plugin's Module view.
  std::map<std::string, size_t> modules, annotations;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") == "python_function") {
      modules[e["name"]]++;
      EXPECT_TRUE(e["args"].contains("Python id") && e["args"].contains("Python module id")) << e.dump();
    }
    if (e.value("cat", "") == "user_annotation") annotations[e["name"]]++;
  }
  for (const char* m : {"pqmf", "encoder", "decoder", "encoder.encoder.net.0", "encoder.encoder.net.3",
                        "decoder.net.0", "encoder.encoder.net.1.aligned.branches.0.net.1"}) {
    EXPECT_EQ(modules[m] % 2, 0u) << m;  // once per step (pqmf: analysis and synthesis)
    EXPECT_GE(modules[m], 2u) << m;
  }
  EXPECT_EQ(annotations["forward"], 2u);  // trainer phases are spans too, once per step
  // The batch fetch also under the name TensorBoard's plugin counts as data loading.
  EXPECT_EQ(annotations["enumerate(DataLoader)#Loader.__next__"], 2u);
  EXPECT_EQ(annotations["data_batch_production"], 2u);
}

// With memory profiling too, "[memory]" events say what their block held: the gradients that
// each step's zero_grad frees, and the activations and temporaries of forward and backward.
TEST_F(TraceE2eTest, MemoryEventsNameTheirCategoryWithMemoryProfiling) {
  const auto r = run_command(train("cats",
                                   "--max_steps 4 --data.workers 0 --enable_profiling --profiling.wait 1 "
                                   "--profiling.warmup 1 --profiling.active 2 --profiling.repeat 1 "
                                   "--profiling.skip_first 0 --profiling.profile_memory "
                                   "--enable_memory_profiling"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = Json::parse(read_file(run_dir("cats") / "profile_step_2.json"));
  std::map<std::string, size_t> frees, allocs;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "[memory]" || !e["args"].contains("Category")) continue;
    (e["args"]["Bytes"].get<int64_t>() < 0 ? frees : allocs)[e["args"]["Category"]]++;
  }
  for (const auto& [category, n] : frees) {
    EXPECT_TRUE(category == "gradients" || category == "activations_and_temporaries" ||
                category == "optimizer_state" || category == "parameters" || category == "buffers")
        << category;
  }
  EXPECT_GT(frees["gradients"], 0u);
  EXPECT_GT(allocs["gradients"], 0u);  // allocated in the window too, paired with their frees
  EXPECT_GT(frees["activations_and_temporaries"], 100u);
}

TEST_F(TraceE2eTest, RepeatTwoWritesTwoTracesAndStacks) {
  const auto r = run_command(train("repeat",
                                   "--max_steps 4 --enable_profiling --profiling.wait 0 --profiling.warmup 0 "
                                   "--profiling.active 1 --profiling.repeat 2 --profiling.skip_first 1 "
                                   "--profiling.with_stack"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir("repeat");
  EXPECT_EQ(count_traces(run), 2u);
  for (int step : {1, 2}) {
    const fs::path trace = run / ("profile_step_" + std::to_string(step) + ".json");
    ASSERT_TRUE(fs::exists(trace)) << r.output;
    const Json j = Json::parse(read_file(trace));
    EXPECT_EQ(profiler_steps(j), std::vector<std::string>{"ProfilerStep#" + std::to_string(step)});
    rt::testing::check_kineto_events(j, false);
    rt::testing::check_exact_nesting(j);
    const std::string stacks = read_file(run / ("profile_step_" + std::to_string(step) + "_stacks.txt"));
    // Collapsed stacks: "frame;frame;…;op <µs>" lines, some through our training code.
    EXPECT_TRUE(std::regex_search(stacks, std::regex(R"(;aten::\S+ \d+\n)"))) << stacks.substr(0, 500);
    EXPECT_NE(stacks.find("rt::"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(run / "profile_step_3.json"));
}

TEST_F(TraceE2eTest, ProfileStepsIsActiveNAfterSkipFirstAndWarmup) {
  const auto r = run_command(train("psteps",
                                   "--max_steps 5 --enable_profiling --profile_steps 2 "
                                   "--profiling.skip_first 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir("psteps");
  EXPECT_EQ(count_traces(run), 1u);
  // skip_first 1, the default warm-up step (2), then 2 recorded steps.
  ASSERT_TRUE(fs::exists(run / "profile_step_2.json")) << r.output;
  EXPECT_EQ(profiler_steps(Json::parse(read_file(run / "profile_step_2.json"))),
            (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"}));
}

TEST_F(TraceE2eTest, WindowOpenAtMaxStepsIsSaved) {
  const auto r = run_command(train("open",
                                   "--max_steps 3 --enable_profiling --profiling.warmup 0 "
                                   "--profiling.active 10 --profiling.skip_first 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir("open");
  ASSERT_TRUE(fs::exists(run / "profile_step_1.json")) << r.output;
  EXPECT_EQ(profiler_steps(Json::parse(read_file(run / "profile_step_1.json"))),
            (std::vector<std::string>{"ProfilerStep#1", "ProfilerStep#2"}));
}

TEST_F(TraceE2eTest, WindowOpenOnSigintIsSaved) {
  const fs::path log = dir_->path() / "sigint.log";
  // Interrupt once step 3 is logged; the window (steps 0…) is still open then.
  const std::string script = train("sigint",
                                   "--max_steps 100000 --enable_profiling --profiling.warmup 0 "
                                   "--profiling.active 100000 --profiling.skip_first 0") +
                             " > " + log.string() +
                             " 2>&1 & pid=$!; for i in $(seq 1 600); do "
                             "grep -q '^step 3/' " +
                             log.string() +
                             " && break; sleep 0.1; done; "
                             "kill -INT $pid; wait $pid; echo exit=$?";
  const auto r = run_command(script);
  const std::string out = read_file(log);
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output << out;
  EXPECT_NE(out.find("training interrupted"), std::string::npos) << out;
  const fs::path run = run_dir("sigint");
  ASSERT_TRUE(fs::exists(run / "profile_step_0.json")) << out;
  const Json j = Json::parse(read_file(run / "profile_step_0.json"));
  const auto steps = profiler_steps(j);
  EXPECT_GE(steps.size(), 3u);
  rt::testing::check_kineto_events(j, false);
  rt::testing::check_exact_nesting(j);
}

}  // namespace
}  // namespace rt

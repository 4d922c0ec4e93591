// The trace session's outputs: a new format is added without touching the session, each output
// reports what it produced, and one failing output leaves the others running.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "profiling/trace/trace_session.h"
#include "support/test_support.h"
#include "trace_test_model.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt::prof {
namespace {

using rt::prof::testing::TinyNet;
using rt::prof::testing::train_step;
using rt::prof::testing::two_window_schedule;

// A test-only format: counts each window's activities and records its steps, in memory and in
// counts_<N>.txt.
class CountingOutput : public TraceOutput {
 public:
  struct Seen {
    int64_t first_step, last_step;
    size_t activities;
  };
  explicit CountingOutput(std::vector<Seen>* seen, const char* name = "counting")
      : seen_(seen), name_(name) {}
  const char* name() const override { return name_; }
  void write(const Timeline& timeline, const WindowContext& window, OutputResult& result) override {
    seen_->push_back({timeline.first_step, timeline.last_step, timeline.activities.size()});
    const auto path = window.output_dir / ("counts_" + std::to_string(timeline.first_step) + ".txt");
    write_file_atomic(path, std::to_string(timeline.activities.size()) + "\n");
    result.files.push_back(path);
    result.text = "counted " + std::to_string(timeline.activities.size()) + " activities\n";
  }

 private:
  std::vector<Seen>* seen_;
  const char* name_;
};

class ThrowingOutput : public TraceOutput {
 public:
  const char* name() const override { return "throwing"; }
  void write(const Timeline&, const WindowContext&, OutputResult&) override { throw Error("disk full"); }
};

// Trains `steps` steps under `session`.
void run_steps(TraceSession& session, int steps) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  TinyNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({3, 2, 16}), y = torch::randn({3, 4});
  for (int step = 0; step < steps; ++step) {
    session.step_begin(step);
    train_step(net, opt, x, y);
    session.step_end();
  }
  session.finish();
}

TraceSessionOptions two_windows(const std::filesystem::path& dir, std::ostream* table) {
  TraceSessionOptions o;
  o.schedule = two_window_schedule();
  o.output_dir = dir;
  o.table_out = table;
  return o;
}

std::vector<std::string> names_of(const std::vector<std::unique_ptr<TraceOutput>>& outputs) {
  std::vector<std::string> names;
  for (const auto& o : outputs) names.emplace_back(o->name());
  return names;
}

TEST(TraceOutputTest, StandardOutputsFollowTheOptions) {
  TraceSessionOptions o;
  EXPECT_EQ(names_of(standard_trace_outputs(o)), (std::vector<std::string>{"chrome_trace", "op_table"}));
  o.tracer.with_stack = true;
  EXPECT_EQ(names_of(standard_trace_outputs(o)),
            (std::vector<std::string>{"chrome_trace", "collapsed_stacks", "op_table"}));
  o.row_limit = 0;
  EXPECT_THROW(standard_trace_outputs(o), Error);
}

TEST(TraceOutputTest, AddedOutputSeesEveryWindowAndIsReported) {
  rt::testing::ScratchDir dir("trace_output_added");
  std::ostringstream console;
  std::vector<CountingOutput::Seen> seen;
  TraceSession session(two_windows(dir.path(), &console));
  session.add_output(std::make_unique<CountingOutput>(&seen));
  run_steps(session, 10);

  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first_step, 2);
  EXPECT_EQ(seen[0].last_step, 3);
  EXPECT_EQ(seen[1].first_step, 6);
  EXPECT_EQ(seen[1].last_step, 7);
  ASSERT_EQ(session.windows().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const WindowResult& w = session.windows()[i];
    EXPECT_GT(seen[i].activities, w.cpu_ops);  // operators plus the step and phase annotations
    ASSERT_EQ(w.outputs.size(), 3u);
    EXPECT_EQ(w.outputs[0].output, "chrome_trace");
    EXPECT_EQ(w.outputs[1].output, "op_table");
    const OutputResult* counting = w.output("counting");
    ASSERT_NE(counting, nullptr);
    EXPECT_TRUE(counting->error.empty());
    ASSERT_EQ(counting->files.size(), 1u);
    EXPECT_EQ(read_file(counting->files[0]), std::to_string(seen[i].activities) + "\n");
    // The standard outputs still report theirs: both trace copies, and the table as text.
    const OutputResult* chrome = w.output("chrome_trace");
    ASSERT_NE(chrome, nullptr);
    ASSERT_EQ(chrome->files.size(), 2u);
    EXPECT_EQ(chrome->files[1], dir / ("profile_step_" + std::to_string(w.first_step) + ".json"));
    EXPECT_NE(w.output("op_table")->text.find("Self CPU time total: "), std::string::npos);
  }
  // The console shows each window's line, then every output's text in order.
  const std::string text = console.str();
  const size_t line = text.find("--- Profiler window: steps 2-3");
  const size_t table = text.find("Self CPU time total: ");
  const size_t counted = text.find("counted " + std::to_string(seen[0].activities) + " activities");
  ASSERT_NE(line, std::string::npos) << text;
  EXPECT_NE(text.find(session.windows()[0].outputs[0].files[0].string() + " ---"), std::string::npos) << text;
  EXPECT_LT(line, table);
  EXPECT_LT(table, counted);
}

TEST(TraceOutputTest, FailingOutputIsReportedAndTheOthersStillRun) {
  rt::testing::ScratchDir dir("trace_output_failing");
  // A file where the Chrome trace wants its profiler_traces/ folder: that output fails.
  { std::ofstream(dir / "profiler_traces") << "in the way"; }
  std::ostringstream console;
  std::vector<CountingOutput::Seen> seen;
  TraceSessionOptions o = two_windows(dir.path(), &console);
  o.tracer.with_stack = true;
  TraceSession session(o);
  session.add_output(std::make_unique<ThrowingOutput>());
  session.add_output(std::make_unique<CountingOutput>(&seen));
  ::testing::internal::CaptureStderr();
  run_steps(session, 10);
  const std::string warnings = ::testing::internal::GetCapturedStderr();

  ASSERT_EQ(session.windows().size(), 2u);
  EXPECT_EQ(seen.size(), 2u);  // an output after the failing ones still ran, every window
  for (const WindowResult& w : session.windows()) {
    ASSERT_EQ(w.outputs.size(), 5u);
    EXPECT_FALSE(w.output("chrome_trace")->error.empty());
    EXPECT_EQ(w.output("throwing")->error, "disk full");
    EXPECT_TRUE(w.output("collapsed_stacks")->error.empty());
    EXPECT_TRUE(
        std::filesystem::exists(dir / ("profile_step_" + std::to_string(w.first_step) + "_stacks.txt")));
    EXPECT_NE(w.output("op_table")->text.find("Self CPU time total: "), std::string::npos);
    EXPECT_TRUE(w.output("counting")->error.empty());
  }
  EXPECT_NE(warnings.find("trace output 'chrome_trace' failed for steps 2-3"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("trace output 'throwing' failed for steps 6-7: disk full"), std::string::npos)
      << warnings;
  // Without the trace, the window's line names the first file that was written.
  EXPECT_NE(console.str().find("→ " + (dir / "profile_step_2_stacks.txt").string() + " ---"),
            std::string::npos)
      << console.str();
}

// The trace is written once: profile_step_<N>.json is the profiler_traces/ file under a second
// name (one inode), not a second copy. Before: two inodes of the same megabytes.
TEST(TraceOutputTest, TheStepFileIsALinkToTheTraceNotASecondCopy) {
  rt::testing::ScratchDir dir;
  std::ostringstream table;
  TraceSession session(two_windows(dir.path(), &table));
  run_steps(session, 6);
  ASSERT_FALSE(session.windows().empty());
  for (const auto& w : session.windows()) {
    const OutputResult* chrome = w.output("chrome_trace");
    ASSERT_NE(chrome, nullptr);
    ASSERT_EQ(chrome->files.size(), 2u);
    const auto& trace = chrome->files[0];
    const auto& step_file = chrome->files[1];
    EXPECT_EQ(step_file.filename().string().rfind("profile_step_", 0), 0u) << step_file;
    EXPECT_TRUE(std::filesystem::equivalent(trace, step_file))
        << trace << " and " << step_file << " are two files";
    EXPECT_EQ(std::filesystem::hard_link_count(trace), 2u) << trace;
    EXPECT_EQ(read_file(step_file), read_file(trace));
  }
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left: " << e.path();
  }
}

TEST(TraceOutputTest, SecondOutputOfTheSameNameIsRefused) {
  rt::testing::ScratchDir dir("trace_output_duplicate");
  std::vector<CountingOutput::Seen> seen;
  TraceSession session(two_windows(dir.path(), nullptr));
  session.add_output(std::make_unique<CountingOutput>(&seen));
  EXPECT_THROW(session.add_output(std::make_unique<CountingOutput>(&seen)), Error);
  try {
    session.add_output(std::make_unique<CountingOutput>(&seen, "op_table"));
    ADD_FAILURE() << "a second op_table was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'op_table' is already added"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rt::prof

// profile-report on real runs of train: a run with an artificially slow data loader is named
// data-bound, a normal one is not, --compare shows both with ratios, --json parses, --plots
// writes PNGs, and a traced run lists its top operators.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "profiling/report/plots.h"
#include "util/atomic_file.h"
#include "util/json.h"

namespace rt::report_e2e {
namespace {

using testing::ScratchDir;

// 100 ms per example, loaded on the training thread (workers 0): ~400 ms of each step is data.
const char* kSlowLoader = "--data.slowdown_ms 100 --workers 0 --enable_timing_profiling";

TEST(ReportE2E, SlowedLoaderIsNamedTheBottleneck) {
  ScratchDir dir("report_e2e");
  const fs::path db = make_demo_db(dir.path());
  const fs::path run = train_run(db, dir / "runs", "slow", 8, kSlowLoader);
  ASSERT_FALSE(run.empty());

  const auto text = profile_report(q(run));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("Bottleneck: data loading"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("data-bound"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("data.workers"), std::string::npos) << text.output;

  const auto json = profile_report(q(run) + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const Json j = Json::parse(json.output);
  EXPECT_EQ(j["phases"]["bottleneck"], "data");
  EXPECT_EQ(j["identity"]["total_steps"], 8);
  EXPECT_EQ(j["identity"]["settings"]["data.workers"], "0");
  EXPECT_GT(j["phases"]["items"][0]["share"].get<double>(), 0.5);
}

TEST(ReportE2E, NormalRunIsNotDataBoundAndCompareShowsBothWithRatios) {
  ScratchDir dir("report_e2e");
  const fs::path db = make_demo_db(dir.path());
  const fs::path normal =
      train_run(db, dir / "runs_a", "normal", 30, "--enable_timing_profiling --enable_memory_profiling");
  const fs::path slow = train_run(db, dir / "runs_b", "slow", 8, kSlowLoader);
  ASSERT_FALSE(normal.empty());
  ASSERT_FALSE(slow.empty());

  const auto text = profile_report(q(normal));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(text.output.find("Bottleneck: data loading"), std::string::npos) << text.output;
  EXPECT_EQ(text.output.find("data-bound"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("Bottleneck: "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("Memory (memory_profile.json"), std::string::npos) << text.output;

  const auto cmp = profile_report(q(normal) + " --compare " + q(slow));
  ASSERT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_NE(cmp.output.find(normal.filename().string().substr(0, 10)), std::string::npos) << cmp.output;
  EXPECT_NE(cmp.output.find(slow.filename().string().substr(0, 10)), std::string::npos) << cmp.output;
  EXPECT_NE(cmp.output.find("B/A"), std::string::npos);
  EXPECT_NE(cmp.output.find("data loading / step"), std::string::npos) << cmp.output;

  const auto cj = profile_report(q(normal) + " --compare " + q(slow) + " --json");
  ASSERT_EQ(cj.exit_code, 0) << cj.output;
  const Json c = Json::parse(cj.output);
  EXPECT_EQ(c["a"]["run_dir"], normal.string());
  EXPECT_EQ(c["b"]["run_dir"], slow.string());
  EXPECT_GT(c["ratios"]["phase_data"].get<double>(), 5.0);
  EXPECT_GT(c["ratios"]["median_step_time"].get<double>(), 1.5);

  if (!report::find_gnuplot().empty()) {
    const auto plots = profile_report(q(normal) + " --compare " + q(slow) + " --plots " + q(dir / "plots"));
    ASSERT_EQ(plots.exit_code, 0) << plots.output;
    for (const char* png : {"memory_plot.png", "step_time_plot.png"}) {
      const std::string bytes = read_file(dir / "plots" / png);
      EXPECT_EQ(bytes.compare(0, 4, "\x89PNG"), 0) << png;
    }
    // Plots already there are replaced only with --force; the refusal comes before the report.
    const auto again = profile_report(q(normal) + " --plots " + q(dir / "plots"));
    EXPECT_EQ(again.exit_code, 2) << again.output;
    EXPECT_NE(again.output.find("memory_plot.png' already exists; pass --force"), std::string::npos)
        << again.output;
    EXPECT_EQ(again.output.find("data loading / step"), std::string::npos) << again.output;
    const auto forced = profile_report(q(normal) + " --plots " + q(dir / "plots") + " --force");
    EXPECT_EQ(forced.exit_code, 0) << forced.output;
  }
}

TEST(ReportE2E, TracedRunListsTopOperators) {
  ScratchDir dir("report_e2e");
  const fs::path db = make_demo_db(dir.path());
  const fs::path run = train_run(db, dir / "runs", "traced", 6,
                                 "--enable_profiling --profile_steps 2 --profiling.skip_first 2");
  ASSERT_FALSE(run.empty());
  const auto r = profile_report(q(run) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = Json::parse(r.output);
  ASSERT_FALSE(j["top_operators"]["cpu"].empty()) << r.output;
  EXPECT_EQ(j["top_operators"]["profiler_steps"], 2);
  // Sorted by self time, and ATen's operators among them. Which one comes first depends on the
  // machine's load (an autograd node such as SubBackward0 can lead), so that is not asserted.
  const Json& ops = j["top_operators"]["cpu"];
  bool has_aten = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string name = ops[i]["name"];
    EXPECT_FALSE(name.empty());
    has_aten = has_aten || name.rfind("aten::", 0) == 0;
    if (i > 0) {
      EXPECT_GE(ops[i - 1]["self_us"].get<double>(), ops[i]["self_us"].get<double>()) << ops.dump();
    }
  }
  EXPECT_TRUE(has_aten) << ops.dump();
  const auto text = profile_report(q(run));
  EXPECT_NE(text.output.find("Top operators by CPU self time"), std::string::npos) << text.output;
}

TEST(ReportE2E, NotARunDirectoryIsAClearError) {
  ScratchDir dir("report_e2e");
  const auto r = profile_report(q(dir.path()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("training_summary.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rt::report_e2e

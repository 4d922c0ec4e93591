// profile-report --export_list on a real run of train: the streamed timing and memory profiles
// written as the single JSON lists the profiling guides read whole, under their own names in
// another folder; the report's folder itself is refused.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "util/atomic_file.h"
#include "util/json.h"
#include "util/profile_files.h"

namespace rt::report_e2e {
namespace {

using testing::ScratchDir;

using testing::contains;

TEST(ReportExportList, WritesEachProfileAsOneListOfEveryEntry) {
  ScratchDir dir("report_export");
  const fs::path db = make_demo_db(dir.path());
  const fs::path run = train_run(db, dir / "runs", "export", 12,
                                 "--log_every 1 --enable_timing_profiling --enable_memory_profiling "
                                 "--profiling.memory_every 1");
  ASSERT_FALSE(run.empty());

  const fs::path out = dir / "lists";
  const auto r = profile_report(q(dir / "runs" / "latest") + " --export_list " + q(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"timing_profile.json", "memory_profile.json"}) {
    EXPECT_TRUE(contains(r.output, "exported: " + (out / name).string() + " (")) << r.output;
    const std::string text = read_file(out / name);
    EXPECT_EQ(text.substr(0, 4), "[\n  ") << name;
    EXPECT_EQ(text.substr(text.size() - 3), "\n]\n") << name;
    const Json list = Json::parse(text);
    ASSERT_TRUE(list.is_array()) << name;
    EXPECT_EQ(list, read_profile_entries(run / name)) << name;
    ASSERT_FALSE(list.empty()) << name;
    EXPECT_EQ(list.back().at("step"), 11) << name;  // steps 0-11
  }
  EXPECT_EQ(read_json(out / "timing_profile.json").size(), 12u);
  for (const auto& f : fs::directory_iterator(out)) {
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << "left: " << f.path();
  }

  // A second export into the same folder replaces nothing without --force, and does with it.
  write_file_atomic(out / "memory_profile.json", "[]\n");
  const auto again = profile_report(q(run) + " --export_list " + q(out));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_TRUE(contains(again.output, "already exists; pass --force to replace it")) << again.output;
  EXPECT_EQ(read_file(out / "memory_profile.json"), "[]\n");
  const auto forced = profile_report(q(run) + " --export_list " + q(out) + " --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(read_json(out / "timing_profile.json").size(), 12u);

  // The run's own folder would have the list replace the file the trainer streams into.
  const auto same = profile_report(q(run) + " --export_list " + q(run));
  EXPECT_EQ(same.exit_code, 2) << same.output;
  EXPECT_TRUE(contains(same.output, "is the folder the run's profiles are in")) << same.output;
  EXPECT_EQ(read_profile_entries(run / "timing_profile.json").size(), 12u);

  // An export is not a report: the report's options are refused beside it.
  const auto both = profile_report(q(run) + " --export_list " + q(out) + " --json");
  EXPECT_NE(both.exit_code, 0) << both.output;

  const auto help = profile_report("--help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_TRUE(contains(help.output, "--export_list")) << help.output;
}

TEST(ReportExportList, ARunWithoutProfilesIsNamed) {
  ScratchDir dir("report_export_none");
  const fs::path db = make_demo_db(dir.path());
  const fs::path run = train_run(db, dir / "runs", "plain", 2, "");
  ASSERT_FALSE(run.empty());
  const auto r = profile_report(q(run) + " --export_list " + q(dir / "lists"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "holds no timing_profile.json or memory_profile.json")) << r.output;
}

}  // namespace
}  // namespace rt::report_e2e

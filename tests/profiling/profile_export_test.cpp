// export_profile_list (util/profile_export.h): a streamed, rotated profile written by the
// trainer's own writers becomes the single JSON list of the earlier format, every part in order,
// atomically.
#include "util/profile_export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "profiling/profile_writers.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"
#include "util/profile_files.h"

namespace rt::prof {
namespace {

namespace fs = std::filesystem;

TimingEntry exported_entry(int64_t step) {
  TimingEntry e;
  e.step = step;
  e.batch_idx = step;
  e.total_batch_time = 0.045 + 1e-6 * static_cast<double>(step);
  e.samples_per_second = 177.78;
  e.data_time = 0.001;
  e.forward_time = 0.02;
  e.backward_time = 0.02;
  e.optimizer_time = 0.004;
  return e;
}

// The layout of the earlier single-list file: "[\n", entry lines "  {…}," with the last one
// without its comma, "]\n".
void expect_single_list_layout(const std::string& text, size_t entries) {
  ASSERT_GE(text.size(), 4u);
  EXPECT_EQ(text.substr(0, 2), "[\n");
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  size_t n = 0;
  while (std::getline(in, line) && line != "]") {
    ++n;
    ASSERT_EQ(line.substr(0, 3), "  {") << "line " << n;
    EXPECT_EQ(line.back(), n < entries ? ',' : '}') << "line " << n;
  }
  EXPECT_EQ(n, entries);
}

TEST(ProfileListExport, ARotatedTimingProfileBecomesOneListOfEveryPartInOrder) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, FlushPolicy{0.0, 7}, RotationPolicy{16 * 1024, 100});
    for (int64_t s = 0; s < 1000; ++s) writer.record(exported_entry(s));
    writer.close();
    ASSERT_GT(writer.file().rotations(), 3);
  }
  ASSERT_GT(profile_parts(path).size(), 3u);
  const fs::path out = dir / "export" / "timing_profile.json";
  std::vector<std::string> notes;
  const ProfileListExport e = export_profile_list(path, out, &notes);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(e.written, out);
  EXPECT_EQ(e.entries, 1000);
  EXPECT_EQ(e.files, static_cast<int64_t>(profile_parts(path).size()) + 1);
  const std::string text = read_file(out);
  expect_single_list_layout(text, 1000);
  const Json list = Json::parse(text);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1000u);
  for (int64_t s = 0; s < 1000; ++s) ASSERT_EQ(list[static_cast<size_t>(s)].at("step"), s);
  EXPECT_EQ(list, read_profile_entries(path));
  // Nothing but the list is left in the folder: the temporary file was renamed.
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(out.parent_path())) {
    ++files;
    EXPECT_EQ(f.path(), out);
  }
  EXPECT_EQ(files, 1u);
}

TEST(ProfileListExport, AMemoryProfileAndAnEmptyOneKeepTheirEntries) {
  testing::ScratchDir dir;
  const fs::path path = dir / "memory_profile.json";
  MemorySample s;
  s.cpu_tracked = true;
  s.cpu_bytes_in_use = 1000;
  s.process = {3000, 4000};
  {
    MemoryProfileWriter writer(path, 10, FlushPolicy{0.0, 1}, RotationPolicy{4 * 1024, 100});
    for (int64_t step = 0; step < 400; ++step) {
      s.cpu_bytes_in_use = 1000 + step;
      writer.record(step, step, s, Json{{"categories", {{"parameters", step}}}});
    }
  }
  ASSERT_FALSE(profile_parts(path).empty());
  const fs::path out = dir / "out" / "memory_profile.json";
  EXPECT_EQ(export_profile_list(path, out).entries, 40);
  const Json list = read_json(out);
  ASSERT_EQ(list.size(), 40u);
  EXPECT_EQ(list, read_profile_entries(path));
  EXPECT_EQ(list[39].at("step"), 390);
  EXPECT_EQ(list[39].at("categories").at("parameters"), 390);

  const fs::path empty = dir / "empty" / "timing_profile.json";
  { TimingProfileWriter writer(empty, 1, FlushPolicy{0.0, 1}); }
  const fs::path empty_out = dir / "out" / "timing_profile.json";
  EXPECT_EQ(export_profile_list(empty, empty_out).entries, 0);
  EXPECT_EQ(read_file(empty_out), "[]\n");
}

// A profile whose last line a killed writer cut short: its complete entries, and a note naming
// the file (as profile-report's reader).
TEST(ProfileListExport, AFileCutShortGivesItsCompleteEntriesWithANote) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, FlushPolicy{0.0, 1}, RotationPolicy{4 * 1024, 100});
    for (int64_t s = 0; s < 60; ++s) writer.record(exported_entry(s));
  }
  const std::string text = read_file(path);
  write_file_atomic(path, text.substr(0, text.size() - 3) + ",\n  {\"step\": 60, \"batch_i");
  const fs::path out = dir / "out" / "timing_profile.json";
  std::vector<std::string> notes;
  EXPECT_EQ(export_profile_list(path, out, &notes).entries, 60);
  const Json list = read_json(out);
  ASSERT_EQ(list.size(), 60u);
  EXPECT_EQ(list.back().at("step"), 59);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("was cut short while being written"), std::string::npos) << notes[0];
}

// A part in another layout (a list written whole, entries over several lines) is read whole;
// the entries of the files before and after it stay in order.
TEST(ProfileListExport, APartInAnotherLayoutIsReadWhole) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, FlushPolicy{0.0, 1});
    for (int64_t s = 2; s < 5; ++s) writer.record(exported_entry(s));
  }
  write_file_atomic(profile_part_path(path, 1),
                    Json::array({{{"step", 0}}, {{"step", 1}, {"note", "a, b"}}}).dump(2));
  const fs::path out = dir / "out" / "timing_profile.json";
  std::vector<std::string> notes;
  EXPECT_EQ(export_profile_list(path, out, &notes).entries, 5);
  EXPECT_TRUE(notes.empty());
  const std::string text = read_file(out);
  expect_single_list_layout(text, 5);
  const Json list = Json::parse(text);
  for (int64_t s = 0; s < 5; ++s) EXPECT_EQ(list[static_cast<size_t>(s)].at("step"), s);
  EXPECT_EQ(list[1].at("note"), "a, b");
}

// The list never replaces one of the files it is read from, and a failed export leaves the
// previous list as it was.
TEST(ProfileListExport, RefusesToWriteOverItsOwnPartsAndKeepsThePreviousListOnFailure) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, FlushPolicy{0.0, 1}, RotationPolicy{4 * 1024, 100});
    for (int64_t s = 0; s < 60; ++s) writer.record(exported_entry(s));
  }
  const auto parts = profile_parts(path);
  ASSERT_FALSE(parts.empty());
  const std::string part_before = read_file(parts[0]);
  EXPECT_THROW(export_profile_list(path, parts[0]), Error);
  EXPECT_THROW(export_profile_list(path, path), Error);
  EXPECT_EQ(read_file(parts[0]), part_before);
  EXPECT_THROW(export_profile_list(dir / "absent.json", dir / "out.json"), Error);
  EXPECT_FALSE(fs::exists(dir / "out.json"));

  // A part that cannot be read fails the export: the previous list stays, no temporary is left.
  const fs::path out = dir / "out" / "timing_profile.json";
  write_file_atomic(out, "[]\n");
  fs::remove(parts[0]);
  fs::create_directory(parts[0]);  // a folder where a part was: reading it fails
  EXPECT_THROW(export_profile_list(path, out), Error);
  EXPECT_EQ(read_file(out), "[]\n");
  for (const auto& f : fs::directory_iterator(out.parent_path())) EXPECT_EQ(f.path(), out);
}

}  // namespace
}  // namespace rt::prof

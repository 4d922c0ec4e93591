#include <gtest/gtest.h>

#include <filesystem>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"
#include "support/test_support.h"

namespace rt {
namespace {

TEST(AtomicFile, ReplacesContentsAndLeavesNoTemporaryFile) {
  testing::ScratchDir dir;
  const auto path = dir / "sub/dir/file.txt";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(read_file(path), "second, longer");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path.parent_path())) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST(AtomicFile, ErrorNamesThePath) {
  try {
    write_file_atomic("/proc/rt_cannot_write_here/x.json", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/rt_cannot_write_here"), std::string::npos) << e.what();
  }
}

TEST(Json, RoundTripsAndReportsParseErrorsWithPath) {
  testing::ScratchDir dir;
  write_json_atomic(dir / "a.json", Json{{"step", 3}, {"loss", 0.5}});
  Json back = read_json(dir / "a.json");
  EXPECT_EQ(back["step"], 3);
  write_file_atomic(dir / "bad.json", "{\"step\": ");
  try {
    read_json(dir / "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
  }
}

TEST(ClosestMatch, SuggestsNearbyNamesOnly) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(closest_match("learing_rate", {"lr", "learning_rate", "batch"}), "learning_rate");
  EXPECT_EQ(closest_match("zzzzzzzz", {"lr", "learning_rate", "batch"}), "");
}

}  // namespace
}  // namespace rt

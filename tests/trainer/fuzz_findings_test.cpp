// Inputs found by the fuzz targets (tests/fuzz/, scripts/fuzz.sh), kept as regression tests.
// The raw inputs are also in the seed corpora (tests/fuzz/corpus/<target>/regress-*), which
// every fuzz run replays under the sanitizers first.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/test_support.h"
#include "trainer/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// fuzz_checkpoint: one byte changed in the archive's pickle made torch's reader throw a plain
// std::runtime_error with a multi-line excerpt of the pickle, which escaped as a raw error.
TEST(CheckpointFuzzFindings, ACorruptPickleIsRefusedInOneLineNamingTheFile) {
  testing::ScratchDir dir("ckpt_fuzz");
  const fs::path ckpt = dir / "corrupt.ckpt";
  CheckpointMeta meta;
  meta.family = "rave";
  meta.signature = "model.family = rave";
  meta.step = 3;
  save_checkpoint(ckpt, meta, [](torch::serialize::OutputArchive& a) { a.write("w", torch::ones({2})); });
  std::string bytes = read_file(ckpt);
  const std::string global = "ccollections\nOrderedDict";
  const auto at = bytes.find(global);
  ASSERT_NE(at, std::string::npos) << "the archive's pickle no longer names collections.OrderedDict";
  bytes[at + 1] = '(';
  write_file_atomic(ckpt, bytes);
  try {
    (void)read_checkpoint_meta(ckpt);
    FAIL() << "a corrupt checkpoint was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(ckpt.string()), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line:\n" << what;
  }
}

TEST(FirstLine, KeepsTheTextBeforeTheFirstNewline) {
  EXPECT_EQ(first_line("expected ) but found 'eof' here:\n(ollections"), "expected ) but found 'eof' here:");
  EXPECT_EQ(first_line("one line"), "one line");
  EXPECT_EQ(first_line(""), "");
}

}  // namespace
}  // namespace rt
